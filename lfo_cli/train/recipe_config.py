"""The `kind: grpo` recipe schema: what `lfo train --recipe dual_lora_micro` resolves into.

Sections mirror the recipe YAML. ``trainer`` holds any `DualLoRAConfig`/`GRPOConfig` field (checked
against the dataclass, so a typo is one clear error); the world-model knobs are ``wm``, a
:class:`~lfo_cli.train.wm_settings.WorldModelSettings` that becomes ``DualLoRAConfig.wm`` as is.
:meth:`TrainConfig.training_args` builds the run's `DualLoRAConfig`, once per run.
"""

from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from lfo_cli.errors import LfoError
from lfo_cli.recipes import coerce, type_hints
from lfo_cli.train.adapters import LoraSettings
from lfo_cli.train.config import DualLoRAConfig
from lfo_cli.train.wm_settings import WorldModelSettings
from lfo_cli.worlds import DEFAULT_KIND, WorldChoice, world_class
from lfo_cli.worlds.settings import WorldRecipe, extend, fit_section


@dataclass
class ModelSection:
    name: str = field(default="micro", metadata={"help": "Registry name (micro, smollm2-135m), local path or hub id."})
    warmstart: str | None = field(
        default="warmstart_micro",
        metadata={"help": "Warm-start recipe whose cached checkpoint is the base (built first if missing); "
                  "null starts from `name` as is."},
    )
    warmstart_per_seed: bool = field(
        default=False,
        metadata={"help": "Build the warm start with this run's seed (its recipe's `seed`), so each seed of a study "
                  "starts from its own draw of the warm start: a warm start's quality varies between draws "
                  "(docs/study.md), and one shared draw per arm confounds the arm with its draw. false = the "
                  "warm-start recipe's own seed."},
    )
    dtype: Literal["float32", "bfloat16", "float16"] = field(default="float32", metadata={"help": "Base dtype."})


@dataclass
class DataSection:
    """Which tasks RL trains on: lfo's keys; the world's own (:attr:`lfo_cli.worlds.World.train_data`) join them."""

    world_settings: ClassVar[bool] = True  # a world adds keys here (lfo_cli.worlds.settings)
    dir: str = field(default="data", metadata={"help": "Directory written by `lfo gen-env`."})
    min_difficulty: int = field(default=1, metadata={"help": "Lowest task difficulty trained on."})
    max_difficulty: int = field(default=5, metadata={"help": "Highest task difficulty trained on."})
    difficulty_weights: dict[int, float] | None = field(
        default=None,
        metadata={"help": "Relative share of each difficulty in the training tasks, e.g. {1: 1, 2: 3} = a quarter d1, "
                  "three quarters d2 (the pool is thinned to that mix, keeping its seeded order); a difficulty in "
                  "min..max_difficulty that is not named is dropped; null = the pool as drawn."},
    )
    max_tasks: int | None = field(default=None, metadata={"help": "Use at most this many training tasks."})
    fresh_tasks: int = field(
        default=0,
        metadata={"help": "Train on this many newly drawn training tasks (the world's generator, seeded by the run "
                  "seed, difficulties balanced, then filtered by min/max_difficulty) instead of the world's "
                  "train split, which the warm start imitated and partly memorised; 0 = the train split."},
    )
    def __post_init__(self):
        if self.fresh_tasks < 0:
            raise LfoError(f"data.fresh_tasks must be >= 0, got {self.fresh_tasks}")
        if not 1 <= self.min_difficulty <= self.max_difficulty <= 5:
            raise LfoError(
                f"data difficulties must satisfy 1 <= min_difficulty <= max_difficulty <= 5, "
                f"got {self.min_difficulty}..{self.max_difficulty}"
            )
        if self.max_tasks is not None and self.max_tasks < 1:
            raise LfoError(f"data.max_tasks must be >= 1, got {self.max_tasks}")
        if self.difficulty_weights is not None:
            self.difficulty_weights = _difficulty_weights(self.difficulty_weights, self.min_difficulty, self.max_difficulty)


def _difficulty_weights(raw: dict, lo: int, hi: int) -> dict[int, float]:
    """``data.difficulty_weights`` with int keys (JSON round trips make them strings), checked."""
    out = {}
    for key, w in raw.items():
        try:
            d = int(key)
        except (TypeError, ValueError):
            raise LfoError(f"data.difficulty_weights: keys are difficulties {lo}..{hi}, got {key!r}") from None
        if not lo <= d <= hi:
            raise LfoError(f"data.difficulty_weights: difficulty {d} is outside min..max_difficulty ({lo}..{hi})")
        if isinstance(w, bool) or not isinstance(w, (int, float)) or w < 0:
            raise LfoError(f"data.difficulty_weights[{d}] must be a number >= 0, got {w!r}")
        out[d] = float(w)
    if not any(out.values()):
        raise LfoError("data.difficulty_weights: at least one weight must be > 0")
    return dict(sorted(out.items()))


@dataclass
class EnvSection(WorldChoice):
    """The world; the world's own reward options (:attr:`lfo_cli.worlds.World.rewards`) join it. Validation
    always counts successes only."""

    world_settings: ClassVar[bool] = True

    def options(self) -> dict[str, Any]:
        """The reward options the recipe sets (those off their defaults): what the world's environments take."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.name != "kind" and getattr(self, f.name) != f.default}


def world_sections(kind: str = DEFAULT_KIND) -> dict[str, type]:
    """The ``data`` and ``env`` section classes of a training recipe on world ``kind``: lfo's fields, then the
    world's (:mod:`lfo_cli.worlds.settings`)."""
    world = world_class(kind)
    return {"data": extend(DataSection, world.train_data), "env": extend(EnvSection, world.rewards)}


@dataclass
class EvalSection:
    every: int = field(default=20, metadata={"help": "Validation success every N optimizer steps (0 = never)."})
    num_tasks: int = field(default=40, metadata={"help": "Validation tasks per evaluation (same tasks every time)."})
    temperature: float = field(default=1.0, metadata={"help": "Sampling temperature during validation."})
    save_trajectories_every: int = field(default=50, metadata={"help": "Save sample trajectories every N steps."})
    difficulties: list[int] | None = field(
        default=None,
        metadata={"help": "Validate only on val tasks of these difficulties (e.g. [1] for a difficulty-1 "
                  "curriculum); null = all, taken round-robin over difficulties."},
    )
    samples_per_task: int = field(
        default=1,
        metadata={"help": "Episodes per validation task (same sampling seeds at every evaluation). Every "
                  "evaluation is paired with the step-0 one (the warm start: LoRA B starts at zero), and the "
                  "summary tests final - start per episode (`val/vs_start/...`)."},
    )

    fresh_tasks: int = field(
        default=0,
        metadata={"help": "Validate on this many newly drawn tasks of the training distribution (new instances, like "
                  "the val split; drawn from the world's seed, so every run of a world sees the same ones; "
                  "difficulties balanced, then eval.difficulties and eval.num_tasks apply) instead of the val "
                  "split, whose 20 tasks per difficulty cap how small an effect a run can resolve; 0 = the val split."},
    )

    heldout_tasks: int = field(
        default=0,
        metadata={"help": "Also evaluate on this many freshly drawn tasks of the world's held-out split (never trained "
                  "on: a control for habits that hold beyond the training tasks, and the transfer measure), at eval.heldout_difficulties, each eval.heldout_samples_per_task times; `heldout/...` metrics. "
                  "0 = off."},
    )
    heldout_difficulties: list[int] = field(
        default_factory=lambda: [1, 2], metadata={"help": "Difficulties of the held-out evaluation."})
    heldout_samples_per_task: int | None = field(
        default=None,
        metadata={"help": "Episodes per held-out task (same sampling seeds at every evaluation); null = "
                  "eval.samples_per_task. More episodes where a world has few held-out tasks (TextWorld's games), "
                  "without lengthening validation."},
    )
    heldout_every: int = field(
        default=0,
        metadata={"help": "Evaluate the held-out tasks every N steps; 0 = only at step 0 and at the end."},
    )

    def __post_init__(self):
        if self.heldout_tasks < 0 or self.heldout_every < 0:
            raise LfoError("eval.heldout_tasks and eval.heldout_every must be >= 0")
        if not self.heldout_difficulties or any(not 1 <= d <= 5 for d in self.heldout_difficulties):
            raise LfoError(f"eval.heldout_difficulties must be a non-empty list of values in 1..5, "
                           f"got {self.heldout_difficulties}")
        self.heldout_difficulties = sorted(set(self.heldout_difficulties))
        if self.fresh_tasks < 0:
            raise LfoError(f"eval.fresh_tasks must be >= 0, got {self.fresh_tasks}")
        if self.every < 0 or self.num_tasks < 1 or self.save_trajectories_every < 0:
            raise LfoError("eval.every and eval.save_trajectories_every must be >= 0 and eval.num_tasks >= 1")
        if not 1 <= self.samples_per_task <= 64:
            raise LfoError(f"eval.samples_per_task must be in [1, 64], got {self.samples_per_task}")
        if self.heldout_samples_per_task is not None and not 1 <= self.heldout_samples_per_task <= 64:
            raise LfoError(f"eval.heldout_samples_per_task must be null or in [1, 64], got {self.heldout_samples_per_task}")
        if self.difficulties is not None:
            if not self.difficulties or any(not 1 <= d <= 5 for d in self.difficulties):
                raise LfoError(f"eval.difficulties must be a non-empty list of values in 1..5 (or null), "
                               f"got {self.difficulties}")
            self.difficulties = sorted(set(self.difficulties))


@dataclass
class TrainConfig(WorldRecipe):
    model: ModelSection = field(default_factory=ModelSection)
    lora: LoraSettings = field(default_factory=LoraSettings)
    wm: WorldModelSettings = field(default_factory=WorldModelSettings)
    data: DataSection = field(default_factory=DataSection)
    env: EnvSection = field(default_factory=EnvSection)
    eval: EvalSection = field(default_factory=EvalSection)
    trainer: dict[str, Any] = field(
        default_factory=dict, metadata={"help": "Any DualLoRAConfig / GRPOConfig field (the world model's are the wm section)."}
    )
    # `lfo train --explain trainer.KEY` reads the field's type, default and help from TRL's own config
    explain_sections: ClassVar[dict[str, type]] = {"trainer": DualLoRAConfig}
    world_sections = staticmethod(world_sections)

    def __post_init__(self):
        super().__post_init__()
        sections = world_sections(self.env.kind)
        self.data = fit_section(self.data, sections["data"], "data")
        self.env = fit_section(self.env, sections["env"], "env")
        known = {f.name for f in dataclasses.fields(DualLoRAConfig) if f.init}
        hints = type_hints(DualLoRAConfig)
        for key in list(self.trainer):
            if key == "wm" or key.startswith("wm_"):
                raise LfoError(f"trainer.{key}: set world-model options in the wm section (wm.{key[3:] or 'coef'})")
            if key in ("output_dir", "seed"):
                raise LfoError(f"trainer.{key} is set by lfo (use --out / seed)")
            if key not in known:
                hint = difflib.get_close_matches(key, sorted(known), n=1)
                raise LfoError(f"unknown key 'trainer.{key}'" + (f" (did you mean '{hint[0]}'?)" if hint else ""))
            self.trainer[key] = coerce(self.trainer[key], hints.get(key, Any), f"trainer.{key}")
        world = world_class(self.env.kind)
        if self.wm.predict is None:  # the world's default, recorded by its name
            self.wm = dataclasses.replace(self.wm, predict=next(iter(world.predict_tools)))
        if self.wm.predict not in world.predict_tools:
            raise LfoError(f"wm.predict={self.wm.predict} is not one of the {world.kind} world's: "
                           f"{', '.join(world.predict_tools)}")

    def warmstart_overrides(self) -> list[str]:
        """Overrides of the warm-start recipe for this run: its seed when `model.warmstart_per_seed`."""
        return [f"seed={self.seed}"] if self.model.warmstart and self.model.warmstart_per_seed else []

    def training_args(self, output_dir: str | Path, *, portable: bool = False) -> DualLoRAConfig:
        """The run's `DualLoRAConfig`: the trainer section, the wm section as is, the seed. TRL's and lfo's
        checks run here, so `lfo train` builds it once, before any expensive work, and hands it to the runner.
        ``portable`` leaves out the checks that depend on this machine (mixed precision, vLLM), so that a GPU
        recipe can be checked on a CPU machine (:meth:`check`)."""
        import warnings

        kwargs = {"report_to": [], **self.trainer}
        if portable:
            kwargs.update(bf16=False, fp16=False, use_vllm=False)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)  # transformers' own deprecation notes
                return DualLoRAConfig(output_dir=str(output_dir), seed=self.seed, wm=self.wm, **kwargs)
        except LfoError:
            raise
        except (ValueError, TypeError) as exc:
            message = str(exc).splitlines()[0]
            if "bf16" in message or "fp16" in message:
                message += " (a GPU recipe on a CPU machine: use a *_micro recipe or --set trainer.bf16=false --set trainer.use_cpu=true)"
            raise LfoError(f"trainer: {message}") from None

    def check(self) -> None:
        """Every check of :meth:`training_args` that does not depend on this machine (`lfo train --dry-run`,
        a grid's cells before any of them runs)."""
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            self.training_args(tmp, portable=True)


"""Configuration of a warm start (recipe kind ``warmstart``): the model, data, train and eval sections.

Validated on construction: a bad value raises :class:`~lfo_cli.errors.LfoError` naming the option.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Literal

from lfo_cli.errors import LfoError
from lfo_cli.models.prompts import tool_methods
from lfo_cli.worlds import DEFAULT_KIND, WorldChoice, kinds, world_class
from lfo_cli.worlds.noise import TeacherNoise
from lfo_cli.worlds.settings import WorldRecipe, extend, fit_section


@dataclass
class ModelSection:
    name: str = field(default="micro", metadata={"help": "Base model: micro, smollm2-135m, a local path or a hub id."})
    dtype: Literal["float32", "bfloat16", "float16"] = field(
        default="float32", metadata={"help": "Training dtype (float32 on CPU)."}
    )
    full_finetune: bool | None = field(
        default=None,
        metadata={"help": "Train every weight (default for micro, which starts from scratch) instead of a LoRA "
                  "merged into the base (default for pretrained models)."},
    )
    lora_r: int = field(default=16, metadata={"help": "LoRA rank (pretrained bases)."})
    lora_alpha: int = field(default=32, metadata={"help": "LoRA alpha."})
    lora_dropout: float = field(default=0.05, metadata={"help": "LoRA dropout."})
    lora_target_modules: list[str] = field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        metadata={"help": "Modules that get LoRA weights. All linear layers: teaching a format needs the MLPs too."},
    )

    def __post_init__(self) -> None:
        if not self.name:
            raise LfoError("model.name must name a model (micro, smollm2-135m, a path or a hub id)")
        if self.lora_r < 1 or self.lora_alpha < 1:
            raise LfoError("model.lora_r and model.lora_alpha must be >= 1")
        if not 0.0 <= self.lora_dropout < 1.0:
            raise LfoError(f"model.lora_dropout must be in [0, 1), got {self.lora_dropout}")

    @property
    def is_full(self) -> bool:
        if self.full_finetune is not None:
            return self.full_finetune
        return self.name == "micro" or self.name.removeprefix("micro_") in kinds()  # micro, micro_<world kind>


EnvSection = WorldChoice  # the world the warm start imitates its teacher in


@dataclass
class DataSection:
    """The teacher and its data: lfo's keys; the world's own (:attr:`lfo_cli.worlds.World.teacher_data`) join them."""

    world_settings: ClassVar[bool] = True  # a world adds keys here (lfo_cli.worlds.settings)
    dir: Path = field(default=Path("data"), metadata={"help": "World written by `lfo gen-env` (train tasks are "
                                                             "the SFT prompts, val tasks the evaluation)."})
    policy: str | None = field(
        default=None,
        metadata={"help": "Reference policy to imitate, one of the world's teachers (`World.teacher_policies`, listed "
                  "per world in docs/environment.md); null = the world's first, which the recipe records by name."},
    )
    rollouts_per_task: int = field(default=2, metadata={"help": "Noisy rollouts per train task."})
    max_tasks: int | None = field(default=None, metadata={"help": "Use at most this many train tasks (None: all)."})
    fresh_tasks: int = field(
        default=0,
        metadata={"help": "Imitate on this many newly drawn training tasks (the world's generator) instead of the world's "
                  "train tasks (0: the train tasks). Fresh tasks keep the RL train tasks unseen, so a small model "
                  "cannot memorise the tasks RL is then rewarded on, and give more distinct instances per epoch."},
    )
    noise: TeacherNoise = field(
        default_factory=lambda: TeacherNoise(epsilon=0.1),
        metadata={"help": "The teacher's noise, for the SFT data and the teacher baseline: epsilon (every world's) and "
                  "any noise of the world's own teacher (declared with its defaults by the world's teacher_data: "
                  "`lfo train --explain data.noise` on a recipe of that world). Keys a recipe leaves out keep the defaults."},
    )
    imitate_random: bool = field(
        default=True,
        metadata={"help": "Train on the teacher's random replacement actions (noise.epsilon) like on its other turns. "
                  "False keeps them in context with no loss, as for slips: the model sees detours and recovers "
                  "from them but never learns to emit a name, number or value the conversation did not show."},
    )
    success_weight: int = field(
        default=1, metadata={"help": "Duplicate successful trajectories this many times (1 = plain imitation)."}
    )
    induction_rows: int = field(
        default=0,
        metadata={"help": "Synthetic rows 'A + A' (random tokens, loss on the repeat) mixed into the SFT data so a "
                  "from-scratch model forms the copying circuit that copying values from the context needs "
                  "(lfo_cli.models.induction). 0: none."},
    )
    induction_max_len: int = field(default=48, metadata={"help": "Longest random sequence A of an induction row."})

    def __post_init__(self) -> None:
        if self.rollouts_per_task < 1:
            raise LfoError(f"data.rollouts_per_task must be >= 1, got {self.rollouts_per_task}")
        if self.max_tasks is not None and self.max_tasks < 1:
            raise LfoError(f"data.max_tasks must be >= 1 or null, got {self.max_tasks}")
        if self.fresh_tasks < 0:
            raise LfoError(f"data.fresh_tasks must be >= 0, got {self.fresh_tasks}")
        if self.success_weight < 1:
            raise LfoError(f"data.success_weight must be >= 1, got {self.success_weight}")
        if self.induction_rows < 0:
            raise LfoError(f"data.induction_rows must be >= 0, got {self.induction_rows}")
        if not 8 <= self.induction_max_len <= 512:
            raise LfoError(f"data.induction_max_len must be in [8, 512], got {self.induction_max_len}")


def world_sections(kind: str = DEFAULT_KIND) -> dict[str, type]:
    """The ``data`` section class of a warm start on world ``kind``: lfo's fields, then the world's teacher
    options (:mod:`lfo_cli.worlds.settings`)."""
    return {"data": extend(DataSection, world_class(kind).teacher_data)}


@dataclass
class TrainSection:
    epochs: float = field(default=4.0, metadata={"help": "Passes over the SFT trajectories."})
    max_steps: int = field(default=-1, metadata={"help": "Stop after this many optimizer steps (-1: use epochs)."})
    max_minutes: float | None = field(
        default=None,
        metadata={"help": "Time guard, not a stop: if the build is still training this many minutes after it started, "
                  "it fails (exit 2, with a checkpoint for --resume) and caches nothing. The recipe's steps or epochs "
                  "define the model, however loaded the machine. Not part of the cache key. None: no guard."},
    )
    batch_size: int = field(default=16, metadata={"help": "Sequences per optimizer step (before accumulation)."})
    gradient_accumulation_steps: int = field(default=1, metadata={"help": "Micro-batches per optimizer step."})
    learning_rate: float = field(
        default=1e-3, metadata={"help": "Peak lr. 1e-3 suits a 4M model from scratch; LoRA on a pretrained base ~2e-4."}
    )
    warmup_ratio: float = field(default=0.05, metadata={"help": "Fraction of steps of linear warmup."})
    weight_decay: float = field(default=0.01, metadata={"help": "AdamW weight decay."})
    max_length: int = field(
        default=1024, metadata={"help": "Longer tokenized trajectories are dropped (not truncated: a cut episode "
                                        "would teach the model to stop mid-task)."}
    )
    logging_steps: int = field(default=10, metadata={"help": "Log every N steps (metrics.jsonl)."})
    save_steps: int = field(default=100, metadata={"help": "Checkpoint every N steps (for --resume)."})
    threads: int | None = field(default=None, metadata={"help": "torch threads (None: torch's default)."})
    reply_loss_weight: float = field(
        default=0.0,
        metadata={"help": "A world-model warm start (Early Experience's implicit world modelling): add this weight x "
                  "the cross-entropy on the replies of train.reply_loss_tools (per sequence, then the batch mean) to "
                  "the assistant-token loss; same data and steps. 0: the assistant's tokens only."},
    )
    reply_loss_tools: list[str] = field(
        default_factory=lambda: ["make_phone_call"],
        metadata={"help": "Whose replies the reply-token loss covers (tool names; the rep answers make_phone_call)."},
    )

    def __post_init__(self) -> None:
        if self.epochs <= 0 and self.max_steps <= 0:
            raise LfoError("train: set epochs > 0 or max_steps > 0")
        if self.batch_size < 1 or self.gradient_accumulation_steps < 1:
            raise LfoError("train.batch_size and train.gradient_accumulation_steps must be >= 1")
        if self.learning_rate <= 0:
            raise LfoError(f"train.learning_rate must be > 0, got {self.learning_rate}")
        if not 0 <= self.warmup_ratio < 1:
            raise LfoError(f"train.warmup_ratio must be in [0, 1), got {self.warmup_ratio}")
        if self.max_length < 64:
            raise LfoError(f"train.max_length must be >= 64, got {self.max_length}")
        if self.max_minutes is not None and self.max_minutes <= 0:
            raise LfoError(f"train.max_minutes must be > 0 or null, got {self.max_minutes}")
        if self.logging_steps < 1 or self.save_steps < 1:
            raise LfoError("train.logging_steps and train.save_steps must be >= 1")
        if self.reply_loss_weight < 0:
            raise LfoError(f"train.reply_loss_weight must be >= 0, got {self.reply_loss_weight}")
        if not self.reply_loss_tools:
            raise LfoError("train.reply_loss_tools must name at least one tool")


@dataclass
class EvalSection:
    num_tasks: int = field(default=100, metadata={"help": "Val tasks played after training (0: skip evaluation)."})
    samples_per_task: int = field(
        default=1,
        metadata={"help": "Episodes sampled per val task (same environment seed, new model samples): more sampled "
                  "turns for the valid-call rate and more episodes per difficulty for success, at k times the cost."},
    )
    temperature: float = field(default=1.0, metadata={"help": "Sampling temperature (1.0, as in GRPO rollouts)."})
    max_turns: int = field(default=16, metadata={"help": "Tool calls per episode (the environment's limit)."})
    max_new_tokens: int = field(default=128, metadata={"help": "Token budget of one assistant turn."})
    batch_size: int = field(default=50, metadata={"help": "Episodes generated together."})
    min_valid_rate: float | None = field(
        default=None, metadata={"help": "Fail the run (exit 2) if the valid tool-call rate is below this."}
    )

    def __post_init__(self) -> None:
        if self.num_tasks < 0:
            raise LfoError(f"eval.num_tasks must be >= 0, got {self.num_tasks}")
        if not 1 <= self.samples_per_task <= 64:
            raise LfoError(f"eval.samples_per_task must be in [1, 64], got {self.samples_per_task}")
        if self.temperature <= 0:
            raise LfoError(f"eval.temperature must be > 0 (sampling), got {self.temperature}")
        if not 1 <= self.max_turns <= 64:
            raise LfoError(f"eval.max_turns must be in [1, 64], got {self.max_turns}")
        if self.max_new_tokens < 8 or self.batch_size < 1:
            raise LfoError("eval.max_new_tokens must be >= 8 and eval.batch_size >= 1")


@dataclass
class WarmStartConfig(WorldRecipe):
    """Recipe kind ``warmstart``: SFT on noisy reference-policy trajectories, then evaluation."""

    model: ModelSection = field(default_factory=ModelSection)
    env: EnvSection = field(default_factory=EnvSection)
    data: DataSection = field(default_factory=DataSection)
    train: TrainSection = field(default_factory=TrainSection)
    eval: EvalSection = field(default_factory=EvalSection)
    world_sections = staticmethod(world_sections)

    def __post_init__(self) -> None:
        super().__post_init__()
        for name, cls in (("model", ModelSection), ("env", EnvSection), ("data", DataSection), ("train", TrainSection),
                          ("eval", EvalSection)):
            if isinstance(getattr(self, name), dict):
                setattr(self, name, cls(**getattr(self, name)))
        self.data = fit_section(self.data, world_sections(self.env.kind)["data"], "data")
        world = world_class(self.env.kind)
        if not world.teacher_policies:
            raise LfoError(f"the {world.kind} world has no teacher (World.teacher_policies): a warm start imitates one; "
                           "train from a model of your own instead (model.warmstart: null)")
        if self.data.policy is None:  # the world's default, recorded by its name
            self.data = dataclasses.replace(self.data, policy=world.teacher_policies[0])
        if self.data.policy not in world.teacher_policies:
            raise LfoError(f"data.policy={self.data.policy} is not a teacher of the {world.kind} world: "
                           f"{', '.join(world.teacher_policies)}")
        if self.train.reply_loss_weight > 0:
            known = sorted(m.__name__ for m in tool_methods(world.tools))
            if not set(self.train.reply_loss_tools) <= set(known):
                raise LfoError(f"train.reply_loss_tools must name tools of the {world.kind} world ({', '.join(known)}), "
                               f"got {self.train.reply_loss_tools}")


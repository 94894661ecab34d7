"""The world-model settings of a run: the recipe's ``wm:`` section and ``DualLoRAConfig.wm``, one dataclass.

A recipe's ``wm: {coef: 0.5}`` is built into :class:`WorldModelSettings` by the recipe loader and handed to
`DualLoRAConfig` as is; the trainer, its objective and the runner read ``args.wm.coef``. Checks that involve
only these settings live here; the ones that also need a trainer field (activation checkpointing) are in
`DualLoRAConfig.__post_init__`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from lfo_cli.errors import LfoError
from lfo_cli.train.normalise import NORMALIZE_CHOICES
from lfo_cli.train.objectives import OBJECTIVES, objective_class

TARGETS = ("world", "tool_responses")  # wm.targets: the world's examples, or the tool replies TRL inserted
SCHEDULE_RE = re.compile(r"^(joint|alternating|wm_first:(\d+)|hierarchical:(\d+))$")


@dataclass(frozen=True)
class Schedule:
    """Which adapters a step updates. Parsed from ``joint | alternating | wm_first:N | hierarchical:K``."""

    kind: str
    n: int = 0

    @classmethod
    def parse(cls, text: str) -> Schedule:
        m = SCHEDULE_RE.match(text.strip())
        if not m:
            raise LfoError(
                f"wm.schedule must be joint, alternating, wm_first:N or hierarchical:K (N, K >= 1), got '{text}'"
            )
        kind = m.group(1).split(":")[0]
        n = int(m.group(2) or m.group(3) or 0)
        if kind in ("wm_first", "hierarchical") and n < 1:
            raise LfoError(f"wm.schedule {text}: the step count must be >= 1")
        return cls(kind, n)

    def updates(self, step: int) -> tuple[bool, bool]:
        """(update policy, update world model) at optimizer step ``step`` (0-based)."""
        if self.kind == "joint":
            return True, True
        if self.kind == "alternating":  # even steps: world model, odd steps: policy
            return step % 2 == 1, step % 2 == 0
        if self.kind == "wm_first":  # pre-train the world model for N steps, then joint
            return step >= self.n, True
        # hierarchical:K — the world model every K steps, the policy every step
        return True, step % self.n == 0


@dataclass
class WorldModelSettings:
    """lambda * world_model_loss: what the world model predicts, through which weights, normalised how."""

    coef: float = field(
        default=0.5,
        metadata={"help": "lambda, the world-model loss weight. 0 gives plain DAPO, bit-for-bit TRL's loss."},
    )
    predict: str | None = field(
        default=None,
        metadata={"help": "wm.targets=world: which tool replies the world model predicts, by one of the world's names "
                  "for a set of its tools (`World.predict_tools`, listed per world in docs/environment.md); null = the "
                  "world's default (its first name), which a recipe records as the name."},
    )
    targets: Literal["world", "tool_responses"] = field(
        default="world",
        metadata={"help": "Where the world model's targets come from. world: each call's example built from the lfo "
                  "World's transition log (its template; wm.predict names the tools). tool_responses: the tool "
                  "replies TRL itself inserted into the completions (its tool_mask), after the conversation that "
                  "led to them; needs no lfo World and no transition log (wm.tools names the tools)."},
    )
    tools: list[str] | None = field(
        default=None,
        metadata={"help": "wm.targets=tool_responses only: the tools whose replies the world model learns, by the "
                  "names TRL gives them (the environment's public methods, or the tools= functions). null: every "
                  "tool."},
    )
    stop_without_targets: int = field(
        default=5,
        metadata={"help": "Stop the run with an error after this many optimizer steps in a row whose batch held no "
                  "world-model target token (the term would be a silent zero); 0: never stop. Each such step logs "
                  "wm/target_tokens 0."},
    )
    coupling: str = field(  # the objectives' registry (lfo_cli.train.objectives), checked in validate()
        default="separate",
        metadata={"help": "separate: world-model forward with only its adapter (the design; no gradient reaches the "
                  "policy adapter). stacked: both adapters active in the world-model forward, so its gradient also "
                  "trains the policy adapter. shared: one adapter; cross-entropy on the predicted tools' reply tokens inside "
                  "the policy's own rollout forward. Or a coupling of your own: a WorldModelObjective subclass with "
                  "that name, defined before the run or registered under the `lfo.objectives` entry points."},
    )
    normalize: Literal[NORMALIZE_CHOICES] = field(
        default="obs_tokens",
        metadata={"help": "How the replies' cross-entropy becomes the world-model loss, the same for every coupling "
                  "so lambda means one thing: obs_tokens (ECHO: each sequence's mean over its reply tokens, then the "
                  "mean over sequences; a sequence is one call's example, or one rollout for shared), token_mean "
                  "(the mean over all reply tokens; shared only), legacy (each coupling's own, as the observation "
                  "study ran: obs_tokens for separate/stacked, token_mean for shared). docs/training.md gives both "
                  "formulas."},
    )
    gate_quantile: float | None = field(
        default=None,
        metadata={"help": "PaW's entropy gate (couplings that read the policy's forward: shared): the world-model "
                  "term only on the replies to turns whose mean action entropy is at or above this quantile of the "
                  "micro-batch's turns, e.g. 0.5 = the more uncertain half. null: every reply."},
    )
    schedule: str = field(
        default="joint",
        metadata={"help": "joint | alternating | wm_first:N | hierarchical:K (the design's ablation 4)."},
    )
    intrinsic: Literal["none", "surprise"] = field(
        default="none",
        metadata={"help": "surprise: add the world model's per-call prediction error as a reward bonus "
                  "(the design's discarded first version, kept as an ablation arm)."},
    )
    intrinsic_coef: float = field(default=0.1, metadata={"help": "Weight of the surprise bonus."})
    learning_rate: float | None = field(
        default=None, metadata={"help": "Separate learning rate for the world-model adapter (None: same as policy)."}
    )
    max_length: int = field(
        default=512, metadata={"help": "Token budget of one world-model example; the state is truncated from the left."}
    )
    max_examples: int = field(
        default=64, metadata={"help": "At most this many world-model examples per micro-batch (sampled evenly; "
                              "their mean stands in for all of the micro-batch's examples)."}
    )
    batch_tokens: int = field(
        default=4096,
        metadata={"help": "Padded-token budget of one world-model forward: examples are sorted by length and "
                  "grouped so short ones are not padded to the longest (same loss, less compute). 0: one forward."},
    )
    share_prefix: bool = field(
        default=True,
        metadata={"help": "Run the common start of world-model examples once (a group's rollouts share their task "
                  "and directory) and only the rest per example, through the KV cache: same loss and gradients, "
                  "fewer tokens. Plain-head, full-attention, unwrapped models only; others fall back."},
    )
    grad_probe_every: int = field(
        default=10,
        metadata={"help": "Measure grad_norm/policy_from_wm (|d(lambda*wm_loss)/d policy params|) every N steps; 0 = never."},
    )

    def __post_init__(self):
        self.validate()

    def validate(self) -> None:
        """Reject values and combinations that cannot run (`DualLoRAConfig` checks again what it is given)."""
        if not isinstance(self.coupling, str):
            raise LfoError(f"wm.coupling must be a coupling's name, got {self.coupling!r}")
        try:
            objective = self.objective
        except ValueError as exc:
            raise LfoError(str(exc)) from None
        try:
            objective.normaliser_class(self.normalize)
        except (ValueError, KeyError) as exc:
            raise LfoError(str(exc).strip("'")) from None
        if self.coef < 0:
            raise LfoError(f"wm.coef must be >= 0 (0 = baseline DAPO), got {self.coef}")
        if self.intrinsic_coef < 0:
            raise LfoError(f"wm.intrinsic_coef must be >= 0, got {self.intrinsic_coef}")
        if self.max_length < 16:
            raise LfoError(f"wm.max_length must be >= 16 tokens, got {self.max_length}")
        if self.max_examples < 1:
            raise LfoError(f"wm.max_examples must be >= 1, got {self.max_examples}")
        if self.batch_tokens < 0:
            raise LfoError(f"wm.batch_tokens must be >= 0 (0 = one forward), got {self.batch_tokens}")
        if self.learning_rate is not None and self.learning_rate <= 0:
            raise LfoError(f"wm.learning_rate must be > 0 or null, got {self.learning_rate}")
        Schedule.parse(self.schedule)
        if self.targets not in TARGETS:
            raise LfoError(f"wm.targets must be one of {', '.join(TARGETS)}, got {self.targets!r}")
        if self.tools is not None:
            if self.targets != "tool_responses":
                raise LfoError("wm.tools names the tools of wm.targets=tool_responses; with wm.targets=world the "
                               "world's wm.predict names them (drop wm.tools, or set wm.targets=tool_responses)")
            if isinstance(self.tools, str) or not self.tools or not all(isinstance(t, str) and t for t in self.tools):
                raise LfoError(f"wm.tools must be a non-empty list of tool names or null (every tool), got "
                               f"{self.tools!r}")
        if self.stop_without_targets < 0:
            raise LfoError(f"wm.stop_without_targets must be >= 0 (0 = never stop), got {self.stop_without_targets}")
        if self.gate_quantile is not None:
            if not 0.0 <= self.gate_quantile < 1.0:
                raise LfoError(f"wm.gate_quantile must be in [0, 1) or null, got {self.gate_quantile}")
            if not objective.gates:
                raise LfoError(f"wm.gate_quantile weighs the term by the policy's own entropies; wm.coupling="
                               f"{self.coupling} does not read the policy's forward (use a coupling that does: "
                               + ", ".join(n for n, c in OBJECTIVES.items() if c.gates) + ")")
        if not objective.has_adapter and self.schedule != "joint":
            raise LfoError(f"wm.coupling={self.coupling} has a single adapter; use wm.schedule=joint with it")
        if self.intrinsic == "surprise" and self.coef == 0:
            raise LfoError("wm.intrinsic=surprise needs a trained world model: set wm.coef > 0")
        if self.intrinsic == "surprise" and self.targets != "world":
            raise LfoError("wm.intrinsic=surprise scores each call's example from the world's transition log: it "
                           "needs wm.targets=world")
        if self.intrinsic == "surprise" and not objective.own_forward:
            raise LfoError(f"wm.intrinsic=surprise scores calls with a world model of its own; wm.coupling="
                           f"{self.coupling} has none (use separate or stacked)")

    @property
    def objective(self):
        """The :class:`~lfo_cli.train.objectives.WorldModelObjective` subclass ``coupling`` names."""
        return objective_class(self.coupling)

    @property
    def plan(self) -> Schedule:
        """``schedule`` parsed: which adapters each optimizer step updates."""
        return Schedule.parse(self.schedule)

    @property
    def enabled(self) -> bool:
        return self.coef > 0

"""Configuration for dual-LoRA DAPO: a `GRPOConfig` extension plus small recipe sections.

`DualLoRAConfig` adds the world-model fields to TRL's `GRPOConfig` (same style: every field has
``metadata={"help": ...}`` and ``__post_init__`` rejects bad combinations with an actionable
message). Its defaults are the design's DAPO settings (docs/design.md): ``loss_type="dapo"``,
epsilon 0.2 / epsilon_high 0.28, no KL term, AdamW betas (0.9, 0.95), weight decay 0.1, warmup 10
then cosine, grad clip 1.0, 8 generations per prompt.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from trl import GRPOConfig

from lfo_cli.errors import LfoError
from lfo_cli.train.normalise import NORMALIZE_CHOICES
from lfo_cli.train.objectives import COUPLINGS, OBJECTIVES, objective_class

SCHEDULE_RE = re.compile(r"^(joint|alternating|wm_first:(\d+)|hierarchical:(\d+))$")


# Tracker name -> the `is_*_available` check of transformers.integrations and how to install it.
_TRACKER_CHECKS = {"tensorboard": ("is_tensorboard_available", "pip install 'lfo[track]'"),
                   "trackio": ("is_trackio_available", "pip install 'lfo[track]'"),
                   "wandb": ("is_wandb_available", "pip install wandb"),
                   "mlflow": ("is_mlflow_available", "pip install mlflow"),
                   "comet_ml": ("is_comet_available", "pip install comet_ml"),
                   "swanlab": ("is_swanlab_available", "pip install swanlab"),
                   "clearml": ("is_clearml_available", "pip install clearml"),
                   "dvclive": ("is_dvclive_available", "pip install dvclive"),
                   "neptune": ("is_neptune_available", "pip install neptune")}


def check_report_to(report_to) -> None:
    """Reject a `report_to` the trainer could not honour, before any model loads: an unknown
    integration, or one whose package is not installed (the message says what to install)."""
    from transformers.integrations import integration_utils as hf

    names = [report_to] if isinstance(report_to, str) else list(report_to or [])
    for name in names:
        if name in ("none", "all"):
            continue
        if name not in hf.INTEGRATION_TO_CALLBACK:
            raise LfoError(f"trainer.report_to: unknown integration {name!r}; one of "
                           f"{', '.join(sorted(hf.INTEGRATION_TO_CALLBACK))}, 'all' or 'none'")
        check, install = _TRACKER_CHECKS.get(name, (None, None))
        if check is not None and not getattr(hf, check)():
            raise LfoError(f"trainer.report_to={name}: the {name} package is not installed ({install})")


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
class DualLoRAConfig(GRPOConfig):
    """`GRPOConfig` + the world-model auxiliary loss (lambda * wm_loss) of dual-LoRA DAPO."""

    # ---- the design's DAPO defaults (overriding GRPOConfig's) ----
    loss_type: str = field(default="dapo", metadata={"help": "Policy loss; the design uses DAPO (token-mean)."})
    epsilon: float = field(default=0.2, metadata={"help": "Lower clip range (DAPO epsilon_low)."})
    epsilon_high: float = field(default=0.28, metadata={"help": "Upper clip range (DAPO clip-higher)."})
    beta: float = field(default=0.0, metadata={"help": "KL coefficient; DAPO drops the KL term."})
    learning_rate: float = field(
        default=1e-6,
        metadata={"help": "The design's lr. LoRA recipes raise it ~10x: a rank-16 adapter starts at zero and needs "
                  "larger steps than full fine-tuning to move the policy at all."},
    )
    adam_beta2: float = field(default=0.95, metadata={"help": "AdamW beta2 (the design: betas 0.9/0.95)."})
    weight_decay: float = field(default=0.1, metadata={"help": "AdamW weight decay (the design: 0.1)."})
    warmup_steps: float = field(default=10, metadata={"help": "Linear warmup steps before the cosine decay."})
    lr_scheduler_type: str = field(default="cosine", metadata={"help": "Warmup then cosine (the design)."})
    max_grad_norm: float = field(default=1.0, metadata={"help": "Gradient clipping over both adapters together."})
    num_generations: int | None = field(default=8, metadata={"help": "Rollouts per prompt (the group)."})

    wm_coef: float = field(
        default=0.5,
        metadata={"help": "lambda, the world-model loss weight. 0 gives plain DAPO, bit-for-bit TRL's loss."},
    )
    wm_predict: Literal["phone", "phone_form", "all"] = field(
        default="phone",
        metadata={"help": "Which tool replies the world model predicts: make_phone_call only (the design), "
                  "phone calls and auth_info_form, or every tool."},
    )
    wm_coupling: Literal[COUPLINGS] = field(  # the objectives' registry (lfo_cli.train.objectives)
        default="separate",
        metadata={"help": "separate: world-model forward with only its adapter (the design; no gradient reaches the "
                  "policy adapter). stacked: both adapters active in the world-model forward, so its gradient also "
                  "trains the policy adapter. shared: one adapter; cross-entropy on the phone-reply tokens inside "
                  "the policy's own rollout forward."},
    )
    wm_normalize: Literal[NORMALIZE_CHOICES] = field(
        default="obs_tokens",
        metadata={"help": "How the replies' cross-entropy becomes the world-model loss, the same for every coupling "
                  "so lambda means one thing: obs_tokens (ECHO: each sequence's mean over its reply tokens, then the "
                  "mean over sequences; a sequence is one call's example, or one rollout for shared), token_mean "
                  "(the mean over all reply tokens; shared only), legacy (each coupling's own, as the observation "
                  "study ran: obs_tokens for separate/stacked, token_mean for shared). docs/training.md gives both "
                  "formulas."},
    )
    wm_gate_quantile: float | None = field(
        default=None,
        metadata={"help": "PaW's entropy gate (couplings that read the policy's forward: shared): the world-model "
                  "term only on the replies to turns whose mean action entropy is at or above this quantile of the "
                  "micro-batch's turns, e.g. 0.5 = the more uncertain half. null: every reply."},
    )
    wm_schedule: str = field(
        default="joint",
        metadata={"help": "joint | alternating | wm_first:N | hierarchical:K (the design's ablation 4)."},
    )
    wm_intrinsic: Literal["none", "surprise"] = field(
        default="none",
        metadata={"help": "surprise: add the world model's per-call prediction error as a reward bonus "
                  "(the design's discarded first version, kept as an ablation arm)."},
    )
    wm_intrinsic_coef: float = field(default=0.1, metadata={"help": "Weight of the surprise bonus."})
    wm_learning_rate: float | None = field(
        default=None, metadata={"help": "Separate learning rate for the world-model adapter (None: same as policy)."}
    )
    wm_max_length: int = field(
        default=512, metadata={"help": "Token budget of one world-model example; the state is truncated from the left."}
    )
    wm_max_examples: int = field(
        default=64, metadata={"help": "At most this many world-model examples per micro-batch (sampled evenly; "
                              "their mean stands in for all of the micro-batch's examples)."}
    )
    wm_batch_tokens: int = field(
        default=4096,
        metadata={"help": "Padded-token budget of one world-model forward: examples are sorted by length and "
                  "grouped so short ones are not padded to the longest (same loss, less compute). 0: one forward."},
    )
    wm_share_prefix: bool = field(
        default=True,
        metadata={"help": "Run the common start of world-model examples once (a group's rollouts share their task "
                  "and directory) and only the rest per example, through the KV cache: same loss and gradients, "
                  "fewer tokens. Plain-head, full-attention, unwrapped models only; others fall back."},
    )
    wm_grad_probe_every: int = field(
        default=10,
        metadata={"help": "Measure grad_norm/policy_from_wm (|d(lambda*wm_loss)/d policy params|) every N steps; 0 = never."},
    )

    # TRL's GRPOConfig turns activation checkpointing on by default. Checkpointing recomputes each layer's
    # forward during backward with whichever adapter is active *then*; the world-model loss is built with
    # the `world_model` adapter (separate) or both (stacked) but backpropagated after compute_loss has
    # re-activated `policy`, so its gradients would belong to another network. Measured: with it on, the
    # world-model loss rose from 11.6 to 12.9 nats over 30 steps instead of falling (it falls to 6.5 in
    # 25 steps with it off). Off by default here; rejected where it would be wrong (see __post_init__).
    activation_checkpointing: bool | None = field(
        default=None,  # None -> off (transformers resolves it after the alias below)
        metadata={"help": "Recompute activations in backward to save memory. Only with wm.coef = 0 or a coupling "
                  "whose loss comes from the policy's own forward (the world-model loss must be backpropagated "
                  "through the adapter that built it)."},
    )
    gradient_checkpointing: bool | None = field(
        default=None, metadata={"help": "Deprecated alias of activation_checkpointing (transformers 5)."}
    )

    def __post_init__(self):
        super().__post_init__()
        objective = objective_class(self.wm_coupling)
        try:
            objective.normaliser_class(self.wm_normalize)
        except (ValueError, KeyError) as exc:
            raise LfoError(str(exc).strip("'")) from None
        if self.activation_checkpointing and self.wm_coef > 0 and objective.own_forward:
            raise LfoError(
                f"activation (gradient) checkpointing does not work with wm.coupling={self.wm_coupling}: the backward "
                "recomputes the world-model forward with the policy adapter active. Set "
                "trainer.activation_checkpointing=false, or wm.coef=0, or a coupling without a forward of its own: "
                + ", ".join(name for name, cls in OBJECTIVES.items() if not cls.own_forward)
            )
        check_report_to(self.report_to)
        if self.wm_coef < 0:
            raise LfoError(f"wm.coef must be >= 0 (0 = baseline DAPO), got {self.wm_coef}")
        if self.wm_intrinsic_coef < 0:
            raise LfoError(f"wm.intrinsic_coef must be >= 0, got {self.wm_intrinsic_coef}")
        if self.wm_max_length < 16:
            raise LfoError(f"wm.max_length must be >= 16 tokens, got {self.wm_max_length}")
        if self.wm_max_examples < 1:
            raise LfoError(f"wm.max_examples must be >= 1, got {self.wm_max_examples}")
        if self.wm_batch_tokens < 0:
            raise LfoError(f"wm.batch_tokens must be >= 0 (0 = one forward), got {self.wm_batch_tokens}")
        if self.wm_learning_rate is not None and self.wm_learning_rate <= 0:
            raise LfoError(f"wm.lr must be > 0, got {self.wm_learning_rate}")
        self.schedule = Schedule.parse(self.wm_schedule)
        if self.wm_gate_quantile is not None:
            if not 0.0 <= self.wm_gate_quantile < 1.0:
                raise LfoError(f"wm.gate_quantile must be in [0, 1) or null, got {self.wm_gate_quantile}")
            if not objective.gates:
                raise LfoError(f"wm.gate_quantile weighs the term by the policy's own entropies; wm.coupling="
                               f"{self.wm_coupling} does not read the policy's forward (use a coupling that does: "
                               + ", ".join(n for n, c in OBJECTIVES.items() if c.gates) + ")")
        if not objective.has_adapter and self.wm_schedule != "joint":
            raise LfoError(f"wm.coupling={self.wm_coupling} has a single adapter; use wm.schedule=joint with it")
        if self.wm_intrinsic == "surprise" and self.wm_coef == 0:
            raise LfoError("wm.intrinsic=surprise needs a trained world model: set wm.coef > 0")
        if self.wm_intrinsic == "surprise" and not objective.own_forward:
            raise LfoError(f"wm.intrinsic=surprise scores calls with a world model of its own; wm.coupling="
                           f"{self.wm_coupling} has none (use separate or stacked)")

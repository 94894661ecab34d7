"""Configuration for dual-LoRA DAPO: a `GRPOConfig` extension plus small recipe sections.

`DualLoRAConfig` adds the world-model settings (``wm``, :mod:`lfo_cli.train.wm_settings`) to TRL's `GRPOConfig` (same style: every field has
``metadata={"help": ...}`` and ``__post_init__`` rejects bad combinations with an actionable
message). Its defaults are the design's DAPO settings (docs/design.md): ``loss_type="dapo"``,
epsilon 0.2 / epsilon_high 0.28, no KL term, AdamW betas (0.9, 0.95), weight decay 0.1, warmup 10
then cosine, grad clip 1.0, 8 generations per prompt.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from trl import GRPOConfig

from lfo_cli.errors import LfoError
from lfo_cli.train.objectives import OBJECTIVES
from lfo_cli.train.wm_settings import WorldModelSettings

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

    sampler: str = field(
        default="lfo",
        metadata={"help": "How rollout turns (without vLLM) and validation episodes are sampled: lfo "
                  "(lfo_cli.models.sampler: a KV-cache loop whose finished rows leave the batch; rollouts only with "
                  "plain sampling on one process, else TRL's path) or generate (transformers' model.generate). The "
                  "same distribution; docs/training.md gives the measured speed."},
    )
    rollout_dropout: bool = field(
        default=False,  # equivalent to true within 3 points on the reading regime (TOST, 8 pairs), generation x0.41
        metadata={"help": "Keep LoRA dropout on while lfo's sampler draws rollouts, as TRL's transformers path "
                  "samples them (in train mode). Off: rollouts are sampled in eval mode, as TRL's vLLM and "
                  "continuous-batching paths sample them, and the sampler reuses each rollout's keys and values "
                  "from one turn to the next (exact only without dropout), a faster generation. The policy "
                  "loss's forward keeps its dropout either way. The two train alike: equivalent within 3 points on "
                  "the reading regime (reports/studies/rollout_dropout_reading)."},
    )
    loss_length_groups: int = field(
        default=8,  # 32 rollouts of observation-like lengths: forward + backward x0.69 with 4 groups, x0.60 with 8
        metadata={"help": "Run the policy loss's forward (and so its backward) in this many groups of rollouts of "
                  "similar length, each cut to its own length, instead of one batch padded to the longest: the same "
                  "log-probs up to float rounding, less padding (lfo_cli.train.length_groups). 1: one forward, as TRL."},
    )
    wm: WorldModelSettings = field(
        default_factory=WorldModelSettings,
        metadata={"help": "The world-model term (lfo_cli.train.wm_settings): the recipe's wm section, as is."},
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
        self.wm.validate()
        objective = self.wm.objective
        if self.activation_checkpointing and self.wm.coef > 0 and objective.own_forward:
            raise LfoError(
                f"activation (gradient) checkpointing does not work with wm.coupling={self.wm.coupling}: the backward "
                "recomputes the world-model forward with the policy adapter active. Set "
                "trainer.activation_checkpointing=false, or wm.coef=0, or a coupling without a forward of its own: "
                + ", ".join(name for name, cls in OBJECTIVES.items() if not cls.own_forward)
            )
        check_report_to(self.report_to)
        if self.loss_length_groups < 1:
            raise LfoError(f"trainer.loss_length_groups must be >= 1, got {self.loss_length_groups}")
        if self.sampler not in ("lfo", "generate"):
            raise LfoError(f"trainer.sampler must be lfo or generate, got {self.sampler!r}")

    def to_dict(self) -> dict:
        """TRL's serialisation (trackers, `to_json_string`) with the world-model settings as a mapping."""
        out = super().to_dict()
        out["wm"] = dataclasses.asdict(self.wm)
        return out

"""Run configuration for `lfo wmil train` (TRL-style dataclass: every field has help; bad combinations
are rejected in ``__post_init__`` with an actionable message)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

from lfo_cli.errors import LfoError

# The tasks by name (lfo_cli.wmil.envs.TASKS holds their classes and checks it names the same): this module imports
# no torch, so that `lfo --help` can read it for `lfo wmil train`'s options.
TASK_NAMES = ("pattern_echo", "sequence_next", "conditional", "delayed_recall", "key_door")
ALGORITHMS = ("reinforce", "ppo")
PARENTS = ("deterministic", "llm")


@dataclass
class WMILConfig:
    # -- task -------------------------------------------------------------------------------
    task: str = field(default="pattern_echo", metadata={"help": "pattern_echo, sequence_next, conditional, delayed_recall or key_door."})
    num_actions: int = field(default=8, metadata={"help": "Number of action symbols (>= 2)."})
    level: int | None = field(default=None, metadata={"help": "Fixed difficulty level; default: the hardest (or 0 with --curriculum)."})
    curriculum: bool = field(default=False, metadata={"help": "Start at level 0 and advance on mastery."})
    mastery_threshold: float = field(default=0.8, metadata={"help": "Curriculum: success rate over the window needed to advance (the design: 0.8)."})
    curriculum_window: int = field(default=100, metadata={"help": "Curriculum: number of recent episodes in the mastery window (the design: 100)."})
    # -- model ------------------------------------------------------------------------------
    hidden_dim: int = field(default=64, metadata={"help": "Transformer width (the design's MVP: 64)."})
    num_layers: int = field(default=2, metadata={"help": "Transformer blocks (2-4 intended)."})
    num_heads: int = field(default=4, metadata={"help": "Attention heads; must divide hidden_dim."})
    context_window: int = field(default=0, metadata={"help": "0: attend to the whole episode; 1: reactive policy (current step only)."})
    wm_target: str = field(default="raw", metadata={"help": "World-model target: 'raw' next observation (fix 2) or 'embedding'."})
    # -- algorithm --------------------------------------------------------------------------
    algorithm: str = field(default="reinforce", metadata={"help": "reinforce (running baseline, fix 3) or ppo (GAE, clipped surrogate)."})
    steps: int = field(default=10_000, metadata={"help": "Training steps = policy updates, each on num_envs episodes (the design's 'step')."})
    num_envs: int = field(default=64, metadata={"help": "Episodes rolled out in parallel per training step (the design: 64)."})
    lr: float = field(default=1e-3, metadata={"help": "Adam learning rate (the design: 1e-3)."})
    gamma: float = field(default=0.99, metadata={"help": "Discount for returns within an episode."})
    gae_lambda: float = field(default=0.95, metadata={"help": "PPO: GAE lambda."})
    entropy_coef: float = field(default=0.01, metadata={"help": "Entropy bonus weight (the design: 0.01)."})
    wm_coef: float = field(default=1.0, metadata={"help": "World-model loss weight; 0 = RL-only baseline."})
    value_coef: float = field(default=0.5, metadata={"help": "PPO: value loss weight (REINFORCE uses its running baseline instead)."})
    kl_coef: float = field(default=0.0, metadata={"help": "KL(parent || baby) weight; > 0 = the KL-distill baseline."})
    baseline_decay: float = field(default=0.9, metadata={"help": "REINFORCE: EMA decay of the per-time-step running baseline."})
    max_grad_norm: float = field(default=1.0, metadata={"help": "Gradient-norm clip (both algorithms)."})
    ppo_epochs: int = field(default=4, metadata={"help": "PPO: optimisation epochs per batch."})
    ppo_minibatches: int = field(default=4, metadata={"help": "PPO: minibatches per epoch (split over envs)."})
    clip_eps: float = field(default=0.2, metadata={"help": "PPO: surrogate clip range."})
    reward_weights: tuple[float, float, float] = field(default=(1.0, 0.0, 0.0), metadata={"help": "Weights of (goal, pred, cons) in the scalar policy reward; all three are logged regardless (fix 4)."})
    # -- parent -----------------------------------------------------------------------------
    parent: str = field(default="deterministic", metadata={"help": "deterministic (default, fix 5) or llm."})
    parent_url: str | None = field(default=None, metadata={"help": "OpenAI-compatible endpoint for --parent llm (else: local model)."})
    parent_model: str = field(default="smollm2-135m", metadata={"help": "Model name sent to the endpoint, or the local model id."})
    parent_api_key_env: str = field(
        default="OPENAI_API_KEY",
        metadata={"help": "Environment variable holding the bearer token sent to --parent-url (only its name is "
                  "stored; the key never reaches logs or run dirs)."},
    )
    parent_max_retries: int = field(default=2, metadata={"help": "Retries per invalid LLM reply before falling back to the rules."})
    parent_timeout: float = field(default=30.0, metadata={"help": "Seconds per LLM request."})
    # -- run --------------------------------------------------------------------------------
    seed: int = field(default=0, metadata={"help": "Seed for model init, environments and action sampling."})
    log_every: int = field(default=50, metadata={"help": "Training steps per metrics row."})
    save_every: int = field(default=1000, metadata={"help": "Training steps per checkpoint (multiple of log_every)."})
    eval_episodes: int = field(default=1024, metadata={"help": "Episodes per difficulty level in the final evaluation."})
    threads: int = field(default=1, metadata={"help": "torch CPU threads (1 is fastest for this model size; 0 = torch default)."})

    def __post_init__(self) -> None:
        if self.task not in TASK_NAMES:
            raise LfoError(f"unknown task '{self.task}' (known: {', '.join(TASK_NAMES)})")
        if self.num_actions < 2:
            raise LfoError(f"num-actions must be >= 2 (got {self.num_actions})")
        if self.steps < 0:
            raise LfoError(f"steps must be >= 0 (got {self.steps})")
        if self.num_envs < 1:
            raise LfoError(f"num-envs must be >= 1 (got {self.num_envs})")
        if self.algorithm not in ALGORITHMS:
            raise LfoError(f"unknown algorithm '{self.algorithm}' (known: {', '.join(ALGORITHMS)})")
        if self.parent not in PARENTS:
            raise LfoError(f"unknown parent '{self.parent}' (known: {', '.join(PARENTS)})")
        if self.parent_url and self.parent != "llm":
            raise LfoError("--parent-url needs --parent llm")
        if self.lr <= 0 or self.max_grad_norm <= 0:
            raise LfoError("lr and max-grad-norm must be > 0")
        for name in ("wm_coef", "entropy_coef", "value_coef", "kl_coef"):
            if getattr(self, name) < 0:
                raise LfoError(f"{name.replace('_', '-')} must be >= 0 (got {getattr(self, name)})")
        if not 0 <= self.gamma <= 1 or not 0 <= self.gae_lambda <= 1 or not 0 <= self.baseline_decay < 1:
            raise LfoError("gamma and gae-lambda must be in [0, 1], baseline-decay in [0, 1)")
        if self.log_every < 1 or self.save_every < 1 or self.save_every % self.log_every:
            raise LfoError(f"save-every ({self.save_every}) must be a positive multiple of log-every ({self.log_every})")
        if self.algorithm == "ppo" and (self.ppo_minibatches < 1 or self.num_envs % self.ppo_minibatches):
            raise LfoError(f"num-envs ({self.num_envs}) must be divisible by ppo-minibatches ({self.ppo_minibatches})")
        if len(self.reward_weights) != 3:
            raise LfoError("reward-weights needs three numbers: goal,pred,cons")
        self.reward_weights = tuple(float(w) for w in self.reward_weights)
        if self.wm_target not in ("raw", "embedding"):
            raise LfoError(f"wm-target must be 'raw' or 'embedding' (got {self.wm_target!r})")
        if not 16 <= self.hidden_dim <= 1024 or not 1 <= self.num_layers <= 12:
            raise LfoError(f"hidden-dim must be in 16..1024 and num-layers in 1..12 (got {self.hidden_dim}, {self.num_layers})")
        if self.num_heads < 1 or self.hidden_dim % self.num_heads:
            raise LfoError(f"hidden-dim {self.hidden_dim} must be divisible by num-heads {self.num_heads}")
        if self.context_window < 0:
            raise LfoError("context-window must be >= 0 (0 = whole episode, 1 = reactive)")
        if self.level is not None and self.level < 0:
            raise LfoError(f"level must be >= 0 (got {self.level})")
        if not 0 < self.mastery_threshold <= 1 or self.curriculum_window < 1:
            raise LfoError("mastery-threshold must be in (0, 1] and curriculum-window >= 1")
        if self.eval_episodes < 1 or self.threads < 0:
            raise LfoError("eval-episodes must be >= 1 and threads >= 0")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["reward_weights"] = list(self.reward_weights)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> WMILConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise LfoError(f"unknown WMIL config key(s): {', '.join(unknown)}")
        d = dict(d)
        if "reward_weights" in d:
            d["reward_weights"] = tuple(d["reward_weights"])
        return cls(**d)

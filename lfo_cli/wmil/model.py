"""BabyModel: a from-scratch transformer with action, world-model and value heads (nanoGPT style).

    raw observation (one-hot slots) --StateEncoder--> token per time step (+ learned position)
        --TransformerCore (causal over the episode, optional window)--> h_t
        h_t --ActionHead--> Categorical(logits)         policy over the A action symbols
        h_t, a_t --WorldModelHead--> predicted RAW next observation (fix 2) or next embedding
        h_t --ValueHead--> V(h_t)                        PPO critic / diagnostics

No pretrained weights anywhere. Single-step tasks are sequences of length 1; multi-step tasks let
the policy attend over the episode so far (``context_window=1`` makes it reactive).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributions import Categorical

from lfo_cli.errors import LfoError


@dataclass
class BabyConfig:
    obs_dim: int = 19  # size of the raw observation vector (set from the task)
    num_actions: int = 8
    hidden_dim: int = 64
    num_layers: int = 2
    num_heads: int = 4
    ff_mult: int = 4  # MLP width = ff_mult * hidden_dim (the design: 256 for hidden 64)
    max_len: int = 32  # longest episode the position table covers
    dropout: float = 0.0  # 0: rollout and update see the same policy, and resume stays bit-exact
    context_window: int = 0  # 0 = attend to the whole episode so far; 1 = reactive (current step only)
    wm_target: str = "raw"  # "raw": predict the raw next observation (fix 2); "embedding": encoder output

    def __post_init__(self) -> None:
        if not 16 <= self.hidden_dim <= 1024:
            raise LfoError(f"hidden-dim must be in 16..1024 (got {self.hidden_dim})")
        if not 1 <= self.num_layers <= 12:
            raise LfoError(f"num-layers must be in 1..12 (got {self.num_layers})")
        if self.num_heads < 1 or self.hidden_dim % self.num_heads:
            raise LfoError(f"hidden-dim {self.hidden_dim} must be divisible by num-heads {self.num_heads}")
        if self.num_actions < 2:
            raise LfoError(f"num-actions must be >= 2 (got {self.num_actions})")
        if self.context_window < 0:
            raise LfoError("context-window must be >= 0 (0 = whole episode)")
        if self.wm_target not in ("raw", "embedding"):
            raise LfoError(f"wm-target must be 'raw' or 'embedding' (got {self.wm_target!r})")

    def to_dict(self) -> dict:
        return asdict(self)


class StateEncoder(nn.Module):
    """Raw observation (one-hot slots, shape ``(B, T, obs_dim)``) -> one token per time step."""

    def __init__(self, cfg: BabyConfig):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(cfg.obs_dim, cfg.hidden_dim), nn.GELU(),
                                 nn.Linear(cfg.hidden_dim, cfg.hidden_dim))
        self.pos = nn.Embedding(cfg.max_len, cfg.hidden_dim)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        t = obs.shape[1]
        return self.net(obs) + self.pos.weight[:t]


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: BabyConfig):
        super().__init__()
        self.n_head = cfg.num_heads
        self.qkv = nn.Linear(cfg.hidden_dim, 3 * cfg.hidden_dim)
        self.proj = nn.Linear(cfg.hidden_dim, cfg.hidden_dim)
        self.dropout = cfg.dropout

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                           dropout_p=self.dropout if self.training else 0.0)
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class Block(nn.Module):
    def __init__(self, cfg: BabyConfig):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(cfg.hidden_dim), nn.LayerNorm(cfg.hidden_dim)
        self.attn = CausalSelfAttention(cfg)
        self.mlp = nn.Sequential(nn.Linear(cfg.hidden_dim, cfg.ff_mult * cfg.hidden_dim), nn.GELU(),
                                 nn.Linear(cfg.ff_mult * cfg.hidden_dim, cfg.hidden_dim), nn.Dropout(cfg.dropout))

    def forward(self, x, mask):
        x = x + self.attn(self.ln1(x), mask)
        return x + self.mlp(self.ln2(x))


class TransformerCore(nn.Module):
    """Pre-LN transformer, causal over time; ``context_window`` limits how far back a step can look."""

    def __init__(self, cfg: BabyConfig):
        super().__init__()
        self.window = cfg.context_window
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.num_layers))
        self.ln_f = nn.LayerNorm(cfg.hidden_dim)
        self._masks: dict[int, torch.Tensor] = {}

    def mask(self, t: int) -> torch.Tensor | None:
        if t == 1:
            return None
        if t not in self._masks:
            i = torch.arange(t)
            diff = i.view(-1, 1) - i.view(1, -1)
            allowed = diff >= 0
            if self.window > 0:
                allowed &= diff < self.window
            self._masks[t] = allowed
        return self._masks[t]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mask = self.mask(x.shape[1])
        for block in self.blocks:
            x = block(x, mask)
        return self.ln_f(x)


class ActionHead(nn.Module):
    def __init__(self, cfg: BabyConfig):
        super().__init__()
        self.fc = nn.Linear(cfg.hidden_dim, cfg.num_actions)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.fc(h)  # logits; Categorical(logits=...) via BabyModel.dist


class WorldModelHead(nn.Module):
    """Predicts the next state from (h_t, a_t). Output size: obs_dim (raw, fix 2) or hidden_dim."""

    def __init__(self, cfg: BabyConfig):
        super().__init__()
        out = cfg.obs_dim if cfg.wm_target == "raw" else cfg.hidden_dim
        self.action_embed = nn.Embedding(cfg.num_actions, cfg.hidden_dim)
        self.predictor = nn.Sequential(nn.Linear(2 * cfg.hidden_dim, cfg.hidden_dim), nn.GELU(),
                                       nn.Linear(cfg.hidden_dim, out))

    def forward(self, h: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.predictor(torch.cat([h, self.action_embed(action)], dim=-1))


class ValueHead(nn.Module):
    def __init__(self, cfg: BabyConfig):
        super().__init__()
        self.fc = nn.Sequential(nn.Linear(cfg.hidden_dim, cfg.hidden_dim // 2), nn.GELU(),
                                nn.Linear(cfg.hidden_dim // 2, 1))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.fc(h).squeeze(-1)


class BabyModel(nn.Module):
    def __init__(self, cfg: BabyConfig):
        super().__init__()
        self.cfg = cfg
        self.encoder = StateEncoder(cfg)
        self.core = TransformerCore(cfg)
        self.action_head = ActionHead(cfg)
        self.world_model = WorldModelHead(cfg)
        self.value_head = ValueHead(cfg)
        self.apply(self._init_weights)
        # near-uniform initial policy: entropy starts at log(A)
        nn.init.normal_(self.action_head.fc.weight, std=0.01)
        for block in self.core.blocks:  # GPT-2 scaled init of residual projections
            nn.init.normal_(block.attn.proj.weight, std=0.02 / math.sqrt(2 * cfg.num_layers))

    @staticmethod
    def _init_weights(m: nn.Module) -> None:
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=0.02)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, std=0.02)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def embed(self, obs: torch.Tensor) -> torch.Tensor:
        """Hidden state per step, ``(B, T, H)``; ``obs`` is ``(B, T, obs_dim)``."""
        return self.core(self.encoder(obs))

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Returns ``(logits (B,T,A), value (B,T), h (B,T,H))``."""
        h = self.embed(obs)
        return self.action_head(h), self.value_head(h), h

    @staticmethod
    def dist(logits: torch.Tensor) -> Categorical:
        return Categorical(logits=logits)

    def predict_next(self, h: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.world_model(h, action)

    def wm_target(self, next_obs: torch.Tensor) -> torch.Tensor:
        """What the world-model head is trained to predict for ``next_obs``."""
        if self.cfg.wm_target == "raw":
            return next_obs  # FIX 2: the raw next state, a fixed target from step 0
        with torch.no_grad():  # embedding target (for later; drifts while the encoder learns)
            return self.encoder.net(next_obs)

    def summary(self) -> str:
        c = self.cfg
        parts = {"encoder": self.encoder, "core": self.core, "action_head": self.action_head,
                 "world_model": self.world_model, "value_head": self.value_head}
        counts = ", ".join(f"{k} {sum(p.numel() for p in m.parameters()):,}" for k, m in parts.items())
        return (f"BabyModel ({self.num_parameters():,} parameters; {c.num_layers} layers, hidden {c.hidden_dim}, "
                f"{c.num_heads} heads, {c.num_actions} actions, WM target {c.wm_target}): {counts}")

"""The symbolic tasks' common ground: the difficulty table, the action space and the :class:`Task` base class.

Every task stores its hidden state as a ``LongTensor`` of shape ``(B, num_fields)`` and implements
``sample`` (a task instance), ``observe`` (what the baby sees), ``transition`` (the parent's rules:
next state and goal reward) and ``oracle_action``. The observation is a concatenation of one-hot
slots: the task's own slots, then two feedback slots that every task shares -- the previous action
(``A + 1`` values, ``A`` = none yet) and the previous goal reward (0/1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from lfo_cli.errors import LfoError

# The design's difficulty table (plan, phase 5.2). Ranges are clipped to the action space: with
# A actions, PatternEcho level 2 ("all 16 actions" in the design) means all A actions.
DIFFICULTY_CONFIGS: dict[str, dict[int, dict[str, Any]]] = {
    "pattern_echo": {
        0: {"target_range": (0, 4)},  # only 5 possible targets
        1: {"target_range": (0, 8)},  # 9 possible targets
        2: {"target_range": (0, 15)},  # all actions (upper end = A - 1 when A != 16)
    },
    "sequence_next": {
        0: {"sequence_length": 2, "pattern": "increment"},
        1: {"sequence_length": 3, "pattern": "increment"},
        2: {"sequence_length": 3, "pattern": "arithmetic"},
    },
    "conditional": {
        0: {"num_conditions": 1},
        1: {"num_conditions": 2},
        2: {"num_conditions": 3, "nested": True},
    },
    # New multi-step tasks (the design's "open next step"): prediction/memory is required.
    "delayed_recall": {
        0: {"delay": 1},
        1: {"delay": 3},
        2: {"delay": 6},
    },
    "key_door": {
        0: {"corridor_length": 5},
        1: {"corridor_length": 7},
        2: {"corridor_length": 9},
    },
}


@dataclass
class ActionSpace:
    """Discrete, meaningless symbols ``0..size-1``: the baby must learn what each one does."""

    size: int = 8

    def __post_init__(self) -> None:
        if self.size < 2:
            raise LfoError(f"num-actions must be >= 2 (got {self.size})")

    def sample(self, generator: torch.Generator | None = None) -> int:
        return int(torch.randint(self.size, (1,), generator=generator))



class Task:
    """Base class: batched rules of one task family. Subclasses fill the class attributes."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""  # one line, used in LLM-parent prompts
    reactive_solvable: ClassVar[bool] = True

    def __init__(self, num_actions: int = 8):
        ActionSpace(num_actions)  # validates
        self.num_actions = num_actions
        self.levels = DIFFICULTY_CONFIGS[self.name]
        self.num_levels = len(self.levels)
        self.fields: list[tuple[str, int]] = self._fields()  # (name, cardinality) of the hidden state
        self.obs_slots: list[tuple[str, int]] = self._obs_slots()
        cards = [c for _, c in self.obs_slots] + [num_actions + 1, 2]
        self.obs_cards = cards
        self.obs_dim = sum(cards)
        self._offsets = torch.tensor([0] + cards[:-1]).cumsum(0)
        self.max_horizon = max(self.horizon(level) for level in range(self.num_levels))

    # -- to implement -------------------------------------------------------------------------
    def _fields(self) -> list[tuple[str, int]]:
        raise NotImplementedError

    def _obs_slots(self) -> list[tuple[str, int]]:
        raise NotImplementedError

    def horizon(self, level: int) -> int:
        return 1

    def sample(self, n: int, level: int, gen: torch.Generator) -> torch.Tensor:
        raise NotImplementedError

    def observe(self, state: torch.Tensor, t: int) -> torch.Tensor:
        raise NotImplementedError

    def transition(self, state: torch.Tensor, action: torch.Tensor, t: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Return ``(next_state, goal_reward)``; the parent's rules. Must not modify ``state``."""
        raise NotImplementedError

    def oracle_action(self, state: torch.Tensor, t: int) -> torch.Tensor:
        """The correct action per env; ``-1`` where every action is equally fine."""
        raise NotImplementedError

    def attributes(self, state: torch.Tensor, t: int) -> dict[str, torch.Tensor]:
        """Named state attributes for representation probes (default: the hidden fields)."""
        return {name: state[:, i] for i, (name, _) in enumerate(self.fields)}

    # -- shared -------------------------------------------------------------------------------
    def check_level(self, level: int) -> int:
        if not 0 <= level < self.num_levels:
            raise LfoError(f"level must be in 0..{self.num_levels - 1} for task {self.name} (got {level})")
        return level

    def encode(self, state: torch.Tensor, t: torch.Tensor | int, prev_action: torch.Tensor,
               prev_reward: torch.Tensor) -> torch.Tensor:
        """Raw observation tensor ``(B, obs_dim)``: one-hot task slots + previous action + reward bit."""
        tt = int(t[0]) if isinstance(t, torch.Tensor) else int(t)
        slots = torch.cat([self.observe(state, tt), prev_action.view(-1, 1).long(),
                           (prev_reward.view(-1, 1) > 0.5).long()], dim=1)
        out = torch.zeros(slots.shape[0], self.obs_dim)
        out.scatter_(1, slots + self._offsets, 1.0)
        return out

    def field_index(self, name: str) -> int:
        return [n for n, _ in self.fields].index(name)

    def validate_row(self, attrs: Any) -> torch.Tensor:
        """A dict from an LLM reply -> a state row; raises ValueError on missing/out-of-range values."""
        if not isinstance(attrs, dict):
            raise ValueError("state is not an object")
        values = []
        for name, card in self.fields:
            v = attrs.get(name)
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < card:
                raise ValueError(f"field {name!r}={v!r} not an integer in [0, {card})")
            values.append(v)
        return torch.tensor(values, dtype=torch.long)

    def instance_ok(self, rows: torch.Tensor, level: int) -> torch.Tensor:
        """Which rows are task instances the parent may start an episode from at ``level``."""
        return torch.ones(rows.shape[0], dtype=torch.bool)

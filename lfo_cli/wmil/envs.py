"""Symbolic environments for WMIL, written as *batched tensor rules*.

Every task stores its hidden state as a ``LongTensor`` of shape ``(B, num_fields)`` and implements
``sample`` (a task instance), ``observe`` (what the baby sees), ``transition`` (the parent's rules:
next state and goal reward) and ``oracle_action``. :class:`VecEnv` steps ``B`` environments at once;
all of them share the episode clock, because episodes end ONLY on the time limit (fix 1), so a
rollout is a plain ``for t in range(T)`` over ``(B, ...)`` tensors -- no Python loop per env.

The observation is a concatenation of one-hot slots: the task's own slots, then two feedback slots
that every task shares -- the previous action (``A + 1`` values, ``A`` = none yet) and the previous
goal reward (0/1). The world-model head predicts this raw next observation (fix 2); for the fully
observed single-step tasks it is the raw next state.

Single-step tasks (PatternEcho, SequenceNext, Conditional) are solvable by a reactive policy and are
there to reproduce the seed. The multi-step tasks (DelayedRecall, KeyDoor) are built so that a
reactive policy (one that sees only the current observation) provably cannot solve them; the reason
is written in each class docstring and checked empirically by ``--context-window 1`` runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from lfo_cli.errors import LfoError

# The seed's difficulty table (plan, phase 5.2). Ranges are clipped to the action space: with
# A actions, PatternEcho level 2 ("all 16 actions" in the seed) means all A actions.
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
    # New multi-step tasks (the seed's "open next step"): prediction/memory is required.
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


# ---------------------------------------------------------------------------------------------
# Python-object view of one state (prompts for the LLM parent, the seed's single-env loop)
# ---------------------------------------------------------------------------------------------
@dataclass
class ActionSpace:
    """Discrete, meaningless symbols ``0..size-1``: the baby must learn what each one does."""

    size: int = 8

    def __post_init__(self) -> None:
        if self.size < 2:
            raise LfoError(f"num-actions must be >= 2 (got {self.size})")

    def sample(self, generator: torch.Generator | None = None) -> int:
        return int(torch.randint(self.size, (1,), generator=generator))


@dataclass
class RewardVector:
    """Reward components kept apart (fix 4): goal (parent), pred (world-model accuracy), cons."""

    goal: float = 0.0  # from the parent: 1.0 when the action achieved the goal
    pred: float = 0.0  # intrinsic: exp(-world-model MSE) of the prediction for this step
    cons: float = 0.0  # consistency: fraction of next-state slots the world model got exactly right

    def to_tensor(self) -> torch.Tensor:
        return torch.tensor([self.goal, self.pred, self.cons])

    def scalar(self, weights: tuple[float, float, float] = (1.0, 0.0, 0.0)) -> float:
        return weights[0] * self.goal + weights[1] * self.pred + weights[2] * self.cons


@dataclass
class State:
    """One environment state: named integer attributes of a task (hidden ones included)."""

    task: Task
    attributes: dict[str, int]
    t: int = 0

    def row(self) -> torch.Tensor:
        return torch.tensor([[self.attributes[name] for name, _ in self.task.fields]], dtype=torch.long)

    def to_tensor(self, prev_action: int | None = None, prev_reward: float = 0.0) -> torch.Tensor:
        """The raw observation vector (one-hot slots + feedback), shape ``(obs_dim,)``."""
        pa = torch.tensor([self.task.num_actions if prev_action is None else prev_action])
        pr = torch.tensor([1.0 if prev_reward > 0.5 else 0.0])
        return self.task.encode(self.row(), torch.tensor([self.t]).expand(1), pa, pr)[0]

    def to_prompt(self) -> str:
        attrs = ", ".join(f'"{k}": {v}' for k, v in self.attributes.items())
        return f"task={self.task.name} t={self.t} state={{{attrs}}}"

    @classmethod
    def from_row(cls, task: Task, row: torch.Tensor, t: int = 0) -> State:
        return cls(task, {name: int(v) for (name, _), v in zip(task.fields, row.tolist(), strict=True)}, t)


# ---------------------------------------------------------------------------------------------
# Tasks
# ---------------------------------------------------------------------------------------------
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


class PatternEcho(Task):
    """State shows a target symbol; the correct action is the same symbol (reward 1, else 0).

    Single step (T = 1). A reactive policy solves it: the observation contains the answer. This is
    the seed's locked MVP task; random success is ``1 / (number of targets)``.
    """

    name = "pattern_echo"
    description = "The state shows a target symbol; the correct action equals the target."

    def _fields(self):
        return [("target", self.num_actions)]

    def _obs_slots(self):
        return [("target", self.num_actions)]

    def target_high(self, level: int) -> int:
        hi = self.levels[level]["target_range"][1]
        return self.num_actions - 1 if level == self.num_levels - 1 else min(hi, self.num_actions - 1)

    def sample(self, n, level, gen):
        return torch.randint(0, self.target_high(level) + 1, (n, 1), generator=gen)

    def observe(self, state, t):
        return state[:, :1]

    def instance_ok(self, rows, level):
        return rows[:, 0] <= self.target_high(level)

    def transition(self, state, action, t):
        return state.clone(), (action == state[:, 0]).float()

    def oracle_action(self, state, t):
        return state[:, 0].clone()


class SequenceNext(Task):
    """State shows 2-3 terms of a sequence modulo A; the correct action is the next term.

    Level 0: two terms, step +1; level 1: three terms, step +1; level 2: three terms, arithmetic with
    a random step in 1..A-1. Single step; a reactive policy can solve it (the terms determine the
    answer), so it is the seed's second ablation, not a prediction task.
    """

    name = "sequence_next"
    description = "The state shows the last terms of an arithmetic sequence modulo A; the correct action is the next term."

    def _fields(self):
        a = self.num_actions
        return [("start", a), ("step", a), ("length", 4)]

    def _obs_slots(self):
        return [(f"term{i}", self.num_actions + 1) for i in range(3)]  # value A = blank

    def sample(self, n, level, gen):
        cfg, a = self.levels[level], self.num_actions
        start = torch.randint(0, a, (n,), generator=gen)
        if cfg["pattern"] == "increment":
            step = torch.ones(n, dtype=torch.long)
        else:
            step = torch.randint(1, a, (n,), generator=gen)
        length = torch.full((n,), cfg["sequence_length"], dtype=torch.long)
        return torch.stack([start, step, length], dim=1)

    def instance_ok(self, rows, level):
        cfg = self.levels[level]
        ok = rows[:, 2] == cfg["sequence_length"]
        return ok & ((rows[:, 1] == 1) if cfg["pattern"] == "increment" else (rows[:, 1] >= 1))

    def terms(self, state):
        a = self.num_actions
        start, step, length = state[:, 0], state[:, 1], state[:, 2]
        slots = []
        for i in range(3):  # right-aligned: the last slot is always the last shown term
            k = i - (3 - length)  # index of the term in slot i
            val = (start + k.clamp(min=0) * step) % a
            slots.append(torch.where(k >= 0, val, torch.full_like(val, a)))
        return torch.stack(slots, dim=1)

    def observe(self, state, t):
        return self.terms(state)

    def answer(self, state):
        return (state[:, 0] + state[:, 2] * state[:, 1]) % self.num_actions

    def transition(self, state, action, t):
        return state.clone(), (action == self.answer(state)).float()

    def oracle_action(self, state, t):
        return self.answer(state)

    def attributes(self, state, t):
        return {"last_term": self.terms(state)[:, 2], "step": state[:, 1], "answer": self.answer(state)}


class Conditional(Task):
    """State shows shape, colour and size bits plus the active rule; the action follows the rule.

    With ``h = max(1, A // 2)`` and ``q = max(1, A // 4)``: 1 condition -> ``shape * h``;
    2 conditions -> ``+ colour * q`` ("red adds"); 3 nested -> ``+ colour * size`` (size only matters
    when red); everything modulo A. Single step and fully observed: a reactive policy can solve it.
    """

    name = "conditional"
    description = "The state shows shape, color, size and the rule id; the correct action follows the conditional rule."

    def _fields(self):
        return [("shape", 2), ("color", 2), ("size", 2), ("num_conditions", 4)]

    def _obs_slots(self):
        return [("shape", 2), ("color", 2), ("size", 2), ("num_conditions", 4)]

    def sample(self, n, level, gen):
        bits = torch.randint(0, 2, (n, 3), generator=gen)
        k = torch.full((n, 1), self.levels[level]["num_conditions"], dtype=torch.long)
        return torch.cat([bits, k], dim=1)

    def observe(self, state, t):
        return state

    def instance_ok(self, rows, level):
        return rows[:, 3] == self.levels[level]["num_conditions"]

    def answer(self, state):
        a = self.num_actions
        h, q = max(1, a // 2), max(1, a // 4)
        shape, color, size, k = state.unbind(1)
        out = shape * h + (k >= 2).long() * color * q + (k >= 3).long() * color * size
        return out % a

    def transition(self, state, action, t):
        return state.clone(), (action == self.answer(state)).float()

    def oracle_action(self, state, t):
        return self.answer(state)

    def attributes(self, state, t):
        return {"shape": state[:, 0], "color": state[:, 1], "size": state[:, 2], "answer": self.answer(state)}


class DelayedRecall(Task):
    """A cue symbol is shown at t = 0 and hidden afterwards; at t = delay the query flag appears and
    the correct action is the cue (reward 1 only then). Episode length ``delay + 1``.

    Why a reactive policy cannot solve it: at the query step the observation is identical for every
    cue (cue slot blank, phase = query, previous-action echo of the agent's own action), so any
    policy that sees only the current observation answers every cue the same way and succeeds with
    probability at most ``1 / A``. Remembering the cue across the delay is required. The world-model
    target is informative too: the next observation after the query carries the reward bit, which
    can only be predicted by a model that remembers the cue.
    """

    name = "delayed_recall"
    description = ("A cue symbol is visible only at t=0; at the query step (t=delay) the correct action equals "
                   "the cue. Reward 1 only for the correct action at the query step.")
    reactive_solvable = False

    def _fields(self):
        return [("cue", self.num_actions), ("delay", 8)]

    def _obs_slots(self):
        # phase: 0 cue shown, 1 waiting, 2 query, 3 after the query (terminal observation)
        return [("cue_view", self.num_actions + 1), ("phase", 4)]

    def horizon(self, level):
        return self.levels[level]["delay"] + 1

    def sample(self, n, level, gen):
        cue = torch.randint(0, self.num_actions, (n,), generator=gen)
        return torch.stack([cue, torch.full((n,), self.levels[level]["delay"], dtype=torch.long)], dim=1)

    def instance_ok(self, rows, level):
        return rows[:, 1] == self.levels[level]["delay"]

    def observe(self, state, t):
        cue, delay = state[:, 0], state[:, 1]
        view = cue if t == 0 else torch.full_like(cue, self.num_actions)
        phase = torch.where(delay == t, 2, torch.where(delay < t, 3, 1 if t > 0 else 0))
        return torch.stack([view, phase.long()], dim=1)

    def transition(self, state, action, t):
        reward = ((state[:, 1] == t) & (action == state[:, 0])).float()
        return state.clone(), reward

    def oracle_action(self, state, t):
        return torch.where(state[:, 1] == t, state[:, 0], torch.full_like(state[:, 0], -1))


class KeyDoor(Task):
    """A 1-D corridor of length N (level 0/1/2: 5/7/9). The key lies at one end and the door at the
    other, side drawn at random; the agent starts in the middle and sees ONLY the content of its own
    cell (empty / key / closed door / open door) plus the feedback slots. Stepping onto the key picks
    it up; stepping onto the door while holding the key opens it: reward 1, success. The episode
    still runs to the time limit (3N steps). Action symbols have effects the agent must learn: each
    symbol is left, right or stay through a fixed scrambled table (``effects``).

    Why a reactive policy cannot solve it: almost every cell looks "empty", so a policy that sees
    only the current observation uses the same action distribution at the start, on the way to the
    key and on the way back to the door; it cannot know which end it came from or whether it holds
    the key, and a deterministic reactive policy walks into a wall and stays there. Success needs
    memory (which way did I go, did I pass the key) -- path integration that the world-model head
    must also learn to predict the next cell content.
    """

    name = "key_door"
    description = ("1-D corridor; the key is at one end and the door at the other. Actions move left, right or "
                   "stay. Stepping on the key picks it up; stepping on the door with the key opens it (reward 1).")
    reactive_solvable = False
    LEFT, RIGHT, STAY = 0, 1, 2
    EFFECT_TABLE_SEED = 20260101  # fixed: the symbol -> effect table is part of the task, not of the run

    def __init__(self, num_actions: int = 8):
        perm = torch.randperm(num_actions, generator=torch.Generator().manual_seed(self.EFFECT_TABLE_SEED))
        self.effects = perm % 3  # symbol -> 0 left / 1 right / 2 stay (both moves always exist)
        super().__init__(num_actions)

    def _fields(self):
        n = max(cfg["corridor_length"] for cfg in self.levels.values())
        return [("pos", n), ("key_side", 2), ("has_key", 2), ("door_open", 2), ("length", n + 1)]

    def _obs_slots(self):
        return [("content", 4)]  # 0 empty, 1 key, 2 closed door, 3 open door

    def horizon(self, level):
        return 3 * self.levels[level]["corridor_length"]

    def sample(self, n, level, gen):
        length = self.levels[level]["corridor_length"]
        side = torch.randint(0, 2, (n,), generator=gen)
        z = torch.zeros(n, dtype=torch.long)
        return torch.stack([z + length // 2, side, z, z, z + length], dim=1)

    def instance_ok(self, rows, level):
        length = self.levels[level]["corridor_length"]
        return (rows[:, 4] == length) & (rows[:, 0] == length // 2) & (rows[:, 2] == 0) & (rows[:, 3] == 0)

    @staticmethod
    def _cells(state):
        length = state[:, 4]
        key_cell = torch.where(state[:, 1] == 0, 0, length - 1)
        door_cell = length - 1 - key_cell
        return key_cell, door_cell

    def observe(self, state, t):
        pos, has_key, door_open = state[:, 0], state[:, 2], state[:, 3]
        key_cell, door_cell = self._cells(state)
        content = torch.zeros_like(pos)
        content = torch.where((pos == key_cell) & (has_key == 0), 1, content)
        content = torch.where(pos == door_cell, 2 + door_open, content)
        return content.view(-1, 1)

    def transition(self, state, action, t):
        eff = self.effects[action]
        move = torch.where(eff == self.LEFT, -1, torch.where(eff == self.RIGHT, 1, 0))
        pos = torch.minimum(torch.clamp(state[:, 0] + move, min=0), state[:, 4] - 1)
        key_cell, door_cell = self._cells(state)
        has_key = state[:, 2] | (pos == key_cell).long()
        opened = (pos == door_cell) & (has_key == 1) & (state[:, 3] == 0)
        nxt = state.clone()
        nxt[:, 0], nxt[:, 2], nxt[:, 3] = pos, has_key, state[:, 3] | opened.long()
        return nxt, opened.float()

    def oracle_action(self, state, t):
        key_cell, door_cell = self._cells(state)
        goal = torch.where(state[:, 2] == 1, door_cell, key_cell)
        want = torch.where(goal < state[:, 0], self.LEFT, self.RIGHT)
        want = torch.where(state[:, 3] == 1, self.STAY if (self.effects == self.STAY).any() else self.LEFT, want)
        symbol_for = torch.stack([(self.effects == e).long().argmax() for e in range(3)])
        return symbol_for[want]

    def attributes(self, state, t):
        return {"pos": state[:, 0], "key_side": state[:, 1], "has_key": state[:, 2]}


TASKS: dict[str, type[Task]] = {
    cls.name: cls for cls in (PatternEcho, SequenceNext, Conditional, DelayedRecall, KeyDoor)
}


def make_task(name: str, num_actions: int) -> Task:
    if name not in TASKS:
        raise LfoError(f"unknown task '{name}' (known: {', '.join(TASKS)})")
    if num_actions < 2:
        raise LfoError(f"num-actions must be >= 2 (got {num_actions})")
    return TASKS[name](num_actions)


# ---------------------------------------------------------------------------------------------
# Vectorised environment
# ---------------------------------------------------------------------------------------------
@dataclass
class StepResult:
    obs: torch.Tensor  # (B, obs_dim) raw next observation
    goal: torch.Tensor  # (B,) goal reward from the parent
    success: torch.Tensor  # (B,) bool, r_goal > 0.9 at this step
    done: bool  # time limit reached (fix 1: the ONLY way an episode ends)
    info: dict = field(default_factory=dict)


class VecEnv:
    """``num_envs`` environments of one task stepped together as tensors.

    ``reset()`` draws task instances from the parent at the current ``level``; ``step(actions)``
    asks the parent for the transition and goal reward of every env at once. ``done`` becomes true
    only when ``t`` reaches the episode length (fix 1); success is reported separately.
    """

    def __init__(self, task: Task, parent, num_envs: int, generator: torch.Generator, level: int = 0):
        self.task, self.parent, self.num_envs, self.gen = task, parent, num_envs, generator
        self.level = task.check_level(level)
        self.state: torch.Tensor | None = None
        self.t = 0

    @property
    def horizon(self) -> int:
        return self.task.horizon(self.level)

    def reset(self) -> torch.Tensor:
        self.state = self.parent.reset(self.num_envs, self.level, self.gen)
        self.t = 0
        self.episode_success = torch.zeros(self.num_envs, dtype=torch.bool)
        none = torch.full((self.num_envs,), self.task.num_actions, dtype=torch.long)
        return self.task.encode(self.state, 0, none, torch.zeros(self.num_envs))

    def step(self, action: torch.Tensor) -> StepResult:
        if self.t >= self.horizon:
            raise RuntimeError("step() after the time limit; call reset()")
        nxt, goal = self.parent.step(self.state, action, self.t)
        self.state = nxt
        self.t += 1
        success = goal > 0.9
        self.episode_success |= success
        obs = self.task.encode(nxt, self.t, action, goal)
        done = self.t >= self.horizon  # FIX 1: time limit only
        return StepResult(obs, goal, success, done, {"episode_success": self.episode_success.clone(), "t": self.t})


# ---------------------------------------------------------------------------------------------
# The seed's single-environment wrapper (python objects, one step at a time)
# ---------------------------------------------------------------------------------------------
class SymbolicEnv:
    """The seed's gym-like wrapper: one env, python ``State`` objects, one step per call.

    Kept for the LLM parent's prompts and as the "per-step loop" the throughput benchmark compares
    the vectorised trainer with. Fix 1 holds here too: ``done`` only on the time limit.
    """

    def __init__(self, task: Task, parent, level: int = 0, generator: torch.Generator | None = None):
        self.task, self.parent, self.level = task, parent, task.check_level(level)
        self.gen = generator or torch.Generator().manual_seed(0)
        self.max_steps = task.horizon(self.level)

    def reset(self) -> State:
        row = self.parent.reset(1, self.level, self.gen)[0]
        self.state = State.from_row(self.task, row, 0)
        self.step_count = 0
        self.episode_success = False
        return self.state

    def step(self, action: int) -> tuple[State, RewardVector, bool, dict]:
        nxt, goal = self.parent.step(self.state.row(), torch.tensor([action]), self.step_count)
        self.step_count += 1
        self.state = State.from_row(self.task, nxt[0], self.step_count)
        r_goal = float(goal[0])
        success = r_goal > 0.9
        self.episode_success = self.episode_success or success
        done = self.step_count >= self.max_steps  # FIX 1
        info = {"success": success, "episode_success": self.episode_success, "step": self.step_count}
        return self.state, RewardVector(goal=r_goal), done, info


def describe_tasks() -> list[dict[str, Any]]:
    return [
        {"task": name, "levels": len(DIFFICULTY_CONFIGS[name]), "reactive_solvable": cls.reactive_solvable,
         "difficulty": {str(k): v for k, v in DIFFICULTY_CONFIGS[name].items()}}
        for name, cls in TASKS.items()
    ]


__all__ = [
    "DIFFICULTY_CONFIGS", "ActionSpace", "RewardVector", "State", "Task", "PatternEcho", "SequenceNext",
    "Conditional", "DelayedRecall", "KeyDoor", "TASKS", "make_task", "VecEnv", "StepResult", "SymbolicEnv",
    "describe_tasks",
]

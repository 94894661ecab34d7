"""Symbolic environments for WMIL: the task registry and the environments that step the tasks' rules.

:class:`VecEnv` steps ``B`` environments at once; all of them share the episode clock, because
episodes end ONLY on the time limit (fix 1), so a rollout is a plain ``for t in range(T)`` over
``(B, ...)`` tensors -- no Python loop per env. The world-model head predicts the raw next observation
(fix 2); for the fully observed single-step tasks it is the raw next state.

The tasks themselves are batched tensor rules (:mod:`lfo_cli.wmil.task_base`): single-step ones a
reactive policy can solve (:mod:`lfo_cli.wmil.reactive_tasks`), there to reproduce the design's results, and
multi-step ones that need memory (:mod:`lfo_cli.wmil.memory_tasks`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from lfo_cli.errors import LfoError
from lfo_cli.wmil.config import TASK_NAMES
from lfo_cli.wmil.memory_tasks import DelayedRecall, KeyDoor
from lfo_cli.wmil.reactive_tasks import Conditional, PatternEcho, SequenceNext
from lfo_cli.wmil.task_base import DIFFICULTY_CONFIGS, Task


# ---------------------------------------------------------------------------------------------
# Python-object view of one state (prompts for the LLM parent, the design's single-env loop)
# ---------------------------------------------------------------------------------------------
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



TASKS: dict[str, type[Task]] = {
    cls.name: cls for cls in (PatternEcho, SequenceNext, Conditional, DelayedRecall, KeyDoor)
}
if tuple(TASKS) != TASK_NAMES:
    raise ImportError(f"lfo_cli.wmil.config.TASK_NAMES {TASK_NAMES} must name the tasks here: {tuple(TASKS)}")


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
# The design's single-environment wrapper (python objects, one step at a time)
# ---------------------------------------------------------------------------------------------
class SymbolicEnv:
    """The design's gym-like wrapper: one env, python ``State`` objects, one step per call.

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


__all__ = ["RewardVector", "State", "TASKS", "make_task", "VecEnv", "StepResult", "SymbolicEnv", "describe_tasks"]

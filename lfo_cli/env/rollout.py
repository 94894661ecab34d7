"""Playing a reference policy through an episode: :func:`run_episode` and its :class:`Trajectory`.

Trajectories round-trip through JSONL (``write_trajectories_jsonl`` / ``read_trajectories_jsonl``).
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lfo_cli.env.episode import Episode, Transition
from lfo_cli.env.noise import NoiseConfig, NoisyPolicy
from lfo_cli.env.policies import POLICIES, Policy, PublicTask
from lfo_cli.env.world import Task, WorldData, sub_seed
from lfo_cli.errors import LfoError
from lfo_cli.io import atomic_write_jsonl, iter_jsonl


def make_policy(name: str, world: WorldData, noise: NoiseConfig | None = None) -> Policy:
    try:
        policy = POLICIES[name](world)
    except KeyError:
        raise LfoError(f"unknown policy {name!r}; choose from {sorted(POLICIES)}") from None
    if noise is not None and noise.active:
        return NoisyPolicy(policy, noise)
    return policy


@dataclass
class Trajectory:
    task_id: str
    policy: str
    rollout_seed: int
    prompt: str
    transitions: list[Transition]
    reward: float
    info: dict

    def to_dict(self) -> dict:
        return {"task_id": self.task_id, "policy": self.policy, "rollout_seed": self.rollout_seed,
                "prompt": self.prompt, "transitions": [t.to_dict() for t in self.transitions],
                "reward": self.reward, "info": self.info}

    @classmethod
    def from_dict(cls, d: dict) -> Trajectory:
        return cls(task_id=d["task_id"], policy=d["policy"], rollout_seed=int(d["rollout_seed"]),
                   prompt=d["prompt"], transitions=[Transition.from_dict(t) for t in d["transitions"]],
                   reward=float(d["reward"]), info=dict(d["info"]))


def run_episode(env: Any, policy: Policy | str, task: Task | str, rollout_seed: int = 0,
                noise: NoiseConfig | None = None) -> Trajectory:
    """Run ``policy`` on ``task`` in ``env`` (an :class:`Episode` or a ``CustomerServiceEnv``)."""
    episode: Episode = env.episode if hasattr(env, "episode") and isinstance(env.episode, Episode) else env
    if isinstance(policy, str):
        policy = make_policy(policy, episode.world, noise)
    if isinstance(task, str):
        task = episode.world.task(task)
    prompt = episode.reset(task, rollout_seed)
    rng = random.Random(sub_seed("policy", policy.name, task.task_id, rollout_seed))
    policy.begin(task if policy.uses_hidden_knowledge else PublicTask.of(task), rng)
    obs: str | None = None
    # indices of transitions that were noise (NoisyPolicy.last_noise): deliberate copy slips
    # (NoiseConfig.slip) and random replacement actions (NoiseConfig.epsilon); a warm start may keep
    # them in context without imitating them
    noise_steps: dict[str, list[int]] = {"slip": [], "random": []}
    while not episode.done:
        action = policy.act(obs)
        if action is None:
            break
        kind = getattr(policy, "last_noise", None)
        if kind is not None:
            noise_steps[kind].append(len(episode.transitions))
        obs = episode.step(action.tool, action.args)
    info = episode.info()
    for kind, key in (("slip", "slipped_steps"), ("random", "random_steps")):
        if noise_steps[kind]:
            info[key] = noise_steps[kind]
    return Trajectory(task.task_id, policy.name, rollout_seed, prompt, list(episode.transitions),
                      episode.reward(), info)


def write_trajectories_jsonl(path: str | Path, trajectories: Iterable[Trajectory]) -> Path:
    return atomic_write_jsonl(path, (t.to_dict() for t in trajectories))


def read_trajectories_jsonl(path: str | Path) -> list[Trajectory]:
    out = []
    for i, row in enumerate(iter_jsonl(path), start=1):
        try:
            out.append(Trajectory.from_dict(row))
        except (KeyError, TypeError, ValueError) as exc:
            raise LfoError(f"{path}:{i}: not a trajectory ({exc})") from None
    return out


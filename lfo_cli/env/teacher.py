"""The customer-service world's teacher for warm starts: reference-policy rollouts of tasks, and the
tasks a warm start's SFT plays (the world's train split, fresh tasks, or fresh tasks on companies
generated afresh). ``lfo_cli.models`` turns the rollouts into conversations."""

from __future__ import annotations

import random
from collections.abc import Iterable
from typing import Any

from lfo_cli.env.episode import Episode
from lfo_cli.env.generate import generate_world
from lfo_cli.env.rollout import run_episode
from lfo_cli.env.tasks import fresh_training_tasks
from lfo_cli.env.world import WorldData, sub_seed
from lfo_cli.errors import LfoError


def teacher_rollouts(world: WorldData, tasks: Iterable[Any], *, policy: str, noise: Any = None, seed: int = 0,
                     rollouts_per_task: int = 1, probe_rate: float = 0.0, probe_noise: Any = None) -> list[dict]:
    """Run ``policy`` (with the environment's ``NoiseConfig``) on each task; one dict per rollout with
    ``task_id``, ``difficulty``, ``policy``, ``reward``, ``info``, ``prompt`` and ``transitions`` (dicts).
    Rollout seeds derive from ``seed`` so the data set is reproducible. ``probe_rate``: each rollout plays
    the ``probe`` policy instead with this probability (drawn per rollout from ``seed``, task and rollout
    index, so a rollout's policy and its own seed do not depend on the others), with ``probe_noise``
    (None: ``noise``)."""
    episode = Episode(world)
    out = []
    for task in tasks:
        for r in range(rollouts_per_task):
            rollout_seed = sub_seed("warmstart", seed, task.task_id, r) % (2**31)
            played, played_noise = policy, noise
            if probe_rate and random.Random(sub_seed("probe-mix", seed, task.task_id, r)).random() < probe_rate:
                played, played_noise = "probe", noise if probe_noise is None else probe_noise
            traj = run_episode(episode, played, task, rollout_seed=rollout_seed, noise=played_noise)
            d = traj.to_dict()
            out.append({"task_id": task.task_id, "difficulty": task.difficulty, "policy": traj.policy,
                        "reward": traj.reward, "info": traj.info, "prompt": d["prompt"],
                        "transitions": d["transitions"]})
    return out


def sft_world(data: Any, seed: int, world: WorldData) -> WorldData:
    """The world the SFT tasks are played in: ``world``, or with ``data.fresh_companies`` one of that many
    companies generated afresh (the generator's own catalogue and exception rate, nothing held out)."""
    if not data.fresh_companies:
        return world
    return generate_world(num_companies=data.fresh_companies, num_train_tasks=0, num_val_tasks=0,
                          heldout_fraction=0.0, seed=sub_seed("sft-companies", world.seed, seed),
                          exception_rate=world.config.get("exception_rate", 0.3))


def sft_tasks(data: Any, seed: int, world: WorldData) -> tuple[WorldData, list]:
    """The world and tasks a warm start imitates its teacher on (``data`` the recipe's data section)."""
    world = sft_world(data, seed, world)
    if data.fresh_tasks:
        tasks = fresh_training_tasks(world, data.fresh_tasks, seed=sub_seed("sft", world.seed, seed))
    else:
        tasks = list(world.tasks.get("train", []))
    if data.max_tasks is not None:
        tasks = random.Random(seed).sample(tasks, min(data.max_tasks, len(tasks)))
    if not tasks:
        raise LfoError(f"{data.dir}: the world has no train tasks")
    return world, tasks

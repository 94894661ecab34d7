"""Reference-policy check: run oracle/probe/prior/random on tasks, aggregate by difficulty.

Stdlib only; the CLI (``lfo gen-env --check``) renders the rows as a rich table, CSV, JSON and PNG.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from lfo_cli.env.episode import Episode
from lfo_cli.env.policies import REFERENCE_POLICIES
from lfo_cli.env.rollout import make_policy, run_episode
from lfo_cli.env.world import DIFFICULTIES, SPLITS, Task, WorldData, sub_seed

METRICS = (
    "success_rate", "mean_turns", "mean_phone_calls", "auth_before_first_call", "department_order_correct",
    "invalid_calls_per_episode", "forms_per_episode",
)


@dataclass(frozen=True)
class EpisodeRecord:
    policy: str
    task_id: str
    split: str
    difficulty: int
    rollout_seed: int
    success: bool
    turns: int
    phone_calls: int
    auth_before_first_call: bool
    department_order_correct: bool
    invalid_calls: int
    forms: int


def select_tasks(world: WorldData, per_difficulty: int, seed: int = 0,
                 splits: Iterable[str] = SPLITS) -> list[tuple[Task, int]]:
    """``per_difficulty`` (task, rollout seed) pairs per difficulty, drawn from ``splits``.

    Tasks are shuffled with a seeded RNG; when a difficulty has fewer tasks than asked, tasks repeat
    with new rollout seeds (the reps' wording differs, the hidden world does not)."""
    pool = [t for s in splits for t in world.tasks[s]]
    out = []
    for d in DIFFICULTIES:
        tasks = [t for t in pool if t.difficulty == d]
        if not tasks:
            continue
        random.Random(sub_seed("check", seed, d)).shuffle(tasks)
        for i in range(per_difficulty):
            out.append((tasks[i % len(tasks)], i // len(tasks)))
    return out


def run_check(world: WorldData, policies: Iterable[str] = REFERENCE_POLICIES, episodes_per_difficulty: int = 40,
              seed: int = 0, splits: Iterable[str] = SPLITS,
              on_episode: Callable[[], None] | None = None) -> list[EpisodeRecord]:
    episode = Episode(world)
    jobs = select_tasks(world, episodes_per_difficulty, seed, splits)
    records = []
    for name in policies:
        policy = make_policy(name, world)
        for task, rs in jobs:
            traj = run_episode(episode, policy, task, rollout_seed=sub_seed("check-rollout", seed, rs) % (1 << 31))
            info = traj.info
            records.append(EpisodeRecord(
                policy=name, task_id=task.task_id, split=task.split, difficulty=task.difficulty, rollout_seed=rs,
                success=info["success"], turns=info["turns"], phone_calls=info["phone_calls"],
                auth_before_first_call=info["auth_before_first_call"],
                department_order_correct=info["department_order_correct"],
                invalid_calls=info["invalid_tool_calls"], forms=info["forms_submitted"],
            ))
            if on_episode is not None:
                on_episode()
    return records


def summarize(records: list[EpisodeRecord]) -> list[dict]:
    """One row per (policy, difficulty) plus one per (policy, 'all'): rates in [0, 1], means per episode."""
    groups: dict[tuple[str, str], list[EpisodeRecord]] = {}
    for r in records:
        groups.setdefault((r.policy, str(r.difficulty)), []).append(r)
        groups.setdefault((r.policy, "all"), []).append(r)
    rows = []
    for (policy, diff), rs in groups.items():
        n = len(rs)
        rows.append({
            "policy": policy,
            "difficulty": diff,
            "episodes": n,
            "success_rate": sum(r.success for r in rs) / n,
            "mean_turns": sum(r.turns for r in rs) / n,
            "mean_phone_calls": sum(r.phone_calls for r in rs) / n,
            "auth_before_first_call": sum(r.auth_before_first_call for r in rs) / n,
            "department_order_correct": sum(r.department_order_correct for r in rs) / n,
            "invalid_calls_per_episode": sum(r.invalid_calls for r in rs) / n,
            "forms_per_episode": sum(r.forms for r in rs) / n,
        })
    order = {p: i for i, p in enumerate(dict.fromkeys(r.policy for r in records))}
    rows.sort(key=lambda x: (order[x["policy"]], x["difficulty"] == "all", x["difficulty"]))
    return rows

"""A customer-service GRPO run's task pools: training tasks (curriculum, difficulty mix), validation and
held-out tasks.

Each pool comes from the world's splits or from freshly drawn tasks (registered in the world so the
environment resolves their ids), seeded so that every run on a world sees the same validation tasks.
"""

from __future__ import annotations

import dataclasses
import random
from collections import Counter

from lfo_cli.env.generate import generate_world
from lfo_cli.env.tasks import draw_tasks, fresh_heldout_tasks, fresh_training_tasks, select_companies
from lfo_cli.env.world import DIFFICULTIES, normalize_name, normalize_phone, sub_seed
from lfo_cli.errors import LfoError
from lfo_cli.worlds.tasks import stratified_tasks


def training_tasks(world, data, seed: int) -> list:
    """The RL training tasks: the world's train split, or ``data.fresh_tasks`` newly drawn ones (on
    ``data.companies`` when set; then registered in ``world`` so the environment resolves their ids),
    filtered by difficulty, capped."""
    pool = world.tasks["train"]
    if data.fresh_tasks:
        # New tasks on the training companies: the warm start never saw them, so train reward measures
        # the skill (reading the directory, copying values), not recall of imitated episodes.
        pool = fresh_training_tasks(world, data.fresh_tasks, seed=seed, split="rl",
                                    company_ids=select_companies(world, data.companies))
        world.register_tasks(pool)
    tasks = _mixed(pool, data)
    if not tasks:
        raise LfoError(f"no training tasks at difficulty {data.min_difficulty}..{data.max_difficulty}")
    tasks = tasks[: data.max_tasks] if data.max_tasks else tasks
    if data.fresh_companies:
        tasks = _with_fresh_companies(world, data, seed, tasks)
    return tasks


def _mixed(pool: list, data) -> list:
    tasks = [t for t in pool if data.min_difficulty <= t.difficulty <= data.max_difficulty]
    return weighted_mix(tasks, data.difficulty_weights) if data.difficulty_weights else tasks


FRESH_COMPANIES_SPLIT = "rlcompanies"


def _with_fresh_companies(world, data, seed: int, tasks: list) -> list:
    """``tasks`` plus tasks on ``data.fresh_companies`` companies generated afresh for this run (seeded by the
    run seed; the generator's catalogue and the world's exception rate; none sharing a name or phone number
    with the world's), so that they make ``data.fresh_company_share`` of the result, interleaved in a seeded
    order. Those companies are added to ``world`` (in memory) so the environment can call them; they are
    neither training nor held-out companies, so validation and held-out pools never draw on them."""
    n = round(len(tasks) * data.fresh_company_share / (1 - data.fresh_company_share))
    fresh_seed = sub_seed("rl-companies", world.seed, seed)
    # Generate a few more than asked and keep the first that clash with nothing in the world.
    spare = generate_world(num_companies=2 * data.fresh_companies + 10, num_train_tasks=0, num_val_tasks=0,
                           heldout_fraction=0.0, seed=fresh_seed,
                           exception_rate=world.config.get("exception_rate", 0.3))
    added = []
    for c in spare.companies.values():
        if normalize_name(c.name) in world.name_index or any(normalize_phone(d.phone) in world.phone_index
                                                             for d in c.departments):
            continue
        added.append(dataclasses.replace(c, id=f"rl-{c.id}"))
        if len(added) == data.fresh_companies:
            break
    if len(added) < data.fresh_companies:
        raise LfoError(f"data.fresh_companies: only {len(added)} companies generated apart from the world's names "
                       f"and numbers; ask for fewer")
    world.add_companies(added)
    # Balanced over the five difficulties, so 5n draws hold >= n of each; keep each difficulty's quota of the
    # mix (data.difficulty_weights, or equal shares), in draw order.
    weights = data.difficulty_weights or {d: 1.0 for d in range(data.min_difficulty, data.max_difficulty + 1)}
    quota = {d: round(n * w / sum(weights.values())) for d, w in weights.items()}
    drawn = []
    for t in draw_tasks(world.companies, [c.id for c in added], FRESH_COMPANIES_SPLIT, 5 * n, fresh_seed):
        if quota.get(t.difficulty, 0) > 0:
            quota[t.difficulty] -= 1
            drawn.append(t)
    world.register_tasks(drawn)
    out = tasks + drawn
    random.Random(fresh_seed).shuffle(out)
    return out


def weighted_mix(tasks: list, weights: dict[int, float]) -> list:
    """The largest sub-pool of ``tasks`` whose difficulties are in the proportions ``weights`` (each
    difficulty keeps its first tasks in pool order; the pool's seeded interleaving is kept)."""
    counts = Counter(t.difficulty for t in tasks)
    named = {d: w for d, w in weights.items() if w > 0}
    scale = min(counts.get(d, 0) / w for d, w in named.items())
    keep = {d: int(scale * w + 1e-9) for d, w in named.items()}
    out = []
    for t in tasks:
        if keep.get(t.difficulty, 0) > 0:
            keep[t.difficulty] -= 1
            out.append(t)
    return out


VAL_FRESH_SPLIT = "valfresh"


def validation_pool(world, ev, companies: list[str] | None = None) -> list:
    """The tasks validation draws from: the world's val split, or ``eval.fresh_tasks`` newly drawn ones on
    the training companies (split ``valfresh``, seeded by the world's seed alone: the same for every run
    and training seed on a world, and apart from the ``rl``/``sft`` draws), filtered by difficulty;
    ``companies`` (the study's subset, `data.companies`) restricts both to those companies."""
    pool = world.tasks["val"]
    if ev.fresh_tasks:
        pool = fresh_training_tasks(world, ev.fresh_tasks, seed=world.seed, split=VAL_FRESH_SPLIT, company_ids=companies)
        world.register_tasks(pool)
    elif companies is not None:
        pool = [t for t in pool if t.company_id in set(companies)]
    pool = [t for t in pool if not ev.difficulties or t.difficulty in ev.difficulties]
    if not pool:
        source = f"{ev.fresh_tasks} fresh val tasks" if ev.fresh_tasks else "the val split"
        raise LfoError(f"no validation tasks at difficulty {ev.difficulties} in {source}")
    return pool


HELDOUT_FRESH_SPLIT = "heldoutfresh"


def heldout_pool(world, ev) -> list:
    """``eval.heldout_tasks`` fresh tasks of the held-out companies at ``eval.heldout_difficulties``
    (seeded by the world's seed alone: the same for every run on a world)."""
    if not ev.heldout_tasks:
        return []
    # draw_tasks balances all five difficulties; draw enough that the kept ones number heldout_tasks.
    n = -(-ev.heldout_tasks * len(DIFFICULTIES) // len(ev.heldout_difficulties))
    pool = fresh_heldout_tasks(world, n, seed=world.seed, split=HELDOUT_FRESH_SPLIT)
    world.register_tasks(pool)
    return stratified_tasks([t for t in pool if t.difficulty in ev.heldout_difficulties], ev.heldout_tasks)

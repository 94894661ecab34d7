"""Task drawing: a customer, a goal and a chain of departments per task, difficulties 1..5.

Every draw is keyed by the world's seed, the split and the task id, so a split's tasks never depend on
another's. Besides the world's own splits, fresh tasks can be drawn on the training or the held-out
companies (supervised data, fresh validation) and a study can restrict itself to some companies.
"""

from __future__ import annotations

import random

from lfo_cli.env import catalogue as cat
from lfo_cli.env.world import DIFFICULTIES, SPLITS, Company, Department, Task, TaskStep, WorldData, sub_rng
from lfo_cli.errors import LfoError

_SECURITY_ANSWERS = (
    "blue heron", "maple street", "rusty", "lisbon", "grandma rose", "pepper", "oak hill", "marathon",
    "violin", "captain", "sunflower", "harbor view",
)


def _user_values(rng: random.Random, first: str, last: str) -> dict[str, str]:
    def digits(n: int) -> str:
        return "".join(rng.choice("0123456789") for _ in range(n))

    return {
        "account_number": digits(10),
        "last_4_ssn": digits(4),
        "date_of_birth": f"{rng.randint(1950, 2003)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
        "zip_code": digits(5),
        "pin": digits(4),
        "policy_number": "PN" + digits(8),
        "member_id": "M" + digits(9),
        "card_last_4": digits(4),
        "email": f"{first.lower()}.{last.lower()}{rng.randint(1, 99)}@example.com",
        "phone_on_file": f"555-{digits(3)}-{digits(4)}",
        "order_number": "ORD-" + digits(7),
        "security_answer": rng.choice(_SECURITY_ANSWERS),
    }


_THEN = (", then ", ", and after that ", ", and next ")
_FINALLY = (", and finally ", ", and lastly ")


def _goal(rng: random.Random, company: str, services: list[str]) -> str:
    text = services[0][0].upper() + services[0][1:] + f" at {company}"
    for i, s in enumerate(services[1:], start=1):
        text += (rng.choice(_FINALLY) if i == len(services) - 1 and i >= 2 else rng.choice(_THEN)) + s
    return text + "."


def _fitting_chain(rng: random.Random, draw) -> list[Department]:
    """Redraw a chain until the union of its requirements fits in one form (MAX_FORM_FIELDS)."""
    best = None
    for _ in range(200):
        chain = draw()
        n = len({f for d in chain for f in d.requires})
        if n <= cat.MAX_FORM_FIELDS:
            return chain
        if best is None or n < best[0]:
            best = (n, chain)
    return best[1]  # pragma: no cover - the catalogue makes this unreachable (tests check the bound)


def _make_task(rng: random.Random, task_id: str, split: str, company: Company, difficulty: int) -> Task:
    depts = list(company.departments)
    standard = [d for d in depts if not d.exception]
    exceptions = [d for d in depts if d.exception]
    missing_field: str | None = None
    if difficulty == 1:
        chain = [rng.choice(standard)]
    elif difficulty == 2:
        chain = [rng.choice(exceptions)]
    elif difficulty == 3:
        chain = _fitting_chain(rng, lambda: rng.sample(standard, 2))
    elif difficulty == 4:
        chain = [rng.choice([d for d in standard if d.alternatives])]
        missing_field = rng.choice(sorted(chain[0].alternatives))
    elif difficulty == 5:
        def draw() -> list[Department]:
            e = rng.choice(exceptions)
            c = [e, *rng.sample([d for d in depts if d is not e], 2)]
            rng.shuffle(c)
            return c

        chain = _fitting_chain(rng, draw)
    else:  # pragma: no cover - guarded by callers
        raise ValueError(difficulty)
    specs = {name: s for (ind, name), s in cat.DEPARTMENT_SPECS.items() if ind == company.industry}
    steps = tuple(
        TaskStep(department=d.name, service=rng.choice(specs[d.name].services), requires_reference=i > 0)
        for i, d in enumerate(chain)
    )
    first, last = rng.choice(cat.FIRST_NAMES), rng.choice(cat.LAST_NAMES)
    values = _user_values(rng, first, last)
    relevant = {f for d in chain for f in d.requires}
    relevant |= {f for d in chain for a in d.alternatives.values() for f in a}
    noise_pool = [f for f in cat.FIELDS if f not in relevant]
    unavailable = set(rng.sample(noise_pool, min(len(noise_pool), rng.randint(0, 2))))
    if missing_field is not None:
        unavailable.add(missing_field)
    for f in unavailable:
        values.pop(f)
    return Task(
        task_id=task_id,
        split=split,
        company_id=company.id,
        company_name=company.name,
        industry=company.industry,
        difficulty=difficulty,
        goal=_goal(rng, company.name, [s.service for s in steps]),
        steps=steps,
        user_name=f"{first} {last}",
        user_values=values,
        unavailable=tuple(cat.sort_fields(unavailable)),
    )


def draw_tasks(companies: dict[str, Company], pool: list[str], split: str, n: int, seed: int) -> list[Task]:
    """``n`` tasks named ``{split}-00000``... on companies drawn from ``pool``, difficulties balanced 1..5.

    Every draw is keyed by (seed, split) and the task id, so a split's tasks never depend on another's.
    """
    trng = sub_rng(seed, "tasks", split)
    diffs = [DIFFICULTIES[j % len(DIFFICULTIES)] for j in range(n)]
    trng.shuffle(diffs)
    out = []
    for j, d in enumerate(diffs):
        tid = f"{split}-{j:05d}"
        company = companies[trng.choice(pool)]
        out.append(_make_task(sub_rng(seed, "task", tid), tid, split, company, d))
    return out


def fresh_training_tasks(
    world: WorldData, n: int, seed: int, split: str = "sft", company_ids: list[str] | None = None,
) -> list[Task]:
    """``n`` new tasks on the training companies (never the held-out ones), outside the world's splits.

    For supervised data that must not repeat the RL train tasks or touch val/transfer: new customers,
    services and goals on the same companies. ``split`` must not be one of the world's own splits
    (its ids would collide with theirs). ``company_ids`` restricts the draw to some training companies.
    """
    if split in SPLITS:
        raise LfoError(f"fresh tasks need their own split name, not one of {SPLITS}")
    pool = sorted(world.train_company_ids)
    if company_ids is not None:
        unknown = sorted(set(company_ids) - set(pool))
        if unknown:
            raise LfoError(f"not training companies of this world: {', '.join(unknown[:5])}")
        pool = sorted(set(company_ids))
    return draw_tasks(world.companies, pool, split, n, seed)


def fresh_heldout_tasks(world: WorldData, n: int, seed: int, split: str = "heldoutfresh") -> list[Task]:
    """``n`` new tasks on the held-out companies (the transfer split's companies), outside the world's
    splits: more distinct tasks per difficulty than the transfer split's ``n/5``."""
    if split in SPLITS:
        raise LfoError(f"fresh tasks need their own split name, not one of {SPLITS}")
    if not world.heldout_company_ids:
        raise LfoError("this world has no held-out companies (gen-env --heldout-fraction 0)")
    return draw_tasks(world.companies, sorted(world.heldout_company_ids), split, n, seed)


def select_companies(world: WorldData, spec: int | list[str] | None) -> list[str] | None:
    """Training companies a study restricts itself to: ``None`` = all; a list = those ids (checked); an
    int ``k`` = ``k`` of them drawn with the world's seed alone, so every run on a world gets the same."""
    pool = sorted(world.train_company_ids)
    if spec is None:
        return None
    if isinstance(spec, int):
        if not 1 <= spec <= len(pool):
            raise LfoError(f"data.companies must be in 1..{len(pool)} (this world's training companies), got {spec}")
        return sorted(sub_rng(world.seed, "study-companies").sample(pool, spec))
    unknown = sorted(set(spec) - set(pool))
    if unknown:
        raise LfoError(f"data.companies: not training companies of this world: {', '.join(unknown[:5])}")
    return sorted(set(spec))

"""World generation: companies (industries balanced), their departments and exceptions, the held-out split.

``generate_world`` is a pure function of its config: every random choice comes from a
:func:`~lfo_cli.env.world.sub_rng` keyed by strings, so the same seed gives byte-identical files and a
different seed gives a different world.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from lfo_cli.env import catalogue as cat
from lfo_cli.env.tasks import draw_tasks
from lfo_cli.env.world import Company, Department, WorldData, normalize_name, sub_rng
from lfo_cli.errors import LfoError

MAX_COMPANIES = 5000


@dataclass
class WorldConfig:
    """Knobs of the generator (validated; bad values raise LfoError with an actionable message)."""

    num_companies: int = field(default=100, metadata={"help": "Companies in the world (all industries)."})
    num_train_tasks: int = field(default=500, metadata={"help": "Tasks on training companies."})
    num_val_tasks: int = field(default=100, metadata={"help": "Validation tasks on training companies."})
    num_transfer_tasks: int = field(default=100, metadata={"help": "Tasks on held-out companies only."})
    heldout_fraction: float = field(
        default=0.5, metadata={"help": "Fraction of companies held out (stratified by industry) for transfer."}
    )
    # 0.3: enough exceptions that the industry prior is clearly insufficient (every company has at
    # least one), few enough that it is still the best zero-knowledge guess.
    exception_rate: float = field(
        default=0.3, metadata={"help": "Per-department probability that a company deviates from the prior."}
    )
    seed: int = field(default=0, metadata={"help": "World seed."})

    def __post_init__(self) -> None:
        for name in ("num_companies", "num_train_tasks", "num_val_tasks", "num_transfer_tasks", "seed"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise LfoError(f"--{name.replace('_', '-')} must be a non-negative integer, got {v!r}")
        if not 1 <= self.num_companies <= MAX_COMPANIES:
            raise LfoError(f"--num-companies must be between 1 and {MAX_COMPANIES}, got {self.num_companies}")
        if not 0.0 <= self.heldout_fraction < 1.0:
            raise LfoError(f"--heldout-fraction must be in [0, 1), got {self.heldout_fraction}")
        if not 0.0 < self.exception_rate < 1.0:
            raise LfoError(f"--exception-rate must be in (0, 1), got {self.exception_rate}")
        n_held = _heldout_count(self.num_companies, self.heldout_fraction)
        if self.heldout_fraction > 0 and n_held == 0:
            raise LfoError(
                f"--heldout-fraction {self.heldout_fraction} holds out no company out of {self.num_companies} "
                "(need at least 2 companies): add companies or use --heldout-fraction 0"
            )
        if self.num_transfer_tasks > 0 and n_held == 0:
            raise LfoError(
                "--num-transfer-tasks > 0 needs held-out companies: raise --heldout-fraction "
                f"(now {self.heldout_fraction}) or --num-companies (now {self.num_companies})"
            )
        if self.num_train_tasks + self.num_val_tasks > 0 and n_held >= self.num_companies:
            raise LfoError(
                f"--heldout-fraction {self.heldout_fraction} leaves no training company "
                f"out of {self.num_companies}: lower it or add companies"
            )


def _heldout_count(n: int, frac: float) -> int:
    if frac <= 0:
        return 0
    k = round(n * frac)
    return min(max(k, 1), n - 1) if n > 1 else 0


def _company_names(rng: random.Random, industries: list[str]) -> list[str]:
    used: set[str] = set()
    names = []
    for ind in industries:
        nouns = cat.INDUSTRIES[ind][0]
        for attempt in range(200):
            if attempt < 50:
                name = f"{rng.choice(cat.NAME_WORDS)} {rng.choice(nouns)}"
            else:  # large worlds: two name words
                name = f"{rng.choice(cat.NAME_WORDS)} {rng.choice(cat.NAME_WORDS)} {rng.choice(nouns)}"
            if normalize_name(name) not in used:
                break
        else:  # pragma: no cover - only with absurd world sizes
            name = f"{name} {len(names)}"
        used.add(normalize_name(name))
        names.append(name)
    return names


_AREA_CODES = ("800", "833", "844", "855", "866", "877", "888")


def _phone(rng: random.Random, used: set[str]) -> str:
    while True:
        p = f"{rng.choice(_AREA_CODES)}-{rng.randint(200, 999)}-{rng.randint(0, 9999):04d}"
        if p not in used:
            used.add(p)
            return p


def _exception(rng: random.Random, spec: cat.DepartmentSpec) -> tuple[tuple[str, ...], dict[str, tuple[str, ...]]]:
    """Company-specific requirements: always include one field the prior does not (so the prior fails)."""
    req = list(spec.requires)
    alts = dict(spec.alternatives)
    alt_fields = {f for a in alts.values() for f in a}
    candidates = [f for f in cat.FIELDS if f not in req and f not in alt_fields]
    new = rng.choice(candidates)
    if rng.random() < 0.5 and len(req) >= 2:  # swap one usual field for an unusual one
        dropped = rng.choice(req)
        req.remove(dropped)
        alts.pop(dropped, None)
    req.append(new)
    return tuple(cat.sort_fields(req)), alts


def _make_company(rng: random.Random, cid: str, name: str, industry: str, rate: float, phones: set[str]) -> Company:
    specs = list(cat.INDUSTRIES[industry][1])
    k = rng.randint(4, len(specs))
    chosen = sorted(rng.sample(range(len(specs)), k))
    exc = [rng.random() < rate for _ in chosen]
    # Guarantees that make every difficulty samplable on every company: >= 1 exception, >= 2 standard.
    if not any(exc):
        exc[rng.randrange(k)] = True
    while sum(not e for e in exc) < 2:
        exc[rng.choice([i for i, e in enumerate(exc) if e])] = False
    depts = []
    for i, e in zip(chosen, exc, strict=True):
        spec = specs[i]
        if e:
            req, alts = _exception(rng, spec)
        else:
            req, alts = tuple(cat.sort_fields(spec.requires)), dict(spec.alternatives)
        depts.append(
            Department(
                name=spec.name,
                phone=_phone(rng, phones),
                purpose=spec.purpose,
                requires=req,
                alternatives={f: tuple(cat.sort_fields(a)) for f, a in sorted(alts.items())},
                exception=e,
            )
        )
    return Company(id=cid, name=name, industry=industry, departments=tuple(depts))



def generate_world(
    num_companies: int = 100,
    num_train_tasks: int = 500,
    num_val_tasks: int = 100,
    heldout_fraction: float = 0.5,
    seed: int = 0,
    *,
    num_transfer_tasks: int | None = None,
    exception_rate: float = 0.3,
) -> WorldData:
    """Generate a world; ``num_transfer_tasks`` defaults to ``num_val_tasks`` (0 when nothing is held out)."""
    if num_transfer_tasks is None:
        num_transfer_tasks = num_val_tasks if _heldout_count(num_companies, heldout_fraction) > 0 else 0
    cfg = WorldConfig(
        num_companies=num_companies,
        num_train_tasks=num_train_tasks,
        num_val_tasks=num_val_tasks,
        num_transfer_tasks=num_transfer_tasks,
        heldout_fraction=heldout_fraction,
        exception_rate=exception_rate,
        seed=seed,
    )
    # ---- companies (industries balanced, order shuffled) ----
    rng = sub_rng(seed, "companies")
    industries = [cat.INDUSTRY_NAMES[i % len(cat.INDUSTRY_NAMES)] for i in range(num_companies)]
    rng.shuffle(industries)
    names = _company_names(rng, industries)
    phones: set[str] = set()
    companies: dict[str, Company] = {}
    for i, (ind, name) in enumerate(zip(industries, names, strict=True)):
        cid = f"c{i:04d}"
        companies[cid] = _make_company(sub_rng(seed, "company", cid), cid, name, ind, exception_rate, phones)
    # ---- held-out companies: stratified by industry so transfer covers the same industries ----
    n_held = _heldout_count(num_companies, heldout_fraction)
    hrng = sub_rng(seed, "heldout")
    by_ind: dict[str, list[str]] = {}
    for cid, c in companies.items():
        by_ind.setdefault(c.industry, []).append(cid)
    order: list[str] = []  # round-robin over industries, each industry shuffled
    pools = [hrng.sample(v, len(v)) for _, v in sorted(by_ind.items())]
    hrng.shuffle(pools)
    while any(pools):
        for p in pools:
            if p:
                order.append(p.pop())
    heldout = frozenset(order[:n_held])
    train_ids = sorted(set(companies) - heldout)
    held_ids = sorted(heldout)
    # ---- tasks: difficulties balanced 1..5 per split ----
    tasks = {
        split: draw_tasks(companies, pool, split, n, seed)
        for split, n, pool in (
            ("train", num_train_tasks, train_ids),
            ("val", num_val_tasks, train_ids),
            ("transfer", num_transfer_tasks, held_ids),
        )
    }
    config = {k: getattr(cfg, k) for k in cfg.__dataclass_fields__}
    return WorldData(companies=companies, tasks=tasks, seed=seed, config=config, heldout_company_ids=heldout)

"""The generated world: companies, departments with hidden requirements, users and tasks.

``generate_world`` is a pure function of its config: every random choice comes from a
:func:`sub_rng` keyed by strings (sha256, never Python's salted ``hash``), so the same seed gives
byte-identical files and a different seed gives a different world. ``write_world`` / ``load_world``
round-trip the world through JSONL files plus a manifest with sha256 checksums; anything corrupt,
truncated, missing or edited is reported as an :class:`~lfo_cli.errors.LfoError` naming the file.
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lfo_cli.env import catalogue as cat
from lfo_cli.errors import LfoError

GENERATOR_VERSION = "1.0"
SPLITS: tuple[str, ...] = ("train", "val", "transfer")
TASK_FILES = {"train": "tasks_train.jsonl", "val": "tasks_val.jsonl", "transfer": "tasks_transfer.jsonl"}
COMPANIES_FILE = "companies.jsonl"
MANIFEST_FILE = "manifest.json"
DATA_FILES: tuple[str, ...] = (COMPANIES_FILE, *TASK_FILES.values(), MANIFEST_FILE)
DIFFICULTIES: tuple[int, ...] = (1, 2, 3, 4, 5)
MAX_COMPANIES = 5000


def sub_seed(*keys: Any) -> int:
    """A 64-bit seed derived from ``keys`` with sha256 (stable across processes and platforms)."""
    text = "\x1f".join(str(k) for k in keys)
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def sub_rng(*keys: Any) -> random.Random:
    return random.Random(sub_seed(*keys))


_NON_ALNUM = re.compile(r"[^a-z0-9]+")


def normalize_name(name: str) -> str:
    """Company-name key for lookups: case-, punctuation- and whitespace-insensitive."""
    return " ".join(_NON_ALNUM.sub(" ", name.casefold()).split())


_NON_DIGIT = re.compile(r"\D+")


def normalize_phone(number: str) -> str:
    """Digits only, with a leading US country code '1' dropped (so '+1 (800) 555-0100' works)."""
    digits = _NON_DIGIT.sub("", number)
    if len(digits) == 11 and digits[0] == "1":
        digits = digits[1:]
    return digits


# ---------------------------------------------------------------------------------------------
# data classes
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Department:
    """One department of one company. ``requires`` and ``alternatives`` are hidden from the agent."""

    name: str
    phone: str
    purpose: str
    requires: tuple[str, ...]  # identity fields the rep verifies (canonical order)
    alternatives: dict[str, tuple[str, ...]]  # field -> fields accepted instead of it
    exception: bool  # True when requirements differ from the industry prior

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "phone": self.phone,
            "purpose": self.purpose,
            "requires": list(self.requires),
            "alternatives": {k: list(v) for k, v in self.alternatives.items()},
            "exception": self.exception,
        }


@dataclass(frozen=True)
class Company:
    id: str
    name: str
    industry: str
    departments: tuple[Department, ...]

    def department(self, name: str) -> Department:
        for d in self.departments:
            if d.name == name:
                return d
        raise KeyError(name)

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "name": self.name,
            "industry": self.industry,
            "departments": [d.to_dict() for d in self.departments],
        }


@dataclass(frozen=True)
class TaskStep:
    department: str
    service: str  # the goal phrase this step serves
    requires_reference: bool  # needs the reference code issued by the previous step


@dataclass(frozen=True)
class Task:
    task_id: str
    split: str
    company_id: str
    company_name: str
    industry: str
    difficulty: int
    goal: str
    steps: tuple[TaskStep, ...]
    user_name: str
    user_values: dict[str, str]  # values of the fields the user has
    unavailable: tuple[str, ...]  # fields the user cannot provide

    def to_dict(self) -> dict:
        return {
            "task_id": self.task_id,
            "split": self.split,
            "company_id": self.company_id,
            "company_name": self.company_name,
            "industry": self.industry,
            "difficulty": self.difficulty,
            "goal": self.goal,
            "steps": [asdict(s) for s in self.steps],
            "user": {"name": self.user_name, "values": dict(self.user_values)},
            "unavailable": list(self.unavailable),
        }

    def prompt(self) -> str:
        """The task prompt an agent sees: the goal and the customer's name, never requirements."""
        return f"{self.goal} You are acting for the customer, {self.user_name}."


@dataclass
class WorldData:
    """Companies by id, tasks by split and by id, plus the lookups the environment needs."""

    companies: dict[str, Company]
    tasks: dict[str, list[Task]]
    seed: int
    config: dict = field(default_factory=dict)
    heldout_company_ids: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        for split in SPLITS:
            self.tasks.setdefault(split, [])
        self.task_by_id: dict[str, Task] = {}
        for split in SPLITS:
            for t in self.tasks[split]:
                self.task_by_id[t.task_id] = t
        self.phone_index: dict[str, tuple[Company, Department]] = {}
        self.name_index: dict[str, Company] = {}
        for c in self.companies.values():
            self.name_index[normalize_name(c.name)] = c
            for d in c.departments:
                self.phone_index[normalize_phone(d.phone)] = (c, d)

    def task(self, task_id: str) -> Task:
        try:
            return self.task_by_id[task_id]
        except KeyError:
            raise LfoError(f"unknown task id {task_id!r}") from None

    def register_tasks(self, tasks: list[Task]) -> None:
        """Make tasks outside the world's splits (e.g. `fresh_training_tasks`) resolvable by `task()`.

        In memory only: the splits, and what `save_world` writes, are unchanged.
        """
        clash = sorted(t.task_id for t in tasks if t.task_id in self.task_by_id)
        if clash:
            raise LfoError(f"task ids already in the world: {', '.join(clash[:3])}")
        for t in tasks:
            if t.company_id not in self.companies:
                raise LfoError(f"task {t.task_id}: unknown company {t.company_id!r}")
            self.task_by_id[t.task_id] = t

    def all_tasks(self) -> list[Task]:
        return [t for s in SPLITS for t in self.tasks[s]]

    @property
    def train_company_ids(self) -> frozenset[str]:
        return frozenset(self.companies) - self.heldout_company_ids


# ---------------------------------------------------------------------------------------------
# generation
# ---------------------------------------------------------------------------------------------
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


# ---------------------------------------------------------------------------------------------
# files
# ---------------------------------------------------------------------------------------------
def write_world(world: WorldData, out_dir: str | Path, force: bool = False) -> dict:
    """Write companies/tasks JSONL and the manifest (last), each atomically. Returns the manifest."""
    from lfo_cli.io import atomic_write_json, atomic_write_text, dumps_canonical, sha256_file

    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise LfoError(f"{out}: exists and is not a directory")
    existing = [n for n in DATA_FILES if (out / n).exists()]
    if existing and not force:
        raise LfoError(f"{out / existing[0]} already exists; pass --force to overwrite")
    out.mkdir(parents=True, exist_ok=True)
    held = world.heldout_company_ids
    company_rows = [{**c.to_dict(), "heldout": c.id in held} for c in world.companies.values()]
    files = {COMPANIES_FILE: company_rows}
    for split, name in TASK_FILES.items():
        files[name] = [t.to_dict() for t in world.tasks[split]]
    manifest_files = {}
    for name, rows in files.items():
        atomic_write_text(out / name, "".join(dumps_canonical(r) + "\n" for r in rows))
        manifest_files[name] = {"rows": len(rows), "sha256": sha256_file(out / name)}
    manifest = {
        "generator": "lfo_cli.env",
        "generator_version": GENERATOR_VERSION,
        "seed": world.seed,
        "config": world.config,
        "counts": {
            "companies": len(world.companies),
            "heldout_companies": len(held),
            **{f"tasks_{s}": len(world.tasks[s]) for s in SPLITS},
        },
        "files": manifest_files,
    }
    atomic_write_json(out / MANIFEST_FILE, manifest)
    return manifest


def _req(row: dict, key: str, typ, where: str):
    if key not in row:
        raise LfoError(f"{where}: missing key {key!r}")
    v = row[key]
    if typ is int and isinstance(v, bool) or not isinstance(v, typ):
        raise LfoError(f"{where}: key {key!r} has the wrong type ({type(v).__name__})")
    return v


def _str_list(v: Any, where: str, key: str) -> tuple[str, ...]:
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise LfoError(f"{where}: key {key!r} must be a list of strings")
    return tuple(v)


def _company_from_row(row: dict, where: str) -> tuple[Company, bool]:
    depts = []
    for i, d in enumerate(_req(row, "departments", list, where)):
        w = f"{where} department {i}"
        if not isinstance(d, dict):
            raise LfoError(f"{w}: expected an object")
        alts_raw = _req(d, "alternatives", dict, w)
        requires = _str_list(_req(d, "requires", list, w), w, "requires")
        bad = [f for f in requires if f not in cat.FIELD_SET]
        if bad:
            raise LfoError(f"{w}: unknown field {bad[0]!r}")
        depts.append(
            Department(
                name=_req(d, "name", str, w),
                phone=_req(d, "phone", str, w),
                purpose=_req(d, "purpose", str, w),
                requires=requires,
                alternatives={k: _str_list(v, w, "alternatives") for k, v in alts_raw.items()},
                exception=_req(d, "exception", bool, w),
            )
        )
    if not depts:
        raise LfoError(f"{where}: company has no departments")
    c = Company(
        id=_req(row, "id", str, where),
        name=_req(row, "name", str, where),
        industry=_req(row, "industry", str, where),
        departments=tuple(depts),
    )
    if c.industry not in cat.INDUSTRIES:
        raise LfoError(f"{where}: unknown industry {c.industry!r}")
    return c, bool(row.get("heldout", False))


def _task_from_row(row: dict, where: str, split: str, companies: dict[str, Company]) -> Task:
    steps_raw = _req(row, "steps", list, where)
    steps = []
    for s in steps_raw:
        if not isinstance(s, dict):
            raise LfoError(f"{where}: each step must be an object")
        steps.append(
            TaskStep(
                department=_req(s, "department", str, where),
                service=_req(s, "service", str, where),
                requires_reference=_req(s, "requires_reference", bool, where),
            )
        )
    user = _req(row, "user", dict, where)
    values = _req(user, "values", dict, where)
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in values.items()):
        raise LfoError(f"{where}: user values must map field names to strings")
    t = Task(
        task_id=_req(row, "task_id", str, where),
        split=_req(row, "split", str, where),
        company_id=_req(row, "company_id", str, where),
        company_name=_req(row, "company_name", str, where),
        industry=_req(row, "industry", str, where),
        difficulty=_req(row, "difficulty", int, where),
        goal=_req(row, "goal", str, where),
        steps=tuple(steps),
        user_name=_req(user, "name", str, where),
        user_values=dict(values),
        unavailable=_str_list(_req(row, "unavailable", list, where), where, "unavailable"),
    )
    if t.split != split:
        raise LfoError(f"{where}: task {t.task_id} says split {t.split!r} but is in the {split} file")
    if t.company_id not in companies:
        raise LfoError(f"{where}: task {t.task_id} refers to unknown company {t.company_id!r}")
    if t.difficulty not in DIFFICULTIES or not steps:
        raise LfoError(f"{where}: task {t.task_id} has an invalid difficulty or no steps")
    company = companies[t.company_id]
    for s in steps:
        try:
            company.department(s.department)
        except KeyError:
            raise LfoError(f"{where}: task {t.task_id} uses department {s.department!r} "
                           f"that {company.name} does not have") from None
    return t


def load_world(data_dir: str | Path) -> WorldData:
    """Load and validate a world written by :func:`write_world` (checksums, schema, references)."""
    from lfo_cli.io import iter_jsonl, read_json, sha256_file

    d = Path(data_dir)
    if not d.is_dir():
        raise LfoError(f"{d}: data directory not found (run `lfo gen-env --output-dir {d}` first)")
    manifest_path = d / MANIFEST_FILE
    manifest = read_json(manifest_path)
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        raise LfoError(f"{manifest_path}: not an lfo world manifest (no 'files' table)")
    if manifest.get("generator_version") != GENERATOR_VERSION:
        raise LfoError(
            f"{manifest_path}: generator version {manifest.get('generator_version')!r} is not "
            f"{GENERATOR_VERSION!r}; regenerate with `lfo gen-env --force`"
        )
    for name in (COMPANIES_FILE, *TASK_FILES.values()):
        path = d / name
        if not path.is_file():
            raise LfoError(f"{path}: file not found")
        entry = manifest["files"].get(name)
        if not isinstance(entry, dict) or "sha256" not in entry:
            raise LfoError(f"{manifest_path}: no checksum for {name}")
    companies: dict[str, Company] = {}
    heldout = set()
    path = d / COMPANIES_FILE
    for i, row in enumerate(iter_jsonl(path), start=1):
        c, held = _company_from_row(row, f"{path}:{i}")
        if c.id in companies:
            raise LfoError(f"{path}:{i}: duplicate company id {c.id!r}")
        companies[c.id] = c
        if held:
            heldout.add(c.id)

    def verify(path: Path) -> None:
        # After parsing: a parse error names the line; a clean parse of edited or line-truncated data fails here.
        if sha256_file(path) != manifest["files"][path.name]["sha256"]:
            raise LfoError(f"{path}: checksum mismatch with {MANIFEST_FILE} (file modified or truncated)")

    verify(d / COMPANIES_FILE)
    tasks: dict[str, list[Task]] = {}
    for split, name in TASK_FILES.items():
        path = d / name
        tasks[split] = [_task_from_row(r, f"{path}:{i}", split, companies) for i, r in enumerate(iter_jsonl(path), 1)]
        verify(path)
    seed = manifest.get("seed")
    world = WorldData(
        companies=companies,
        tasks=tasks,
        seed=seed if isinstance(seed, int) else 0,
        config=manifest.get("config") if isinstance(manifest.get("config"), dict) else {},
        heldout_company_ids=frozenset(heldout),
    )
    if len(world.task_by_id) != sum(len(v) for v in tasks.values()):
        raise LfoError(f"{d}: duplicate task ids across task files")
    if len(world.phone_index) != sum(len(c.departments) for c in companies.values()):
        raise LfoError(f"{d / COMPANIES_FILE}: phone numbers are not unique")
    return world

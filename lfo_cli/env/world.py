"""The world's data model: companies, departments with hidden requirements, users and tasks.

:class:`WorldData` holds companies by id and tasks by split, plus the lookups the environment needs
(by task id, by phone number, by normalised company name). Random choices anywhere in the environment
come from :func:`sub_rng` keyed by strings (sha256, never Python's salted ``hash``). A world is made by
:mod:`lfo_cli.env.generate`, its tasks by :mod:`lfo_cli.env.tasks`, and it is written and read by
:mod:`lfo_cli.env.world_files`.
"""

from __future__ import annotations

import random
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from lfo_cli.errors import LfoError
from lfo_cli.worlds.tasks import sub_seed

SPLITS: tuple[str, ...] = ("train", "val", "transfer")
DIFFICULTIES: tuple[int, ...] = (1, 2, 3, 4, 5)


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
    # Companies added for one run (`add_companies`: RL tasks on companies generated afresh), in memory only:
    # neither training nor held-out companies of the world, so no validation or held-out pool draws on them.
    added_company_ids: frozenset[str] = frozenset()

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
        # Lookups other modules derive from the companies (lfo_cli.env.directory's directories and close names),
        # kept per world since every episode asks the same; emptied whenever companies are added.
        self.derived: dict[str, dict] = {}

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

    def add_companies(self, companies: list[Company]) -> None:
        """Make companies generated apart from the world callable and searchable (their tasks then go through
        `register_tasks`). In memory only, like registered tasks; refused when an id, a name or a phone number
        is already the world's, since the agent finds a company by name and a department by number."""
        for c in companies:
            if c.id in self.companies:
                raise LfoError(f"company id already in the world: {c.id}")
            if normalize_name(c.name) in self.name_index:
                raise LfoError(f"company name already in the world: {c.name}")
            taken = [d.phone for d in c.departments if normalize_phone(d.phone) in self.phone_index]
            if taken:
                raise LfoError(f"phone number already in the world: {taken[0]} ({c.name})")
            self.companies[c.id] = c
            self.name_index[normalize_name(c.name)] = c
            for d in c.departments:
                self.phone_index[normalize_phone(d.phone)] = (c, d)
        self.added_company_ids = self.added_company_ids | {c.id for c in companies}
        self.derived.clear()

    def copy(self) -> WorldData:
        """A world with the same companies and tasks whose additions (`add_companies`, `register_tasks`) leave
        this one as it is."""
        out = WorldData(companies=dict(self.companies), tasks={s: list(ts) for s, ts in self.tasks.items()},
                        seed=self.seed, config=dict(self.config), heldout_company_ids=self.heldout_company_ids,
                        added_company_ids=self.added_company_ids)
        out.task_by_id.update(self.task_by_id)
        return out

    @property
    def train_company_ids(self) -> frozenset[str]:
        return frozenset(self.companies) - self.heldout_company_ids - self.added_company_ids

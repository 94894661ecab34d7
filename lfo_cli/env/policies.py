"""Reference policies (no torch): ``oracle``, ``probe``, ``prior`` and ``random``; ``run_episode``.

* ``oracle`` reads the hidden world (requirements, alternatives, the user's missing fields): search,
  one form with exactly what is needed, then each call in order carrying reference codes.
* ``probe`` knows nothing hidden: search, call every department the goal needs with an empty
  ``auth_info`` to hear what it requires (and the alternative routes), submit ONE form with the
  union, then call in order. This is the strategy an agent can learn from observations alone.
* ``prior`` knows only the industry x department prior (:mod:`lfo_cli.env.catalogue`) and reacts to
  rep feedback: search, one form with the prior's fields, call in order, follow routing pointers.
  It fails where the company deviates from the prior or the user lacks a field (no second form).
* ``random`` makes uniformly random tool calls with plausible arguments (real company names and
  phone numbers from the public directory, real field names, values from its own form if any).

Policies are step-by-step (``begin`` then ``act(observation) -> Action | None``) so callers can
inject noise (:mod:`lfo_cli.env.noise`: epsilon-random actions, form-field dropout) or inspect each
decision. Non-oracle policies receive only a :class:`PublicTask` (goal, company and customer name).
"""

from __future__ import annotations

import json
import random
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

from lfo_cli.env import catalogue as cat
from lfo_cli.env.replies import parse_directory, parse_reply
from lfo_cli.env.tool_calls import TOOLS
from lfo_cli.env.world import Task, WorldData


@dataclass(frozen=True)
class Action:
    tool: str
    args: dict

    def as_dict(self) -> dict:
        return {"tool": self.tool, "args": self.args}


@dataclass(frozen=True)
class PublicTask:
    """What an agent without hidden knowledge knows: the prompt's content."""

    task_id: str
    goal: str
    company_name: str
    user_name: str

    @classmethod
    def of(cls, task: Task) -> PublicTask:
        return cls(task.task_id, task.goal, task.company_name, task.user_name)


def departments_for_goal(goal: str, industry: str) -> list[str]:
    """Departments whose catalogue services appear in ``goal``, in the order they appear."""
    text = goal.casefold()
    hits = []
    for service, dept in cat.SERVICE_TO_DEPARTMENT.get(industry, {}).items():
        i = text.find(service.casefold())
        if i >= 0:
            hits.append((i, dept))
    out = []
    for _, d in sorted(hits):
        if d not in out:
            out.append(d)
    return out


def _industry_of(directory_obs: str) -> str | None:
    head = directory_obs.split("\n", 1)[0]
    if "(" in head and head.endswith("):"):
        return head[head.rfind("(") + 1: -2]
    return None


def _form_values(obs: str) -> dict[str, str]:
    try:
        obj = json.loads(obs)
    except (json.JSONDecodeError, ValueError):
        return {}
    if not isinstance(obj, dict):
        return {}
    return {k: v for k, v in obj.items() if k in cat.FIELD_SET and isinstance(v, str)}


class Policy:
    """Base class: ``begin`` once per episode, then ``act`` with the latest observation."""

    name = "policy"
    uses_hidden_knowledge = False

    def __init__(self, world: WorldData) -> None:
        self.world = world
        self._gen: Generator[Action, str | None, None] | None = None

    def begin(self, task: Task | PublicTask, rng: random.Random) -> None:
        self.rng = rng
        self.task = task
        self._gen = self._plan()
        self._started = False

    def act(self, observation: str | None) -> Action | None:
        """The next action given the observation of the previous one (None before the first)."""
        try:
            if not self._started:
                self._started = True
                return next(self._gen)
            return self._gen.send(observation)
        except StopIteration:
            return None

    def _plan(self) -> Generator[Action, str | None, None]:  # pragma: no cover - abstract
        raise NotImplementedError
        yield


class OraclePolicy(Policy):
    name = "oracle"
    uses_hidden_knowledge = True

    def _plan(self):
        task: Task = self.task
        company = self.world.companies[task.company_id]
        chain = [company.department(s.department) for s in task.steps]
        per_dept: list[list[str]] = []
        for d in chain:
            need = []
            for f in d.requires:
                need += [f] if f in task.user_values else list(d.alternatives.get(f, (f,)))
            per_dept.append(need)
        yield Action("search_company", {"company_name": task.company_name})
        wanted = cat.sort_fields({f for need in per_dept for f in need})
        values = _form_values((yield Action("auth_info_form", {"fields": wanted})))
        ref = None
        for d, step, need in zip(chain, task.steps, per_dept, strict=True):
            auth = {f: values[f] for f in need if f in values}
            if step.requires_reference and ref:
                auth[cat.REFERENCE_KEY] = ref
            p = parse_reply((yield Action("make_phone_call", {"phone_number": d.phone, "auth_info": auth})))
            ref = p.reference_codes[0] if p.category == "success" and p.reference_codes else None


class _FeedbackPolicy(Policy):
    """Shared tail of ``prior`` and ``probe``: call in goal order, follow routing pointers."""

    def _form_fields(self, depts: list[str], industry: str, phones: dict[str, str]):
        raise NotImplementedError  # generator in subclasses

    def _plan(self):
        task: PublicTask = self.task
        obs = yield Action("search_company", {"company_name": task.company_name})
        phones = parse_directory(obs)
        industry = _industry_of(obs) or ""
        depts = [d for d in departments_for_goal(task.goal, industry) if d in phones]
        if not depts:
            return
        fields = yield from self._form_fields(depts, industry, phones)
        if not fields:
            return
        values = _form_values((yield Action("auth_info_form", {"fields": list(fields)})))
        queue = list(depts)
        ref = None
        failures = 0
        while queue and failures < 3:
            dept = queue[0]
            auth: dict[str, Any] = dict(values)
            if ref:
                auth[cat.REFERENCE_KEY] = ref
            p = parse_reply((yield Action("make_phone_call", {"phone_number": phones[dept], "auth_info": auth})))
            if p.category == "success":
                queue.pop(0)
                ref = p.reference_codes[0] if p.reference_codes else ref
            elif p.category == "routing_violation" and p.departments and p.departments[0] in phones:
                target = p.departments[0]
                if target in queue:
                    queue.remove(target)
                queue.insert(0, target)
                failures += 1
            else:  # auth failure: no second form can fix it
                return


def _fill(required: list[str], optional: list[str]) -> list[str]:
    """Required fields first, then optional ones while the form has room (MAX_FORM_FIELDS)."""
    out: list[str] = []
    for f in (*required, *optional):
        if f not in out and len(out) < cat.MAX_FORM_FIELDS:
            out.append(f)
    return out


class PriorPolicy(_FeedbackPolicy):
    name = "prior"

    def _form_fields(self, depts, industry, phones):
        fields: list[str] = []
        for d in depts:
            spec = cat.DEPARTMENT_SPECS.get((industry, d))
            if spec is not None:
                fields += spec.requires
        return _fill(fields, [])
        yield  # a generator that asks nothing


class ProbePolicy(_FeedbackPolicy):
    name = "probe"

    def _form_fields(self, depts, industry, phones):
        required: list[str] = []
        alternatives: list[str] = []
        for d in depts:
            p = parse_reply((yield Action("make_phone_call", {"phone_number": phones[d], "auth_info": {}})))
            if p.category == "auth_failure":
                required += cat.sort_fields(p.fields - {cat.REFERENCE_KEY})
                alternatives += cat.sort_fields(p.alternatives)
        # alternatives only matter when the user lacks a field; they get the room that is left
        return _fill(required, alternatives)


class RandomPolicy(Policy):
    name = "random"

    def __init__(self, world: WorldData) -> None:
        super().__init__(world)
        self.company_names = sorted(c.name for c in world.companies.values())
        self.phone_numbers = sorted(d.phone for c in world.companies.values() for d in c.departments)

    def random_action(self, rng: random.Random, values: dict[str, str] | None = None) -> Action:
        tool = rng.choice(TOOLS)
        if tool == "search_company":
            name = rng.choice(self.company_names) if rng.random() < 0.8 else " ".join(rng.sample(cat.NAME_WORDS, 2))
            return Action(tool, {"company_name": name})
        if tool == "auth_info_form":
            fields = rng.sample(cat.FIELDS, rng.randint(1, 4))
            if rng.random() < 0.2:
                fields.append(rng.choice(("ssn", "password", "mothers_maiden_name")))
            return Action(tool, {"fields": fields})
        if rng.random() < 0.8:
            phone = rng.choice(self.phone_numbers)
        else:
            phone = f"{rng.randint(200, 999)}-{rng.randint(200, 999)}-{rng.randint(0, 9999):04d}"
        pool = list((values or {}).items())
        if pool:
            auth = dict(rng.sample(pool, rng.randint(0, len(pool))))
        else:
            auth = {f: str(rng.randint(0, 9999)) for f in rng.sample(cat.FIELDS, rng.randint(0, 3))}
        return Action(tool, {"phone_number": phone, "auth_info": auth})

    def _plan(self):
        values: dict[str, str] = {}
        while True:
            action = self.random_action(self.rng, values)
            obs = yield action
            if action.tool == "auth_info_form" and not values:
                values = _form_values(obs or "")


POLICIES: dict[str, type[Policy]] = {
    "oracle": OraclePolicy, "probe": ProbePolicy, "prior": PriorPolicy, "random": RandomPolicy,
}
REFERENCE_POLICIES: tuple[str, ...] = ("oracle", "probe", "prior", "random")

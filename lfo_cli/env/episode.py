"""One customer-service episode: the plain Python API (``reset``/``step``) and its transition log.

``Episode.step(tool_name, args)`` never raises: unknown tools, missing or extra arguments, wrong
types, huge strings, ``None`` and nested garbage all come back as a ``bad_request`` observation
(and count as a turn). The rep checks a phone call in this order::

    1. arguments valid?                    else bad_request
    2. number exists?                      else unknown_number
    3. number belongs to the task company? else routing_violation (wrong_company)
    4. identity fields verified?           else auth_failure (names the missing fields, the
                                                alternative route for each, and the reference
                                                code this step will need)
    5. department is the next task step?   else routing_violation (wrong_department /
                                                out_of_order / already_done), pointing to the
                                                next required department and its number
    6. reference code from the previous step present (chains)?  else auth_failure
    7. success: a fresh reference code; the step is complete.

Verification before routing makes probing informative (an empty-auth call to any department tells
you what it needs, including "bring the reference code from X"), while calling a later department
with valid credentials out of order is still a routing violation that does not count.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lfo_cli.env.catalogue import FIELD_SET, MAX_FORM_FIELDS, REFERENCE_KEY, sort_fields
from lfo_cli.env.directory import directory, not_found
from lfo_cli.env.replies import ReplyWriter
from lfo_cli.env.tool_calls import InvalidCall, json_safe, render_action, short_repr, validate_call
from lfo_cli.env.world import Company, Department, Task, WorldData, normalize_name, normalize_phone, sub_seed

MAX_TURNS = 16
# Values a caller may use to say "I don't have it" (treated as not provided).
UNAVAILABLE_MARKERS = frozenset({"", "unavailable", "n/a", "na", "none", "unknown", "not available", "null"})
REFERENCE_ALIASES = frozenset({REFERENCE_KEY, "reference", "ref", "ref_code", "reference_number", "reference_id"})
_SUMMARY_CHARS = 300


def normalize_field(name: str) -> str:
    return name.strip().casefold().replace(" ", "_").replace("-", "_")


def _norm_value(v: str) -> str:
    return v.strip().casefold().replace(" ", "").replace("-", "")


@dataclass(frozen=True, slots=True)
class StateSummary:
    """What the world model conditions on: the design's ``<|state|>`` block, before the action."""

    task: str
    step: int  # 1-based index of the action about to be taken
    previous: tuple[str, ...]  # 'tool(args): observation summary' per earlier action
    collected_auth: dict[str, str]  # values returned by the form so far

    def to_dict(self) -> dict:
        return {"task": self.task, "step": self.step, "previous": list(self.previous),
                "collected_auth": dict(self.collected_auth)}

    @classmethod
    def from_dict(cls, d: Mapping) -> StateSummary:
        return cls(task=d["task"], step=int(d["step"]), previous=tuple(d["previous"]),
                   collected_auth=dict(d["collected_auth"]))


@dataclass(frozen=True, slots=True)
class Transition:
    step: int
    state: StateSummary
    action: dict  # {"tool": str, "args": JSON-safe arguments}
    observation: str
    category: str

    def to_dict(self) -> dict:
        return {"step": self.step, "state": self.state.to_dict(), "action": self.action,
                "observation": self.observation, "category": self.category}

    @classmethod
    def from_dict(cls, d: Mapping) -> Transition:
        return cls(step=int(d["step"]), state=StateSummary.from_dict(d["state"]), action=dict(d["action"]),
                   observation=d["observation"], category=d["category"])


SHAPING = ("progress_shaping", "field_credit", "probe_bonus")
# Where an episode's first make_phone_call went (``info()["first_call"]``; None: no call): the department of the
# task's first step, another department of the task's company, another company, a 10-digit number in no
# directory, or not a phone number at all. Separates choosing the department from copying its number.
FIRST_CALL_OUTCOMES = ("right_department", "other_department", "other_company", "unknown_number", "invalid_number")


def check_shaping(error: type[Exception] = ValueError, prefix: str = "", **values: float) -> None:
    """Reward-shaping coefficients must lie in [0, 1), and so must their sum: a failed episode never earns a
    success's 1."""
    for name, value in values.items():
        if not 0.0 <= value < 1.0:
            raise error(f"{prefix}{name} must be in [0, 1) (a success earns 1), got {value}")
    if sum(values.values()) >= 1.0:
        raise error(f"{prefix}{' + '.join(values)} must add up to less than 1 (a success earns 1), "
                    f"got {sum(values.values()):g}")


class Episode:
    """The environment for one task at a time. ``reset`` then ``step`` until ``done``."""

    def __init__(self, world: WorldData, *, max_turns: int = MAX_TURNS, progress_shaping: float = 0.0,
                 field_credit: float = 0.0, probe_bonus: float = 0.0) -> None:
        if max_turns < 1:
            raise ValueError("max_turns must be >= 1")
        check_shaping(progress_shaping=progress_shaping, field_credit=field_credit, probe_bonus=probe_bonus)
        self.world = world
        self.max_turns = max_turns
        # Reward for partial progress (completed steps / total) when the task fails; 0 = binary reward.
        self.progress_shaping = progress_shaping
        # Reward for the share of the current step's required auth fields a call got right (best call),
        # per step, when the task fails; 0 = off. Denser than progress_shaping: it separates a call with
        # one mis-copied value from one with none right, which difficulty-1 tasks otherwise cannot.
        self.field_credit = field_credit
        # A failed episode that probed before its form (a call with no identity field, answered by naming
        # what the department needs) earns this: the reading study's positive control; 0 = off.
        self.probe_bonus = probe_bonus
        self.task: Task | None = None
        self.transitions: list[Transition] = []
        self._writer = ReplyWriter(random.Random(0))
        self.rollout_seed = 0

    # ---- lifecycle ----
    def reset(self, task: Task | str, rollout_seed: int = 0) -> str:
        if isinstance(task, str):
            task = self.world.task(task)
        self.task = task
        self.rollout_seed = rollout_seed
        self.company: Company = self.world.companies[task.company_id]
        self._chain: list[Department] = [self.company.department(s.department) for s in task.steps]
        self._step_index = {d.name: i for i, d in enumerate(self._chain)}
        self._user_norm = {f: _norm_value(v) for f, v in task.user_values.items()}
        self._writer = ReplyWriter(random.Random(sub_seed("episode", task.task_id, rollout_seed)))
        self.transitions = []
        self._previous: list[str] = []
        self.collected: dict[str, str] = {}
        self.completed = 0
        self.step_fields_right = 0.0  # best share of the current step's required fields right in one call
        self.references: list[str] = []
        self.turns = 0
        self.forms_submitted = 0
        self.phone_calls = 0
        self.invalid_calls = 0
        self.calls_after_done = 0
        self.order_violations = 0
        self.internal_errors = 0
        self.success = False
        self._form_turn: int | None = None
        self.form_fields: tuple[str, ...] = ()  # the known fields the one form asked for (canonical order)
        self._first_call_turn: int | None = None
        self.first_call: str | None = None  # where the first phone call went: one of FIRST_CALL_OUTCOMES
        self.category_counts: dict[str, int] = {}
        # Reading a reply: calls with no identity field that the rep answered by naming what it needs
        # (the `probe` policy's move), the fields such replies named, and whether the form held them all.
        self.probe_calls = 0
        self.probed_before_form = False
        self.named_fields: list[str] = []
        self.form_holds_named: bool | None = None  # None: no form, or nothing named before it
        return task.prompt()

    @property
    def done(self) -> bool:
        return self.task is not None and (self.success or self.turns >= self.max_turns)

    def reward(self) -> float:
        if self.task is None:
            return 0.0
        if self.success:
            return 1.0
        steps = len(self._chain)
        return ((self.progress_shaping * self.completed + self.field_credit * self.step_fields_right) / steps
                + self.probe_bonus * self.probed_before_form)

    def info(self) -> dict:
        if self.task is None:
            return {}
        return {
            "task_id": self.task.task_id,
            "difficulty": self.task.difficulty,
            "success": self.success,
            "reward": self.reward(),
            "turns": self.turns,
            "calls_made": self.turns,
            "phone_calls": self.phone_calls,
            "forms_submitted": self.forms_submitted,
            "form_fields": list(self.form_fields),
            "auth_before_first_call": self._form_turn is not None
            and (self._first_call_turn is None or self._form_turn < self._first_call_turn),
            "department_order_correct": self.order_violations == 0,
            "first_call": self.first_call,
            "departments": [d.name for d in self._chain],  # the task's chain, in order (d1/d2: one department)
            "order_violations": self.order_violations,
            "invalid_tool_calls": self.invalid_calls,
            "calls_after_done": self.calls_after_done,
            "steps_completed": self.completed,
            "steps_total": len(self._chain),
            "categories": dict(self.category_counts),
            "probe_calls": self.probe_calls,
            "probed_before_form": self.probed_before_form,
            "form_holds_named": self.form_holds_named,
            "internal_errors": self.internal_errors,
        }

    # ---- the one entry point ----
    def step(self, tool_name: Any, args: Any = None) -> str:
        """Run one tool call; returns the observation text. Never raises."""
        if self.task is None:
            return self._writer.bad_request("no active episode; call reset() first")
        if self.done:
            self.calls_after_done += 1
            if self.success:
                return self._writer.bad_request("the task is already complete; no further calls are needed")
            return self._writer.bad_request(f"turn limit reached ({self.max_turns} tool calls); the episode is over")
        state = StateSummary(self.task.goal, self.turns + 1, tuple(self._previous), dict(self.collected))
        self.turns += 1
        summary = None
        try:
            tool, clean = validate_call(tool_name, args)
            if tool == "search_company":
                obs, category, summary = self._search(clean["company_name"])
            elif tool == "auth_info_form":
                obs, category = self._form(clean["fields"])
            else:
                obs, category = self._call(clean["phone_number"], clean["auth_info"])
        except InvalidCall as exc:
            obs, category = self._writer.bad_request(str(exc)), "bad_request"
        except Exception as exc:  # noqa: BLE001 - contract: never raise; counted so tests catch env bugs
            self.internal_errors += 1
            obs, category = self._writer.bad_request(f"internal error ({type(exc).__name__})"), "bad_request"
        if category == "bad_request":
            self.invalid_calls += 1
        self.category_counts[category] = self.category_counts.get(category, 0) + 1
        tool_repr = tool_name if isinstance(tool_name, str) and len(tool_name) <= 64 else short_repr(tool_name)
        safe_args = json_safe(args)
        action = {"tool": tool_repr, "args": safe_args}
        self.transitions.append(Transition(state.step, state, action, obs, category))
        if summary is None:
            summary = obs.replace("\n", " ")
            if len(summary) > _SUMMARY_CHARS:
                summary = summary[:_SUMMARY_CHARS] + "..."
        self._previous.append(f"{render_action(tool_repr, safe_args)}: {summary}")
        return obs

    # ---- tools ----
    def _search(self, name: str) -> tuple[str, str, str]:
        key = normalize_name(name)
        company = self.world.name_index.get(key)
        if company is not None:
            text, summary = directory(self.world, company)
            return text, "directory", summary
        text = not_found(self.world, name, key)
        return text, "not_found", text

    def _form(self, fields: list[str]) -> tuple[str, str]:
        if self.forms_submitted:
            raise InvalidCall("auth_info_form was already submitted in this episode (only one form is allowed)")
        values = self.task.user_values
        wanted, invalid = [], []
        for raw in fields:
            f = normalize_field(raw)
            if f in FIELD_SET:
                if f not in wanted:
                    wanted.append(f)
            elif raw not in invalid:
                invalid.append(raw)
        if not wanted:
            raise InvalidCall(f"none of the requested fields is a known field name ({short_repr(fields, 80)})")
        if len(wanted) > MAX_FORM_FIELDS:
            raise InvalidCall(f"the customer answers at most {MAX_FORM_FIELDS} fields in the one form "
                              f"({len(wanted)} requested); ask only for what the departments need")
        out: dict[str, Any] = {}
        unavailable = []
        for f in sort_fields(wanted):
            if f in values:
                out[f] = values[f]
            else:
                unavailable.append(f)
        self.collected.update({k: v for k, v in out.items()})
        out["unavailable"] = unavailable
        if invalid:
            out["invalid_fields"] = invalid
        self.forms_submitted += 1
        self._form_turn = self.turns
        self.form_fields = tuple(sort_fields(wanted))
        if self.named_fields:
            self.form_holds_named = set(self.named_fields) <= set(self.form_fields)
        return json.dumps(out, ensure_ascii=False), "form"

    def _call_outcome(self, ten_digits: bool, hit: tuple[Company, Department] | None) -> str:
        """Where a call went, as one of FIRST_CALL_OUTCOMES."""
        if not ten_digits:
            return "invalid_number"
        if hit is None:
            return "unknown_number"
        if hit[0].id != self.company.id:
            return "other_company"
        return "right_department" if hit[1].name == self._chain[0].name else "other_department"

    def _call(self, phone: str, auth: dict[str, str | None]) -> tuple[str, str]:
        w = self._writer
        self.phone_calls += 1
        if self._first_call_turn is None:
            self._first_call_turn = self.turns
        digits = normalize_phone(phone)
        hit = self.world.phone_index.get(digits) if len(digits) == 10 else None
        if self.first_call is None:
            self.first_call = self._call_outcome(len(digits) == 10, hit)
        if len(digits) != 10:
            raise InvalidCall(f"{short_repr(phone)} is not a valid phone number (10 digits, e.g. 800-555-0100)")
        if hit is None:
            return w.unknown_number(f"{digits[:3]}-{digits[3:6]}-{digits[6:]}"), "unknown_number"
        company, dept = hit
        if company.id != self.company.id:
            return w.routing("wrong_company", company.name, dept.name, target_company=self.company.name), \
                "routing_violation"
        provided: dict[str, str] = {}
        ref_given = None
        for k, v in auth.items():
            f = normalize_field(k)
            if v is None or v.strip().casefold() in UNAVAILABLE_MARKERS:
                continue
            if f in REFERENCE_ALIASES:
                ref_given = v.strip().upper()
            else:
                provided[f] = _norm_value(v)
        user = self._user_norm

        def ok(f: str) -> bool:
            return f in user and provided.get(f) == user[f]

        missing = [f for f in dept.requires
                   if not ok(f) and not (f in dept.alternatives and all(ok(g) for g in dept.alternatives[f]))]
        idx = self._step_index.get(dept.name)
        if idx is not None and idx == self.completed and dept.requires:
            right = 1.0 - len(missing) / len(dept.requires)
            self.step_fields_right = max(self.step_fields_right, right)
        needs_ref = idx is not None and self.task.steps[idx].requires_reference
        ref_dept = self._chain[idx - 1].name if needs_ref else None
        if missing:
            if not provided and ref_given is None:
                self.probe_calls += 1
                self.probed_before_form |= not self.forms_submitted
            self.named_fields.extend(f for f in missing if f not in self.named_fields)
            return w.auth_failure(company.name, dept.name, missing, dept.alternatives, ref_dept), "auth_failure"
        nxt = self._chain[self.completed]
        if idx is None or idx != self.completed:
            kind = "wrong_department" if idx is None else ("out_of_order" if idx > self.completed else "already_done")
            if kind == "out_of_order":
                self.order_violations += 1
            return w.routing(kind, company.name, dept.name, target=nxt.name, phone=nxt.phone), "routing_violation"
        if needs_ref and ref_given != self.references[idx - 1]:
            return w.auth_failure(company.name, dept.name, (), dept.alternatives, ref_dept), "auth_failure"
        ref = w.reference_code()
        self.references.append(ref)
        self.completed += 1
        self.step_fields_right = 0.0
        if self.completed == len(self._chain):
            self.success = True
        return w.success(company.name, dept.name, self.task.steps[idx].service, ref), "success"


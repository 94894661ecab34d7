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

import difflib
import json
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lfo_cli.env.catalogue import FIELD_SET, MAX_FORM_FIELDS, REFERENCE_KEY, sort_fields
from lfo_cli.env.replies import ReplyWriter
from lfo_cli.env.world import Company, Department, Task, WorldData, normalize_name, normalize_phone, sub_seed

MAX_TURNS = 16
TOOLS: tuple[str, ...] = ("search_company", "auth_info_form", "make_phone_call")
TOOL_PARAMS: dict[str, tuple[str, ...]] = {
    "search_company": ("company_name",),
    "auth_info_form": ("fields",),
    "make_phone_call": ("phone_number", "auth_info"),
}
MAX_NAME_CHARS = 200  # company_name
MAX_FIELDS = 32  # entries in a form or in auth_info
MAX_FIELD_CHARS = 64  # one field name
MAX_VALUE_CHARS = 200  # one auth value
MAX_PHONE_CHARS = 64
# Values a caller may use to say "I don't have it" (treated as not provided).
UNAVAILABLE_MARKERS = frozenset({"", "unavailable", "n/a", "na", "none", "unknown", "not available", "null"})
REFERENCE_ALIASES = frozenset({REFERENCE_KEY, "reference", "ref", "ref_code", "reference_number", "reference_id"})
_SUMMARY_CHARS = 300


def normalize_field(name: str) -> str:
    return name.strip().casefold().replace(" ", "_").replace("-", "_")


def _norm_value(v: str) -> str:
    return v.strip().casefold().replace(" ", "").replace("-", "")


def _short(x: Any, n: int = 40) -> str:
    """A bounded, safe rendering of arbitrary user input for error messages."""
    if isinstance(x, str):
        return repr(x[:n]) + ("..." if len(x) > n else "")
    try:
        r = repr(x)
    except Exception:  # noqa: BLE001 - user objects with broken __repr__
        r = f"<{type(x).__name__}>"
    return r[:n] + ("..." if len(r) > n else "")


def json_safe(obj: Any, depth: int = 0) -> Any:
    """A JSON-serialisable, size-bounded copy of arbitrary tool arguments (for logs and WM inputs)."""
    if obj is None or isinstance(obj, bool | int):
        return obj
    if isinstance(obj, float):
        return obj if obj == obj and obj not in (float("inf"), float("-inf")) else str(obj)
    if isinstance(obj, str):
        return obj if len(obj) <= MAX_VALUE_CHARS else obj[:MAX_VALUE_CHARS] + "..."
    if depth >= 4:
        return "..."
    if isinstance(obj, Mapping):
        out = {}
        for i, (k, v) in enumerate(obj.items()):
            if i >= MAX_FIELDS:
                out["..."] = "..."
                break
            key = k if isinstance(k, str) else _short(k)
            out[key[:MAX_FIELD_CHARS]] = json_safe(v, depth + 1)
        return out
    if isinstance(obj, list | tuple | set | frozenset):
        items = list(obj)[: MAX_FIELDS + 1] if not isinstance(obj, set | frozenset) else sorted(map(_short, obj))[:MAX_FIELDS + 1]
        out_l = [json_safe(v, depth + 1) for v in items[:MAX_FIELDS]]
        if len(items) > MAX_FIELDS:
            out_l.append("...")
        return out_l
    return _short(obj, 80)


@dataclass(frozen=True, slots=True)
class StateSummary:
    """What the world model conditions on: the seed-000 ``<|state|>`` block, before the action."""

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


def render_action(tool: str, args: Any) -> str:
    """``search_company("Acme Bank")`` style, as in the seed's Previous Actions list."""
    if isinstance(args, dict) and tool in TOOL_PARAMS and set(args) == set(TOOL_PARAMS[tool]):
        inner = ", ".join(json.dumps(args[p], ensure_ascii=False) for p in TOOL_PARAMS[tool])
    else:
        inner = json.dumps(args, ensure_ascii=False)
    return f"{tool}({inner})"


SHAPING = ("progress_shaping", "field_credit")
# Where an episode's first make_phone_call went (``info()["first_call"]``; None: no call): the department of the
# task's first step, another department of the task's company, another company, a 10-digit number in no
# directory, or not a phone number at all. Separates choosing the department from copying its number.
FIRST_CALL_OUTCOMES = ("right_department", "other_department", "other_company", "unknown_number", "invalid_number")


def check_shaping(error: type[Exception] = ValueError, prefix: str = "", **values: float) -> None:
    """Reward-shaping coefficients must lie in [0, 1): a failed episode never earns a success's 1."""
    for name, value in values.items():
        if not 0.0 <= value < 1.0:
            raise error(f"{prefix}{name} must be in [0, 1) (a success earns 1), got {value}")


class _Invalid(Exception):
    """Internal: an invalid call; the message becomes the bad_request detail."""


class Episode:
    """The environment for one task at a time. ``reset`` then ``step`` until ``done``."""

    def __init__(self, world: WorldData, *, max_turns: int = MAX_TURNS, progress_shaping: float = 0.0,
                 field_credit: float = 0.0) -> None:
        if max_turns < 1:
            raise ValueError("max_turns must be >= 1")
        check_shaping(progress_shaping=progress_shaping, field_credit=field_credit)
        self.world = world
        self.max_turns = max_turns
        # Reward for partial progress (completed steps / total) when the task fails; 0 = binary reward.
        self.progress_shaping = progress_shaping
        # Reward for the share of the current step's required auth fields a call got right (best call),
        # per step, when the task fails; 0 = off. Denser than progress_shaping: it separates a call with
        # one mis-copied value from one with none right, which difficulty-1 tasks otherwise cannot.
        self.field_credit = field_credit
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
        return (self.progress_shaping * self.completed + self.field_credit * self.step_fields_right) / steps

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
            "order_violations": self.order_violations,
            "invalid_tool_calls": self.invalid_calls,
            "calls_after_done": self.calls_after_done,
            "steps_completed": self.completed,
            "steps_total": len(self._chain),
            "categories": dict(self.category_counts),
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
            tool, clean = self._validate(tool_name, args)
            if tool == "search_company":
                obs, category, summary = self._search(clean["company_name"])
            elif tool == "auth_info_form":
                obs, category = self._form(clean["fields"])
            else:
                obs, category = self._call(clean["phone_number"], clean["auth_info"])
        except _Invalid as exc:
            obs, category = self._writer.bad_request(str(exc)), "bad_request"
        except Exception as exc:  # noqa: BLE001 - contract: never raise; counted so tests catch env bugs
            self.internal_errors += 1
            obs, category = self._writer.bad_request(f"internal error ({type(exc).__name__})"), "bad_request"
        if category == "bad_request":
            self.invalid_calls += 1
        self.category_counts[category] = self.category_counts.get(category, 0) + 1
        tool_repr = tool_name if isinstance(tool_name, str) and len(tool_name) <= 64 else _short(tool_name)
        safe_args = json_safe(args)
        action = {"tool": tool_repr, "args": safe_args}
        self.transitions.append(Transition(state.step, state, action, obs, category))
        if summary is None:
            summary = obs.replace("\n", " ")
            if len(summary) > _SUMMARY_CHARS:
                summary = summary[:_SUMMARY_CHARS] + "..."
        self._previous.append(f"{render_action(tool_repr, safe_args)}: {summary}")
        return obs

    # ---- validation ----
    def _validate(self, tool_name: Any, args: Any) -> tuple[str, dict]:
        if not isinstance(tool_name, str) or tool_name not in TOOL_PARAMS:
            raise _Invalid(f"unknown tool {_short(tool_name)}; the tools are search_company, auth_info_form "
                           "and make_phone_call")
        params = TOOL_PARAMS[tool_name]
        if args is None:
            args = {}
        if not isinstance(args, Mapping):
            raise _Invalid(f"{tool_name} takes named arguments ({', '.join(params)}), got {type(args).__name__}")
        for k in args:
            if k not in params:
                raise _Invalid(f"{tool_name} got an unexpected argument {_short(k)}")
        for p in params:
            if p not in args:
                raise _Invalid(f"{tool_name} is missing the required argument '{p}'")
        if tool_name == "search_company":
            name = args["company_name"]
            if not isinstance(name, str):
                raise _Invalid("'company_name' must be a string")
            if len(name) > MAX_NAME_CHARS:
                raise _Invalid(f"'company_name' is too long (max {MAX_NAME_CHARS} characters)")
            if not normalize_name(name):
                raise _Invalid("'company_name' is empty")
            return tool_name, {"company_name": name}
        if tool_name == "auth_info_form":
            fields = args["fields"]
            if not isinstance(fields, list | tuple) or not all(isinstance(f, str) for f in fields):
                raise _Invalid("'fields' must be a list of field names (strings)")
            if not fields:
                raise _Invalid("'fields' must list at least one field name")
            if len(fields) > MAX_FIELDS:
                raise _Invalid(f"'fields' lists too many names (max {MAX_FIELDS})")
            if any(len(f) > MAX_FIELD_CHARS for f in fields):
                raise _Invalid(f"a field name is too long (max {MAX_FIELD_CHARS} characters)")
            return tool_name, {"fields": list(fields)}
        phone, auth = args["phone_number"], args["auth_info"]
        if not isinstance(phone, str):
            raise _Invalid("'phone_number' must be a string such as \"800-555-0100\"")
        if len(phone) > MAX_PHONE_CHARS:
            raise _Invalid(f"'phone_number' is too long (max {MAX_PHONE_CHARS} characters)")
        if not isinstance(auth, Mapping):
            raise _Invalid("'auth_info' must be an object mapping field names to values")
        if len(auth) > MAX_FIELDS:
            raise _Invalid(f"'auth_info' has too many entries (max {MAX_FIELDS})")
        clean: dict[str, str | None] = {}
        for k, v in auth.items():
            if not isinstance(k, str) or len(k) > MAX_FIELD_CHARS:
                raise _Invalid("'auth_info' keys must be field names (short strings)")
            if v is None:
                clean[k] = None
            elif isinstance(v, str):
                if len(v) > MAX_VALUE_CHARS:
                    raise _Invalid(f"the value for {_short(k)} is too long (max {MAX_VALUE_CHARS} characters)")
                clean[k] = v
            elif isinstance(v, int) and not isinstance(v, bool):
                clean[k] = str(v)
            else:
                raise _Invalid(f"the value for {_short(k)} must be a string, got {type(v).__name__}")
        return tool_name, {"phone_number": phone, "auth_info": clean}

    # ---- tools ----
    def _search(self, name: str) -> tuple[str, str, str]:
        key = normalize_name(name)
        company = self.world.name_index.get(key)
        if company is not None:
            text, summary = _directory(self.world, company)
            return text, "directory", summary
        text = _not_found(self.world, name, key)
        return text, "not_found", text

    def _form(self, fields: list[str]) -> tuple[str, str]:
        if self.forms_submitted:
            raise _Invalid("auth_info_form was already submitted in this episode (only one form is allowed)")
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
            raise _Invalid(f"none of the requested fields is a known field name ({_short(fields, 80)})")
        if len(wanted) > MAX_FORM_FIELDS:
            raise _Invalid(f"the customer answers at most {MAX_FORM_FIELDS} fields in the one form "
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
            raise _Invalid(f"{_short(phone)} is not a valid phone number (10 digits, e.g. 800-555-0100)")
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


# ---- deterministic tool outputs, cached per world ----------------------------------------------
def _directory(world: WorldData, company: Company) -> tuple[str, str]:
    cache = world.__dict__.setdefault("_directory_cache", {})
    hit = cache.get(company.id)
    if hit is None:
        lines = [f"Directory for {company.name} ({company.industry}):"]
        lines += [f"- {d.name}: {d.phone} ({d.purpose})" for d in company.departments]
        summary = f"Directory for {company.name}: " + "; ".join(f"{d.name} {d.phone}" for d in company.departments)
        hit = cache[company.id] = ("\n".join(lines), summary)
    return hit


def _not_found(world: WorldData, raw: str, key: str) -> str:
    cache = world.__dict__.setdefault("_not_found_cache", {})
    matches = cache.get(key)
    if matches is None:
        matches = [world.name_index[k].name for k in _close_names(world, key)]
        if len(cache) < 10000:
            cache[key] = matches
    shown = raw.strip().replace('"', "'")
    shown = shown if len(shown) <= 60 else shown[:60] + "..."
    text = f'No company named "{shown}" was found.'
    if matches:
        text += " Did you mean: " + ", ".join(matches) + "?"
    return text


def _close_names(world: WorldData, key: str, n: int = 3) -> list[str]:
    """Up to ``n`` normalised names close to ``key``: names sharing a word, ranked by shared words then
    string similarity; if none shares a word (a typo), difflib over all names."""
    index = world.__dict__.get("_token_index")
    if index is None:
        index = {}
        for name in world.name_index:
            for tok in set(name.split()):
                index.setdefault(tok, []).append(name)
        world.__dict__["_token_index"] = index
    shared: dict[str, int] = {}
    for tok in set(key.split()):
        for name in index.get(tok, ()):
            shared[name] = shared.get(name, 0) + 1
    if not shared:
        return difflib.get_close_matches(key, list(world.name_index), n=n, cutoff=0.75)
    top = sorted(shared, key=lambda k: (-shared[k], k))[:100]
    return sorted(top, key=lambda k: (-shared[k], -difflib.SequenceMatcher(None, key, k).ratio(), k))[:n]

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
inject noise (:class:`NoiseConfig`: epsilon-random actions, form-field dropout) or inspect each
decision. Non-oracle policies receive only a :class:`PublicTask` (goal, company and customer name).
"""

from __future__ import annotations

import json
import random
import string
from collections.abc import Generator, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lfo_cli.env import catalogue as cat
from lfo_cli.env.episode import TOOLS, Episode, Transition
from lfo_cli.env.replies import parse_directory, parse_reply
from lfo_cli.env.world import Task, WorldData, normalize_phone, sub_seed
from lfo_cli.errors import LfoError


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


@dataclass
class NoiseConfig:
    """Noise for making imperfect demonstrations (e.g. SFT data from ``probe``/``prior``)."""

    epsilon: float = field(default=0.0, metadata={"help": "Probability of replacing an action by a random one."})
    field_dropout: float = field(default=0.0, metadata={"help": "Probability of dropping each field from the form."})
    field_extra: float = field(
        default=0.0,
        metadata={"help": "Probability that the form also asks for one field drawn uniformly from those the policy "
                  "did not ask for (within the 6-field cap): forms beyond the industry prior, without knowing any "
                  "company's exception, so that RL from an imitator can come upon an exception field at all."},
    )
    slip: float = field(
        default=0.0,
        metadata={"help": "Probability that a search or phone call is first made with a copy slip (a mistyped "
                  "company name or phone number, another department's number, a mistyped or missing "
                  "auth value), whose error reply is followed by the intended call: demonstrations of "
                  "reading an error and recovering, instead of giving up."},
    )

    @property
    def active(self) -> bool:
        return self.epsilon > 0 or self.field_dropout > 0 or self.slip > 0 or self.field_extra > 0

    def __post_init__(self) -> None:
        for name in ("epsilon", "field_dropout", "slip", "field_extra"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise LfoError(f"NoiseConfig.{name} must be in [0, 1], got {v}")


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


def _mistype(rng: random.Random, text: str) -> str:
    """``text`` with one character replaced by a different one of the same kind (digit, letter)."""
    spots = [i for i, ch in enumerate(text) if ch.isalnum()]
    if not spots:
        return text + "x"
    i = rng.choice(spots)
    ch = text[i]
    pool = string.digits if ch.isdigit() else string.ascii_uppercase if ch.isupper() else string.ascii_lowercase
    return text[:i] + rng.choice([c for c in pool if c != ch]) + text[i + 1:]


class NoisyPolicy(Policy):
    """Wraps a policy: with prob. ``epsilon`` an action is replaced by a random one; form fields drop out;
    with prob. ``slip`` a search or call is preceded by a copy-slipped version of itself (see NoiseConfig)."""

    def __init__(self, base: Policy, noise: NoiseConfig) -> None:
        super().__init__(base.world)
        self.base = base
        self.noise = noise
        self.name = f"{base.name}+noise"
        self.uses_hidden_knowledge = base.uses_hidden_knowledge
        self._random = RandomPolicy(base.world)

    def begin(self, task, rng):
        self.rng = rng
        self.base.begin(task, rng)
        self._base_obs: str | None = None
        self._values: dict[str, str] = {}
        self._first = True
        self._last_was_base = False
        self._pending: Action | None = None  # the intended action, due after a slip
        self.last_noise: str | None = None  # what the last action was: "slip", "random" or None (the base's)

    def act(self, observation):
        if self._last_was_base:
            self._base_obs = observation
        self.last_noise = None
        return self._next_action()

    def _next_action(self) -> Action | None:
        if self._pending is not None:
            action, self._pending = self._pending, None
            self._last_was_base = True
            return action
        if self.rng.random() < self.noise.epsilon:
            self._last_was_base = False
            self.last_noise = "random"
            return self._random.random_action(self.rng, self._values)
        action = self.base.act(None if self._first else self._base_obs)
        self._first = False
        self._last_was_base = True
        if action is not None and action.tool == "auth_info_form" and self.noise.field_dropout > 0:
            kept = [f for f in action.args["fields"] if self.rng.random() >= self.noise.field_dropout]
            action = Action(action.tool, {"fields": kept or action.args["fields"][:1]})
        # Drawn only when enabled, so the random stream (and every warm start built without it) is unchanged.
        if (action is not None and action.tool == "auth_info_form" and self.noise.field_extra > 0
                and len(action.args["fields"]) < cat.MAX_FORM_FIELDS and self.rng.random() < self.noise.field_extra):
            unasked = [f for f in cat.FIELDS if f not in action.args["fields"]]
            action = Action(action.tool, {"fields": [*action.args["fields"], self.rng.choice(unasked)]})
        if (action is not None and self.noise.slip > 0 and action.tool in ("search_company", "make_phone_call")
                and self.rng.random() < self.noise.slip):
            slipped = self._slipped(action)
            if slipped != action:
                self._pending = action
                self._last_was_base = False
                self.last_noise = "slip"
                return slipped
        return action

    def _slipped(self, action: Action) -> Action:
        """A plausible copy error of ``action`` (the kinds a small model makes when it copies)."""
        rng = self.rng
        if action.tool == "search_company":
            name = str(action.args.get("company_name", ""))
            words = name.split()
            if words and rng.random() < 0.5:  # one word swapped: another company or "no company ... Did you mean"
                i = rng.randrange(len(words))
                words[i] = rng.choice([w for w in cat.NAME_WORDS if w != words[i]])
                return Action(action.tool, {"company_name": " ".join(words)})
            others = [n for n in self._random.company_names if n != name]  # a whole other (remembered) company
            return Action(action.tool, {"company_name": rng.choice(others)}) if others else action
        phone = str(action.args.get("phone_number", ""))
        auth = dict(action.args.get("auth_info") or {})
        values = [k for k in auth if k != cat.REFERENCE_KEY and isinstance(auth[k], str)]
        kind = rng.choice(("number", "department", "value") if values else ("number", "department"))
        if kind == "department":  # another number from the same company's (public) directory
            hit = self.world.phone_index.get(normalize_phone(phone))
            wrong = [d.phone for d in hit[0].departments if d.phone != phone] if hit else []
            kind = "number" if not wrong else kind
        if kind == "number":
            return Action(action.tool, {"phone_number": _mistype(rng, phone), "auth_info": auth})
        if kind == "department":
            return Action(action.tool, {"phone_number": rng.choice(sorted(wrong)), "auth_info": auth})
        key = rng.choice(values)
        if rng.random() < 0.5:
            auth[key] = _mistype(rng, auth[key])
        else:
            del auth[key]
        return Action(action.tool, {"phone_number": phone, "auth_info": auth})


def make_policy(name: str, world: WorldData, noise: NoiseConfig | None = None) -> Policy:
    try:
        policy = POLICIES[name](world)
    except KeyError:
        raise LfoError(f"unknown policy {name!r}; choose from {sorted(POLICIES)}") from None
    if noise is not None and noise.active:
        return NoisyPolicy(policy, noise)
    return policy


@dataclass
class Trajectory:
    task_id: str
    policy: str
    rollout_seed: int
    prompt: str
    transitions: list[Transition]
    reward: float
    info: dict

    def to_dict(self) -> dict:
        return {"task_id": self.task_id, "policy": self.policy, "rollout_seed": self.rollout_seed,
                "prompt": self.prompt, "transitions": [t.to_dict() for t in self.transitions],
                "reward": self.reward, "info": self.info}

    @classmethod
    def from_dict(cls, d: dict) -> Trajectory:
        return cls(task_id=d["task_id"], policy=d["policy"], rollout_seed=int(d["rollout_seed"]),
                   prompt=d["prompt"], transitions=[Transition.from_dict(t) for t in d["transitions"]],
                   reward=float(d["reward"]), info=dict(d["info"]))


def run_episode(env: Any, policy: Policy | str, task: Task | str, rollout_seed: int = 0,
                noise: NoiseConfig | None = None) -> Trajectory:
    """Run ``policy`` on ``task`` in ``env`` (an :class:`Episode` or a ``CustomerServiceEnv``)."""
    episode: Episode = env.episode if hasattr(env, "episode") and isinstance(env.episode, Episode) else env
    if isinstance(policy, str):
        policy = make_policy(policy, episode.world, noise)
    if isinstance(task, str):
        task = episode.world.task(task)
    prompt = episode.reset(task, rollout_seed)
    rng = random.Random(sub_seed("policy", policy.name, task.task_id, rollout_seed))
    policy.begin(task if policy.uses_hidden_knowledge else PublicTask.of(task), rng)
    obs: str | None = None
    # indices of transitions that were noise (NoisyPolicy.last_noise): deliberate copy slips
    # (NoiseConfig.slip) and random replacement actions (NoiseConfig.epsilon); a warm start may keep
    # them in context without imitating them
    noise_steps: dict[str, list[int]] = {"slip": [], "random": []}
    while not episode.done:
        action = policy.act(obs)
        if action is None:
            break
        kind = getattr(policy, "last_noise", None)
        if kind is not None:
            noise_steps[kind].append(len(episode.transitions))
        obs = episode.step(action.tool, action.args)
    info = episode.info()
    for kind, key in (("slip", "slipped_steps"), ("random", "random_steps")):
        if noise_steps[kind]:
            info[key] = noise_steps[kind]
    return Trajectory(task.task_id, policy.name, rollout_seed, prompt, list(episode.transitions),
                      episode.reward(), info)


def write_trajectories_jsonl(path: str | Path, trajectories: Iterable[Trajectory]) -> Path:
    from lfo_cli.io import atomic_write_jsonl

    return atomic_write_jsonl(path, (t.to_dict() for t in trajectories))


def read_trajectories_jsonl(path: str | Path) -> list[Trajectory]:
    from lfo_cli.io import iter_jsonl

    out = []
    for i, row in enumerate(iter_jsonl(path), start=1):
        try:
            out.append(Trajectory.from_dict(row))
        except (KeyError, TypeError, ValueError) as exc:
            raise LfoError(f"{path}:{i}: not a trajectory ({exc})") from None
    return out

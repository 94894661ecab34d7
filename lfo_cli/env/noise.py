"""Noisy demonstrations: a reference policy with random actions, dropped or extra form fields and copy slips.

:class:`NoiseConfig` (the customer-service world's teacher noise) says how much of each; :class:`NoisyPolicy` wraps any
policy with it, so a warm start imitates a teacher that makes the mistakes (and recoveries) a small model
must learn to handle.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass, field

from lfo_cli.env import catalogue as cat
from lfo_cli.env.policies import Action, Policy, RandomPolicy
from lfo_cli.env.world import normalize_phone
from lfo_cli.worlds.noise import TeacherNoise

__all__ = ["NoiseConfig", "NoisyPolicy"]


@dataclass
class NoiseConfig(TeacherNoise):
    """The customer-service teacher's noise: ``epsilon`` (every world's) and the form and copy noise of this
    world. A customer-service warm start's ``data.noise``."""

    field_dropout: float = field(
        default=0.0,
        metadata={"help": "Probability of dropping each field from the policy's form (incomplete authentication; "
                  "a form keeps at least one field)."},
    )
    field_extra: float = field(
        default=0.0,
        metadata={"help": "Probability that the form also asks for one field drawn uniformly from those the policy "
                  "did not ask for (within the 6-field cap): forms beyond the industry prior, without knowing any "
                  "company's exception, so that RL from a model imitating them can come upon an exception's "
                  "field at all."},
    )
    slip: float = field(
        default=0.0,
        metadata={"help": "Probability that a search or phone call is first made with a copy slip (a mistyped "
                  "company name or phone number, another department's number, a mistyped or missing auth "
                  "value), whose error reply is followed by the intended call: demonstrations of reading an "
                  "error and recovering. A warm start keeps slipped turns in context with no loss, so the "
                  "model learns to recover, not to slip."},
    )


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

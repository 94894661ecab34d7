"""The TRL-ready environment: ``GRPOTrainer(environment_factory=make_env_factory(world))``.

TRL 1.16 exposes every public *function* of the environment class as a tool, except ``reset``
and ``get_reward``. So the class has exactly three public methods besides those two, with type
hints and Google-style docstrings (TRL builds the JSON schema from them with
``transformers.utils.get_json_schema``). Everything else is private or a property.

``reset(**row)`` receives the dataset row: it reads ``task_id`` (required), an optional
``rollout_seed`` (the episode's seed, as is) and an optional ``row_seed`` (the row's; the episode's
seed is then (factory seed, row seed, instance index), so the G generations of a group, G pooled
instances, get different reply RNGs, and the same ones after a resume: nothing depends on how many
episodes came before). `lfo train` gives every training row its index as ``row_seed``. With neither,
the episode's seed comes from (factory seed, instance index, resets of this instance): reproducible from the
start, not across a resume.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from lfo_cli.env.episode import MAX_TURNS, SHAPING, Episode, Transition, check_shaping
from lfo_cli.env.world import WorldData, sub_seed
from lfo_cli.env.world_files import load_world
from lfo_cli.errors import LfoError


class CustomerServiceEnv:
    """Customer-service phone environment: find the company, collect credentials once, call reps."""

    def __init__(self, world: WorldData, *, seed: int = 0, instance_index: int = 0, max_turns: int = MAX_TURNS,
                 progress_shaping: float = 0.0, field_credit: float = 0.0, probe_bonus: float = 0.0) -> None:
        self._episode = Episode(world, max_turns=max_turns, progress_shaping=progress_shaping,
                                field_credit=field_credit, probe_bonus=probe_bonus)
        self._seed = seed
        self._instance_index = instance_index
        self._resets = 0

    # ---- TRL protocol ----
    def reset(self, **kwargs: Any) -> str:
        task_id = kwargs.get("task_id")
        if not isinstance(task_id, str):
            raise LfoError("CustomerServiceEnv.reset needs a 'task_id' column in the dataset row")
        rollout_seed, row_seed = kwargs.get("rollout_seed"), kwargs.get("row_seed")
        if isinstance(rollout_seed, bool) or not isinstance(rollout_seed, int):
            if isinstance(row_seed, int) and not isinstance(row_seed, bool):
                rollout_seed = sub_seed("rollout-row", self._seed, row_seed, self._instance_index)
            else:
                rollout_seed = sub_seed("rollout", self._seed, self._instance_index, self._resets)
        self._resets += 1
        return self._episode.reset(task_id, rollout_seed)

    def get_reward(self) -> float:
        return self._episode.reward()

    # ---- tools (the only public methods) ----
    def search_company(self, company_name: str) -> str:
        """Look up a company's customer-service directory: departments, phone numbers and what each handles.

        Args:
            company_name: The company's name, for example "Acme Bank".

        Returns:
            The directory, or a not-found message with close matches.
        """
        return self._episode.step("search_company", {"company_name": company_name})

    def auth_info_form(self, fields: list[str]) -> str:
        """Ask the customer for identity fields. The customer answers only one form per task, of at most 6 fields, so ask for exactly what the departments need.

        Args:
            fields: Field names to request, for example ["account_number", "last_4_ssn", "date_of_birth", "zip_code", "pin", "policy_number", "member_id", "card_last_4", "email", "phone_on_file", "order_number", "security_answer"].

        Returns:
            The customer's values as JSON, with the fields they do not have listed under "unavailable".
        """
        return self._episode.step("auth_info_form", {"fields": fields})

    def make_phone_call(self, phone_number: str, auth_info: dict) -> str:
        """Call a department and pass identity information (and any reference code from an earlier call) to the representative.

        Args:
            phone_number: The department's number from the directory, for example "800-555-0100".
            auth_info: Field name to value, for example {"account_number": "1234567890", "reference_code": "REF-AB12CD"}.

        Returns:
            What the representative says.
        """
        return self._episode.step("make_phone_call", {"phone_number": phone_number, "auth_info": auth_info})

    # ---- read-only views (properties are not tools) ----
    @property
    def episode(self) -> Episode:
        return self._episode

    @property
    def transitions(self) -> list[Transition]:
        return self._episode.transitions

    @property
    def info(self) -> dict:
        return self._episode.info()

    @property
    def done(self) -> bool:
        return self._episode.done


class EnvFactory:
    """Callable that builds :class:`CustomerServiceEnv` instances sharing one loaded world."""

    def __init__(self, world: WorldData, seed: int = 0, **opts: Any) -> None:
        self.world = world
        self.seed = seed
        self.opts = opts
        self._count = 0
        self._lock = threading.Lock()
        self.instances: list[CustomerServiceEnv] = []

    def __call__(self) -> CustomerServiceEnv:
        with self._lock:
            index = self._count
            self._count += 1
        env = CustomerServiceEnv(self.world, seed=self.seed, instance_index=index, **self.opts)
        self.instances.append(env)
        return env


def make_env_factory(world_or_data_dir: WorldData | str | Path, seed: int = 0, **opts: Any) -> EnvFactory:
    """``opts``: ``max_turns`` (16), ``progress_shaping``, ``field_credit`` and ``probe_bonus`` (all 0.0: binary
    reward)."""
    world = world_or_data_dir if isinstance(world_or_data_dir, WorldData) else load_world(world_or_data_dir)
    unknown = set(opts) - {"max_turns", *SHAPING}
    if unknown:
        raise LfoError(f"make_env_factory: unknown option(s) {sorted(unknown)}; use max_turns, {', '.join(SHAPING)}")
    # Checked here: the episodes are built later, inside TRL, where a bad value would be a traceback.
    check_shaping(LfoError, "make_env_factory: ", **{k: v for k, v in opts.items() if k in SHAPING})
    return EnvFactory(world, seed=seed, **opts)

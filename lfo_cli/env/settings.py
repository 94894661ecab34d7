"""The customer-service world's own recipe settings (:mod:`lfo_cli.worlds.settings`): the keys it adds to a
training recipe's ``data`` and ``env`` sections and to a warm start's ``data`` section."""

from __future__ import annotations

from dataclasses import dataclass, field

from lfo_cli.env.episode import check_shaping
from lfo_cli.env.noise import NoiseConfig
from lfo_cli.errors import LfoError


@dataclass
class CustomerServiceTrainData:
    """Which companies RL trains on (a training recipe's ``data`` section)."""

    companies: int | list[str] | None = field(
        default=None,
        metadata={"help": "Restrict fresh training tasks and fresh validation tasks to some training companies: "
                  "a list of company ids, or k = k of them drawn with the world's seed (the same k for every run "
                  "on a world). Few companies make each company exception recur often enough for RL to learn it "
                  "(docs/study.md); null = all training companies."},
    )
    fresh_companies: int = field(
        default=0,
        metadata={"help": "Also train on companies generated afresh for the run (this many, seeded by the run seed, "
                  "none of the world's: neither its training nor its held-out companies), making "
                  "data.fresh_company_share of the training tasks. Their routes and exceptions cannot be "
                  "memorised across episodes, only read (a positive-control candidate that, in pilot G of docs/study.md, "
                  "left held-out d2 where it was). 0 = off."},
    )
    fresh_company_share: float = field(
        default=0.0,
        metadata={"help": "The share of training tasks on data.fresh_companies' companies (same difficulty filter "
                  "and mix as the rest), in [0, 1)."},
    )

    def __post_init__(self) -> None:
        if self.fresh_companies < 0:
            raise LfoError(f"data.fresh_companies must be >= 0, got {self.fresh_companies}")
        if not 0 <= self.fresh_company_share < 1:
            raise LfoError(f"data.fresh_company_share must be in [0, 1), got {self.fresh_company_share}")
        if bool(self.fresh_companies) != bool(self.fresh_company_share):
            raise LfoError("data.fresh_companies and data.fresh_company_share go together: set both (> 0) or neither")
        if self.companies is not None and not self.fresh_tasks:  # type: ignore[attr-defined]  (lfo's field)
            raise LfoError("data.companies needs data.fresh_tasks > 0 (the world's train split spans all companies)")
        if isinstance(self.companies, int) and self.companies < 1:
            raise LfoError(f"data.companies must be >= 1, got {self.companies}")


@dataclass
class CustomerServiceRewards:
    """The training reward's options (a training recipe's ``env`` section; validation counts successes only)."""

    progress_shaping: float = field(
        default=0.0, metadata={"help": "A failed episode earns this x (completed steps / total steps); 0 = binary reward."})
    field_credit: float = field(
        default=0.0, metadata={"help": "A failed episode earns this x (share of the current step's required auth fields "
                                       "right in its best call) / total steps; 0 = off."})
    probe_bonus: float = field(
        default=0.0, metadata={"help": "A failed episode that probed before its form (a call with no identity field, "
                                       "answered by naming what the department needs) earns this: the reading "
                                       "study's positive control. 0 = off."})

    def __post_init__(self) -> None:
        values = {"progress_shaping": self.progress_shaping, "field_credit": self.field_credit,
                  "probe_bonus": self.probe_bonus}
        check_shaping(LfoError, "env.", **{k: v for k, v in values.items() if v})  # those the recipe sets


@dataclass
class CustomerServiceTeacherData:
    """The teacher's noise, probing and companies (a warm start's ``data`` section)."""

    noise: NoiseConfig = field(
        default_factory=lambda: NoiseConfig(epsilon=0.1, field_dropout=0.1),
        metadata={"help": "The teacher's noise (lfo_cli.env.noise.NoiseConfig: epsilon, field_dropout, field_extra, "
                  "slip), for the SFT data and the teacher baseline. Default: epsilon 0.1, field_dropout 0.1, the others 0; "
                  "keys a recipe leaves out keep these."},
    )
    probe_rate: float = field(
        default=0.0,
        metadata={"help": "Probability that a rollout plays the `probe` reference policy instead (it calls each "
                  "needed department with an empty auth_info, reads the auth_failure reply and files the fields it "
                  "named), with the same noise: a warm start that has seen replies read within an episode, the "
                  "behaviour held-out companies need. 0: the policy alone."},
    )
    fresh_companies: int = field(
        default=0,
        metadata={"help": "Draw the SFT tasks (data.fresh_tasks of them) on this many companies generated afresh, a "
                  "world of their own seeded from the world's and the warm start's seeds, instead of the world's "
                  "training companies: no phone number recurs often enough to be learned, so the model must copy it "
                  "from the directory, as it must on a held-out company. 0: the world's training companies. "
                  "Evaluation stays on the world's own validation tasks."},
    )
    probe_noise_scale: float = field(
        default=1.0,
        metadata={"help": "The probing teacher's noise is data.noise times this (every probability): 1 = the same "
                  "noise, 0 = clean probes that read the reply and finish the task, 0.5 = half."},
    )

    @property
    def probe_noise(self) -> NoiseConfig:
        """The noise of the rollouts that play ``probe`` (``probe_rate``)."""
        return self.noise.scaled(self.probe_noise_scale)

    def __post_init__(self) -> None:
        if self.fresh_companies < 0:
            raise LfoError(f"data.fresh_companies must be >= 0, got {self.fresh_companies}")
        if self.fresh_companies and not self.fresh_tasks:  # type: ignore[attr-defined]  (lfo's field)
            raise LfoError("data.fresh_companies needs data.fresh_tasks > 0 (the tasks drawn on those companies)")
        for name in ("probe_rate", "probe_noise_scale"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise LfoError(f"data.{name} must be in [0, 1], got {v}")

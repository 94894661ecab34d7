"""A warm start's teacher noise (``data.noise``): how often a noisy teacher errs.

``epsilon`` (a random action instead of the teacher's) is every world's; the form and copy noise is the
customer-service world's (:class:`lfo_cli.env.noise.NoisyPolicy` applies it), and a world without it
refuses non-zero values.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from lfo_cli.errors import LfoError


@dataclass
class NoiseConfig:
    """How often a noisy teacher errs (:class:`NoisyPolicy`). Every probability is 0 by default (no noise);
    a warm start's ``data.noise`` is one of these, passed as is to its rollouts."""

    epsilon: float = field(
        default=0.0,
        metadata={"help": "Probability that a step is replaced by a random call (wrong guesses, extra calls)."},
    )
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

    @property
    def active(self) -> bool:
        return self.epsilon > 0 or self.field_dropout > 0 or self.slip > 0 or self.field_extra > 0

    def scaled(self, factor: float) -> NoiseConfig:
        """Every probability times ``factor`` (in [0, 1]): 1 the same noise, 0 none."""
        return NoiseConfig(**{f.name: getattr(self, f.name) * factor for f in fields(self)})

    def __post_init__(self) -> None:
        # Named by the class; the recipe loader says it with the recipe key (data.noise.epsilon).
        for f in fields(self):
            v = getattr(self, f.name)
            if not 0.0 <= v <= 1.0:
                raise LfoError(f"NoiseConfig.{f.name} must be in [0, 1], got {v}")

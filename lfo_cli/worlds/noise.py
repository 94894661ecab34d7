"""A warm start's teacher noise (``data.noise``): how often a noisy teacher errs.

:class:`TeacherNoise` holds what every world's teacher has: ``epsilon``, a random action instead of the
teacher's. A world whose teacher errs in more ways declares a subclass with those probabilities and names
it as the type of ``noise`` in its warm-start data options (:attr:`lfo_cli.worlds.World.teacher_data`), as
the customer-service world does (:class:`lfo_cli.env.noise.NoiseConfig`: dropped and extra form fields,
copy slips).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import ClassVar

from lfo_cli.errors import LfoError


@dataclass
class TeacherNoise:
    """How often a noisy teacher errs. Every field is a probability, 0 by default (no noise); a warm start's
    ``data.noise`` is one of these (or a world's subclass), passed as is to its rollouts."""

    world_settings: ClassVar[bool] = True  # a world's teacher may err in more ways (a subclass)

    epsilon: float = field(
        default=0.0,
        metadata={"help": "Probability that a step is replaced by a random action (wrong guesses, extra calls)."},
    )

    @property
    def active(self) -> bool:
        return any(getattr(self, f.name) > 0 for f in fields(self))

    def scaled(self, factor: float) -> TeacherNoise:
        """Every probability times ``factor`` (in [0, 1]): 1 the same noise, 0 none."""
        return type(self)(**{f.name: getattr(self, f.name) * factor for f in fields(self)})

    def __post_init__(self) -> None:
        # Named by the class; the recipe loader says it with the recipe key (data.noise.epsilon).
        for f in fields(self):
            v = getattr(self, f.name)
            if not 0.0 <= v <= 1.0:
                raise LfoError(f"{type(self).__name__}.{f.name} must be in [0, 1], got {v}")

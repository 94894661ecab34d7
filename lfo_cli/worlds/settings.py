"""Recipe sections that a world extends with settings of its own.

lfo's sections hold what every world has: a training recipe's ``data`` section its task counts and
difficulties, its ``env`` section the world's ``kind``, a warm start's ``data`` section the teacher, its
rollouts and its ``noise`` (:class:`~lfo_cli.worlds.noise.TeacherNoise`). A world declares the keys it
adds, as plain dataclasses whose fields carry ``metadata={"help": ...}`` (:attr:`World.train_data`,
:attr:`World.rewards`, :attr:`World.teacher_data`); a recipe's ``env.kind`` picks the world, and the
section is lfo's fields followed by the world's (:func:`extend`). So ``data.companies`` is a key of
customer-service recipes alone, and a TextWorld recipe that sets it is one error naming the key.

A world's dataclass may redeclare one of lfo's fields to narrow it (the customer-service world's
``noise`` is its own :class:`~lfo_cli.env.noise.NoiseConfig`, with its defaults), and may check its
fields together with lfo's in ``__post_init__`` (it runs after lfo's checks; it does not call
``super()``).
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from lfo_cli.errors import LfoError
from lfo_cli.worlds.registry import DEFAULT_KIND


@functools.cache
def extend(base: type, extra: type | None) -> type:
    """The section class of lfo's ``base`` with the world's ``extra`` fields (``base`` itself when the world adds
    none). One class per pair, so sections of the same world compare equal and a recipe is parsed the same way
    each time."""
    if extra is None:
        return base
    if not dataclasses.is_dataclass(extra):
        raise TypeError(f"{extra!r}: a world's settings are a dataclass")

    def __post_init__(self) -> None:
        for cls in (base, extra):
            check = vars(cls).get("__post_init__")
            if check is not None:
                check(self)

    return dataclasses.make_dataclass(
        extra.__name__, [], bases=(extra, base),
        namespace={"__post_init__": __post_init__, "__module__": extra.__module__,
                   "__doc__": f"{base.__name__} with the {extra.__name__} of its world."})


@dataclass
class WorldRecipe:
    """The head of a recipe kind that runs on a world (``grpo``, ``warmstart``): its seed, and the sections the
    recipe's ``env.kind`` decides (``world_sections(kind)``, which recipe loading reads through
    :meth:`section_types`: :func:`lfo_cli.recipes.build_config`)."""

    seed: int = field(default=0, metadata={
        "help": "Seeds python, numpy and torch (transformers.set_seed): initialisation, the world's draws and noise, "
                "shuffling and sampling."})
    world_sections: ClassVar[Callable[[str], dict[str, type]]]

    @classmethod
    def section_types(cls, data: dict) -> dict[str, type]:
        return cls.world_sections(recipe_kind(data))

    def __post_init__(self) -> None:
        if self.seed < 0:
            raise LfoError(f"seed must be >= 0, got {self.seed}")


def recipe_kind(data: dict) -> str:
    """The world a recipe mapping names (``env.kind``; the default world's when it names none)."""
    env = data.get("env")
    return env.get("kind", DEFAULT_KIND) if isinstance(env, dict) else DEFAULT_KIND


def fit_section(section: Any, cls: type, where: str) -> Any:
    """``section`` as an instance of ``cls`` (a world's section class from :func:`extend`): as is when it is one,
    else the values it sets (those off its own class's defaults) carried over, and the rest ``cls``'s defaults (a
    config built in Python from lfo's plain section; a section of another world whose own fields are all at
    their defaults). A nested section becomes the type ``cls`` declares. A value ``cls`` has no field for is one
    error naming it."""
    if type(section) is cls:
        return section
    ours = {f.name for f in dataclasses.fields(cls) if f.init}
    hints = typing.get_type_hints(cls)
    carried = {}
    for f in dataclasses.fields(section):
        value = getattr(section, f.name)
        if not f.init or value == _default(f):
            continue
        if f.name not in ours:
            raise LfoError(f"{where}.{f.name}: not a setting of this world (its {where} section: {', '.join(sorted(ours))})")
        tp = hints.get(f.name)
        if dataclasses.is_dataclass(value) and isinstance(tp, type) and dataclasses.is_dataclass(tp):
            value = fit_section(value, tp, f"{where}.{f.name}")
        carried[f.name] = value
    return cls(**carried)


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else dataclasses.MISSING

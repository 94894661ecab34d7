"""Worlds by kind: the built-in ones and any a package registers under the ``lfo.worlds`` entry-point group.

A third-party world is a :class:`~lfo_cli.worlds.base.World` subclass that its package names in its
``pyproject.toml``::

    [project.entry-points."lfo.worlds"]
    my_world = "my_package.world:MyWorld"

and a recipe picks with ``env.kind: my_world``. The built-in worlds are named here by their import path
alone, so nothing below the commands layer imports a world's package (import-linter checks it).
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass, field
from importlib.metadata import entry_points

from lfo_cli.errors import LfoError
from lfo_cli.worlds.base import World

DEFAULT_KIND = "customer_service"
# class attributes every world sets (the abstract methods are checked by inspect.isabstract)
REQUIRED = frozenset({"kind", "tools", "predict_tools", "reply_stop", "splits", "heldout_split"})
GROUP = "lfo.worlds"

# kind -> (module:class, the pip extra it needs or None, its `lfo gen-env` options: module:class, light to import)
BUILTIN: dict[str, tuple[str, str | None, str]] = {
    "customer_service": ("lfo_cli.env.plugin:CustomerServiceWorld", None,
                         "lfo_cli.env.generation:CustomerServiceGeneration"),
    "textworld": ("lfo_cli.textworld_env.world:TextWorldWorld", "textworld",
                  "lfo_cli.textworld_env.generation:TextWorldGeneration"),
}


def kinds() -> list[str]:
    """Every world kind lfo can load here: the built-in ones and the registered plugins."""
    return sorted({*BUILTIN, *(ep.name for ep in entry_points(group=GROUP))})


def world_class(kind: str) -> type[World]:
    """The :class:`World` subclass for ``kind`` (one ``LfoError`` line for an unknown kind, a missing extra or a
    plugin that does not implement the interface)."""
    if not isinstance(kind, str):
        raise LfoError(f"env.kind must be a world's name, got {kind!r}")
    if kind in BUILTIN:
        target, extra, _ = BUILTIN[kind]
        module, _, name = target.partition(":")
        try:
            cls = getattr(importlib.import_module(module), name)
        except ModuleNotFoundError as exc:
            if extra is None:
                raise
            raise LfoError(f"env.kind={kind} needs the {extra!r} extra ({exc.name} is not installed): "
                           f"pip install -e '.[{extra}]'") from None
    else:
        found = [ep for ep in entry_points(group=GROUP) if ep.name == kind]
        if not found:
            raise LfoError(f"unknown world kind {kind!r} (env.kind); known: {', '.join(kinds())}")
        try:
            cls = found[0].load()
        except Exception as exc:  # a broken plugin: say which
            raise LfoError(f"world plugin {kind!r} ({found[0].value}) does not load: {type(exc).__name__}: {exc}") from None
    if not (isinstance(cls, type) and issubclass(cls, World)):
        raise LfoError(f"world plugin {kind!r} is not a lfo_cli.worlds.World subclass: {cls!r}")
    missing = sorted(REQUIRED - set(dir(cls)))
    if inspect.isabstract(cls) or missing:
        gaps = sorted(getattr(cls, "__abstractmethods__", ())) + missing
        raise LfoError(f"world plugin {kind!r} ({cls.__module__}.{cls.__name__}) does not implement {', '.join(gaps)}")
    return cls


@dataclass
class WorldChoice:
    """A recipe's ``env`` section as far as the world goes (warm starts and training runs alike)."""

    kind: str = field(
        default=DEFAULT_KIND,
        metadata={"help": "The world (`lfo_cli.worlds`): customer_service, textworld (the `textworld` extra) or a "
                  "plugin registered under the `lfo.worlds` entry points. `data.dir` holds its `lfo gen-env` output."},
    )

    def __post_init__(self) -> None:
        world_class(self.kind)  # an unknown kind or a missing extra: one line, at once


def load_world(kind: str, data_dir) -> World:
    """The world of ``kind`` that ``lfo gen-env`` wrote to ``data_dir``."""
    return world_class(kind).load(data_dir)


def builtin_generation() -> dict[str, type]:
    """The built-in worlds' `lfo gen-env` option classes by kind, without importing their World classes or game libraries (the
    command line lists them in `lfo gen-env --help`)."""
    out = {}
    for kind, (_, _, target) in BUILTIN.items():
        module, _, name = target.partition(":")
        out[kind] = getattr(importlib.import_module(module), name)
    return out

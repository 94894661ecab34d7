"""Shared option aliases and the error boundary for every `lfo` command (hf-CLI style)."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import sys
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from lfo_cli.errors import LfoError

# ---- shared option aliases -------------------------------------------------------------------
SeedOpt = Annotated[int, typer.Option("--seed", min=0, help="Seed for every random number generator of the run.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document to stdout (for scripts).")]
ForceOpt = Annotated[bool, typer.Option("--force", help="Overwrite existing outputs.")]
OutDirOpt = Annotated[Path, typer.Option("--out", help="Output directory.")]
DataDirOpt = Annotated[
    Path, typer.Option("--data-dir", help="Directory written by `lfo gen-env` (companies, tasks, manifest).")
]


def error_line(message: str) -> None:
    typer.echo(f"error: {message}", err=True)


def handle_errors(fn):
    """Turn :class:`LfoError` into one line on stderr and exit code 2 (never a traceback)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except LfoError as exc:
            error_line(str(exc))
            raise typer.Exit(exc.exit_code) from None

    return wrapper


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, sort_keys=True, allow_nan=False) + "\n")
    sys.stdout.flush()


def not_built(command: str, issue: int) -> None:
    """Commands that are registered but not implemented yet say so and exit 2: never pretend."""
    error_line(f"`lfo {command}` is not built yet (tracked in issue #{issue}).")
    raise typer.Exit(2)


def dataclass_options(cls: type, *, names: Callable[[str], bool] = lambda name: True,
                      panel: Callable[[dataclasses.Field], str | None] = lambda f: None) -> list[inspect.Parameter]:
    """The fields of dataclass ``cls`` (those ``names`` keeps) as keyword parameters for a typer command's
    ``__signature__``: ``--field-name``, the field's type, its ``metadata["help"]`` with its default, None when not
    given (the dataclass's default then holds). A bool field is ``--name/--no-name``; a tuple field is one
    comma-separated value (:func:`dataclass_values` reads it)."""
    hints = typing.get_type_hints(cls)
    params = []
    for f in dataclasses.fields(cls):
        if not f.init or not names(f.name):
            continue
        tp, flag = hints[f.name], f"--{f.name.replace('_', '-')}"
        if tp is bool:
            flag = f"{flag}/--no-{f.name.replace('_', '-')}"
        elif typing.get_origin(tp) is tuple:
            tp = str
        help_ = f.metadata.get("help", "")
        default = f.default if f.default is not dataclasses.MISSING else None
        if default is not None and "default" not in help_:
            shown = ",".join(map(str, default)) if isinstance(default, tuple) else default
            help_ += f" \\[default: {shown}]"
        option = typer.Option(flag, help=help_, rich_help_panel=panel(f), show_default=False)
        optional = tp if type(None) in typing.get_args(tp) else tp | None
        params.append(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=None,
                                        annotation=Annotated[optional, option]))
    return params


def with_options(command: Callable, params: list[inspect.Parameter]) -> Callable:
    """``command`` (its own options, then ``**options``) with ``params`` (e.g. :func:`dataclass_options`) in place
    of ``**options`` in the signature typer reads."""
    sig = inspect.signature(command, eval_str=True)
    own = [p for p in sig.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    command.__signature__ = sig.replace(parameters=[*own, *params])
    return command


def dataclass_values(cls: type, options: dict[str, Any]) -> dict[str, Any]:
    """The :func:`dataclass_options` a command was given (None: not given), as the fields' values."""
    hints = typing.get_type_hints(cls)
    return {k: _comma_tuple(v, hints[k], k) if typing.get_origin(hints[k]) is tuple else v
            for k, v in options.items() if v is not None}


def _comma_tuple(text: str, hint: Any, name: str) -> tuple:
    """A tuple field's command-line value (``1,0.1,0``) as the field's type, or one error naming the option."""
    types = typing.get_args(hint)
    option = f"--{name.replace('_', '-')}"
    count = ("one", "two", "three", "four", "five")[len(types) - 1] if len(types) <= 5 else str(len(types))
    try:
        return tuple(t(x) for t, x in zip(types, text.split(","), strict=True))
    except ValueError:
        raise LfoError(f"{option} expects {count} numbers separated by commas (got {text!r})") from None

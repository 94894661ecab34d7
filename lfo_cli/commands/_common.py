"""Shared option aliases and the error boundary for every `lfo` command (hf-CLI style)."""

from __future__ import annotations

import functools
import json
import sys
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

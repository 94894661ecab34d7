"""`lfo gen-env` (issue #2): placeholder until the environment lands."""

from __future__ import annotations

import typer

from lfo_cli.commands._common import not_built


def gen_env(ctx: typer.Context) -> None:
    """Not built yet: exits 2 and says so."""
    not_built("gen-env", 2)

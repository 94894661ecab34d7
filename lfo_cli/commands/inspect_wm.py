"""`lfo inspect-wm` (issue #6): registered, not built yet."""

from __future__ import annotations

import typer

from lfo_cli.commands._common import not_built


def inspect_wm(ctx: typer.Context) -> None:
    """Not built yet: exits 2 and says so."""
    not_built("inspect-wm", 6)

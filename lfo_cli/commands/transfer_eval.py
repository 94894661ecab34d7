"""`lfo transfer-eval` (issue #6): registered, not built yet."""

from __future__ import annotations

import typer

from lfo_cli.commands._common import not_built


def transfer_eval(ctx: typer.Context) -> None:
    """Not built yet: exits 2 and says so."""
    not_built("transfer-eval", 6)

"""`lfo models` (issue #4): placeholder sub-app until it lands."""

from __future__ import annotations

import typer

from lfo_cli.commands._common import not_built

app = typer.Typer(help="Model registry: embedded tiers and their cache.", no_args_is_help=False)


@app.callback(invoke_without_command=True, context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def _not_built(ctx: typer.Context) -> None:
    not_built("models", 4)

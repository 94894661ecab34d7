"""`lfo models`: the embedded model tiers (micro, smollm2-135m) and their cache under $LFO_HOME."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lfo_cli import recipes
from lfo_cli.commands._common import ForceOpt, JsonOpt, handle_errors, print_json
from lfo_cli.errors import LfoError
from lfo_cli.models import cache
from lfo_cli.models.registry import REGISTRY, ensure_model, list_models
from lfo_cli.models.warmstart_cache import list_warmstarts

app = typer.Typer(
    help=(
        "Model registry: embedded tiers and their cache ($LFO_HOME, default ~/.cache/lfo).\n\n"
        "Examples:\n\n"
        "  lfo models list\n\n"
        "  lfo models build micro\n\n"
        "  lfo models build warmstart_micro_long --force\n\n"
        "  lfo models list --json"
    ),
    no_args_is_help=True,
)


def _human(n: int | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _params(n: int | None) -> str:
    if n is None:
        return "-"
    return f"{n / 1e6:.2f}M" if n >= 1e5 else f"{n:,}"


@app.command("list")
@handle_errors
def list_(json_out: JsonOpt = False) -> None:
    """List the embedded tiers (parameter count, size on disk, cache state) and the cached warm starts (SFT
    steps done of those their recipe plans, and whether each is complete). Reads no weights and no torch."""
    rows, warm = list_models(), list_warmstarts()
    if json_out:
        print_json({"models": rows, "warmstarts": warm})
        return
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(title="lfo models")
    for col in ("name", "parameters", "size", "cache", "description"):
        table.add_column(col)
    for r in rows:
        state = "[green]cached[/green]" if r["cached"] else "[yellow]not built[/yellow]"
        if r.get("error"):
            state = f"[red]{r['error']}[/red]"
        table.add_row(r["name"], _params(r["num_parameters"]), _human(r["size_bytes"]), state, r["description"])
    console.print(table)
    if warm:
        ws = Table(title="warm starts")
        for col in ("recipe", "key", "SFT steps", "threads", "state", "built", "minutes", "size"):
            ws.add_column(col)
        for r in warm:
            steps = "-" if r["steps"] is None else (f"{r['steps']}/{r['planned_steps']}" if r["planned_steps"]
                                                    else f"{r['steps']} (plan not recorded)")
            colour = {"complete": "green", "building": "yellow"}.get(r["state"], "red")
            colour = "yellow" if r["state"].startswith("interrupted") else colour
            ws.add_row(r["recipe"] or "-", r["key"], steps, str(r["threads"] or "-"),
                       f"[{colour}]{r['state']}[/{colour}]", (r["built_at"] or "-")[:16],
                       "-" if r["minutes"] is None else f"{r['minutes']:g}", _human(r["size_bytes"]))
        console.print(ws)
    cache_dir = rows[0]["path"].rsplit("/", 2)[0] if rows else ""
    console.print(f"cache: {cache_dir}")
    unfinished = ("complete", "building")
    if any(r["state"] not in unfinished and not r["state"].startswith("interrupted") for r in warm):
        console.print("a warm start that is not complete is refused; rebuild it: lfo models build RECIPE --force")
    if any(r["state"].startswith("interrupted") for r in warm):
        console.print("an interrupted build continues from its last checkpoint: lfo models build RECIPE")


@app.command("build")
@handle_errors
def build(
    name: Annotated[str, typer.Argument(help="An embedded tier (micro, smollm2-135m) or a warm-start recipe "
                                        "(e.g. warmstart_micro_long).")],
    force: ForceOpt = False,
    data_dir: Annotated[Path | None, typer.Option("--data-dir", help="World of a warm start (default: its "
                                                  "recipe's data.dir).")] = None,
    overrides: Annotated[list[str] | None, typer.Option("--set", help="Override a warm-start recipe value, "
                                                         "e.g. --set seed=3 (repeatable).")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Build (or rebuild with --force) a tier's or a warm start's cache entry; training builds them on demand.

    Examples:

      lfo models build micro

      lfo models build warmstart_demo --force

      lfo models build warmstart_textworld --set seed=3   # another draw of the same recipe
    """
    import time

    t0 = time.perf_counter()
    if name in REGISTRY:
        if data_dir is not None or overrides:
            raise LfoError("--data-dir and --set apply to warm-start recipes, not to embedded tiers")
        path = ensure_model(name, force=force)
    elif name.endswith((".yaml", ".yml")) or "/" in name or name in recipes.available_recipes():
        from lfo_cli.models.warmstart import ensure_warmstart  # imports torch and transformers

        path = ensure_warmstart(name, data_dir=data_dir, overrides=overrides, force=force).parent
    else:
        raise LfoError(f"unknown embedded model or warm-start recipe '{name}' (tiers: {', '.join(REGISTRY)}; "
                       f"warm starts: the warmstart_* recipes in `lfo train --list`)")
    info = cache.entry_info(path) or {}
    if json_out:
        print_json({"path": str(path), "seconds": round(time.perf_counter() - t0, 2), **info})
    elif name in REGISTRY:
        typer.echo(f"{name}: {path} ({_params(info.get('num_parameters'))} parameters)")
    else:
        typer.echo(f"{name}: {path} ({info.get('train/steps')} SFT steps)")

"""`lfo models`: the embedded model tiers (micro, smollm2-135m) and their cache under $LFO_HOME."""

from __future__ import annotations

from typing import Annotated

import typer

from lfo_cli.commands._common import ForceOpt, JsonOpt, handle_errors, print_json

app = typer.Typer(
    help=(
        "Model registry: embedded tiers and their cache ($LFO_HOME, default ~/.cache/lfo).\n\n"
        "Examples:\n\n"
        "  lfo models list\n\n"
        "  lfo models build micro\n\n"
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
    """List the embedded tiers with parameter count, size on disk and cache state."""
    from lfo_cli.models.registry import list_models

    rows = list_models()
    if json_out:
        print_json(rows)
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title="lfo models")
    for col in ("name", "parameters", "size", "cache", "description"):
        table.add_column(col)
    for r in rows:
        state = "[green]cached[/green]" if r["cached"] else "[yellow]not built[/yellow]"
        if r.get("error"):
            state = f"[red]{r['error']}[/red]"
        table.add_row(r["name"], _params(r["num_parameters"]), _human(r["size_bytes"]), state, r["description"])
    Console().print(table)
    Console().print(f"cache: {rows[0]['path'].rsplit('/', 1)[0] if rows else ''}")


@app.command("build")
@handle_errors
def build(
    name: Annotated[str, typer.Argument(help="Embedded tier: micro or smollm2-135m.")],
    force: ForceOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Build (or rebuild with --force) an embedded tier's cache entry; loading does this on demand."""
    import time

    from lfo_cli.models import cache
    from lfo_cli.models.registry import ensure_model

    t0 = time.perf_counter()
    path = ensure_model(name, force=force)
    info = cache.entry_info(path) or {}
    if json_out:
        print_json({"path": str(path), "seconds": round(time.perf_counter() - t0, 2), **info})
    else:
        typer.echo(f"{name}: {path} ({_params(info.get('num_parameters'))} parameters)")

"""`lfo ablate --grid NAME`: run every cell of an ablation grid as its own `lfo train` process."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lfo_cli.ablate.estimate import estimate, paste_command, wall_minutes
from lfo_cli.ablate.grid import cell_argv, grid_descriptions, load_grid
from lfo_cli.ablate.runner import (
    Lock,
    check_existing,
    finished_durations,
    install_sigterm_as_interrupt,
    is_complete,
    is_started,
    run_grid,
)
from lfo_cli.commands._common import JsonOpt, handle_errors, print_json
from lfo_cli.errors import LfoError

CONTEXT: dict = {}


@handle_errors
def ablate(
    grid: Annotated[
        str | None, typer.Option("--grid", help="Grid name in recipes/grids/ or a path to a grid YAML file.")
    ] = None,
    runs_dir: Annotated[
        Path | None, typer.Option("--runs-dir", help="Where the cells' run dirs go (default runs/grids/NAME).")
    ] = None,
    parallel: Annotated[int, typer.Option("--parallel", min=1, help="Cells run at the same time.")] = 1,
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help="Extra override for every cell, applied last, e.g. --set model.name=smollm2-135m."),
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Validate, list the cells and their commands; run nothing.")] = False,
    list_grids: Annotated[bool, typer.Option("--list", help="List the grids in recipes/grids/ with their descriptions and exit.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Run an ablation grid: each (cell, seed) is one `lfo train` subprocess.

    Complete cells are skipped, interrupted ones resumed (`lfo train --resume`), failed ones
    recorded (exit code, log) without stopping the rest. `RUNS_DIR/runs.csv` is rewritten after
    every cell. Exit code 0 when every cell is complete, 1 when some failed, 2 on a bad grid.

    Examples:

      lfo ablate --list

      lfo ablate --grid cpu_headline --dry-run

      lfo ablate --grid lambda_cpu --parallel 2

      lfo ablate --grid cpu_headline --set model.name=smollm2-135m --set model.warmstart=warmstart_smollm2 --runs-dir runs/grids/cpu_headline_smollm2
    """
    if list_grids:
        described = grid_descriptions()
        if json_out:
            print_json([{"name": n, "description": d} for n, d in described.items()])
        else:
            width = max(map(len, described), default=0)
            typer.echo("\n".join(f"{n:<{width}}  {d}" for n, d in described.items()))
        return
    if grid is None:
        raise LfoError("--grid NAME is required (see `lfo ablate --list`)")

    g = load_grid(grid, extra_set=list(set_ or []))
    runs = runs_dir or Path("runs") / "grids" / g.name
    from lfo_cli.ablate.cells import expand  # imports TRL (the grpo recipe kind)

    cells = expand(g, runs)  # validates every cell's recipe before anything launches
    check_existing(cells)

    if dry_run:
        _dry_run(g, cells, runs, parallel, json_out)
        return

    install_sigterm_as_interrupt()
    with Lock(runs / ".ablate.lock"):
        try:
            records = run_grid(g, cells, runs, parallel=parallel, show=not json_out)
        except KeyboardInterrupt:
            typer.echo(f"interrupted; progress is in {runs / 'runs.csv'} (re-run the same command to resume)", err=True)
            raise typer.Exit(130) from None
    counts: dict[str, int] = {}
    for r in records:
        counts[r.status] = counts.get(r.status, 0) + 1
    failed = [r for r in records if r.status != "complete"]
    if json_out:
        print_json({"grid": str(g.path), "runs_dir": str(runs), "runs_csv": str(runs / "runs.csv"), "counts": counts,
                    "failed": [{"cell_id": r.cell.cell_id, "exit_code": r.exit_code, "log": str(r.log)} for r in failed]})
    else:
        typer.echo(f"{counts.get('complete', 0)}/{len(records)} cells complete; table: {runs / 'runs.csv'}")
        for r in failed:
            typer.echo(f"  {r.status}: {r.cell.cell_id} (exit code {r.exit_code}, log {r.log})")
    if failed:
        raise typer.Exit(1)


def _dry_run(g, cells, runs: Path, parallel: int, json_out: bool) -> None:
    """Each cell's status, paste-able command and estimated minutes; the wall time of what is left."""
    statuses = {c.cell_id: "complete" if is_complete(c.run_dir) else ("started" if is_started(c.run_dir) else "pending")
                for c in cells}
    ests = estimate(cells, statuses, finished_durations(runs / "runs.csv"))
    wall = wall_minutes(ests, parallel)
    measured = sum(e.source == "done" for e in ests)
    rows = [{"cell_id": c.cell_id, "seed": c.seed, "values": c.values, "status": statuses[c.cell_id],
             "run_dir": str(c.run_dir), "argv": cell_argv(g, c, resume=statuses[c.cell_id] == "started"),
             "minutes_left": e.minutes, "estimate_from": e.source} for c, e in zip(cells, ests, strict=True)]
    for r in rows:
        r["command"] = paste_command(r["argv"])
    if json_out:
        print_json({"grid": str(g.path), "runs_dir": str(runs), "parallel": parallel, "wall_minutes": wall,
                    "cells": rows})
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console()
    table = Table(title=f"grid {g.name}: {len(cells)} runs ({len(g.conditions)} cells x {len(g.seeds)} seeds), "
                        f"base {g.base}")
    for col in ("cell", "seed", "status", "min left"):
        table.add_column(col)
    for r in rows:
        left = "-" if r["minutes_left"] is None else f"{r['minutes_left']:.0f}"
        table.add_row(Text(r["cell_id"]), str(r["seed"]), r["status"], left)
    console.print(table)
    for r in rows:
        if r["status"] != "complete":
            typer.echo(r["command"])
    if wall is not None:
        typer.echo(f"estimated wall time of the {len(cells) - measured} cells left at --parallel {parallel}: "
                   f"{wall / 60:.1f} h (from the durations of {measured} finished cells in {runs / 'runs.csv'})")
    else:
        typer.echo(f"no estimate: no cell of this grid has finished yet ({runs / 'runs.csv'} records each cell's "
                   "duration once it has)")

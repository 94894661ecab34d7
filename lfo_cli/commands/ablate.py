"""`lfo ablate --grid NAME`: run every cell of an ablation grid as its own `lfo train` process."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lfo_cli.ablate.cells import expand
from lfo_cli.ablate.estimate import estimate, from_step_time, paste_command, wall_minutes
from lfo_cli.ablate.grid import Cell, cell_argv, grid_descriptions, load_grid
from lfo_cli.ablate.launcher_base import Launcher
from lfo_cli.ablate.launchers import LAUNCHERS, launch, load_settings, require_extra, statuses
from lfo_cli.ablate.runner import check_existing, finished_durations, install_sigterm_as_interrupt
from lfo_cli.ablate.state import is_complete, is_started
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
    parallel: Annotated[int, typer.Option("--parallel", "--max-parallel", min=1,
                                          help="Cells run at the same time (SLURM: the array's throttle).")] = 1,
    launcher: Annotated[str, typer.Option("--launcher", help="Where cells run: local (this machine), slurm "
                                          "(submitit; the 'slurm' extra) or ray (the 'ray' extra).")] = "local",
    status: Annotated[bool, typer.Option("--status", help="Show every cell's state (pending, queued, running, done, "
                                         "failed, interrupted) with its job id; launch nothing.")] = False,
    detach: Annotated[bool, typer.Option("--detach", help="SLURM: return once the array is queued (`--status` "
                                         "follows it) instead of waiting for it.")] = False,
    cluster_config: Annotated[Path | None, typer.Option("--cluster-config", help="A cluster.yaml with slurm:/ray: "
                              "sections (also read: ~/.config/lfo/cluster.yaml, NAME.cluster.yaml beside the grid).")] = None,
    partition: Annotated[str | None, typer.Option("--partition", help="SLURM partition.")] = None,
    account: Annotated[str | None, typer.Option("--account", help="SLURM account.")] = None,
    time_min: Annotated[int | None, typer.Option("--time-min", help="SLURM time limit per cell (minutes); a cell "
                                                 "past it is requeued and resumes.")] = None,
    cpus: Annotated[int | None, typer.Option("--cpus", help="CPUs per cell on a cluster (default: the grid's "
                                             "resources.cpus, else 1).")] = None,
    gpus: Annotated[int | None, typer.Option("--gpus", help="GPUs per cell on a cluster.")] = None,
    mem_gb: Annotated[float | None, typer.Option("--mem-gb", help="Memory per cell in GB (SLURM).")] = None,
    sbatch: Annotated[list[str] | None, typer.Option("--sbatch", help="Extra #SBATCH option as key=value "
                                                     "(repeatable), e.g. --sbatch constraint=a100.")] = None,
    setup: Annotated[list[str] | None, typer.Option("--setup", help="A shell line each SLURM task runs first "
                                                    "(repeatable), e.g. --setup 'module load cuda'.")] = None,
    ray_address: Annotated[str | None, typer.Option("--ray-address", help="Ray cluster (host:port or auto); "
                                                    "default: a local one on 127.0.0.1.")] = None,
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

      lfo ablate --grid reading_cpu --launcher slurm --max-parallel 8 --partition cpu --time-min 60

      lfo ablate --grid reading_cpu --launcher ray --ray-address 10.0.0.5:6379

      lfo ablate --status --grid reading_cpu

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
    if status:
        _status(grid, runs_dir, json_out)
        return
    if grid is None:
        raise LfoError("--grid NAME is required (see `lfo ablate --list`)")
    if detach and launcher != "slurm":
        raise LfoError("--detach is for --launcher slurm (a local or Ray grid lives as long as its driver)")

    g = load_grid(grid, extra_set=list(set_ or []))
    runs = runs_dir or Path("runs") / "grids" / g.name
    settings = load_settings(launcher, g, cluster_config, partition=partition, account=account, time_min=time_min,
                             cpus=cpus, gpus=gpus, mem_gb=mem_gb, sbatch=sbatch, setup=setup, address=ray_address)
    engine = _make_launcher(launcher, settings)  # a missing extra: one line naming the pip command
    cells = expand(g, runs)  # validates every cell's recipe before anything launches
    check_existing(cells)

    if dry_run:
        _dry_run(g, cells, runs, parallel, json_out)
        return

    install_sigterm_as_interrupt()
    try:
        records = launch(engine, g, cells, runs, parallel=parallel, show=not json_out, detach=detach)
    except KeyboardInterrupt:
        left = "" if launcher == "local" else (" (SLURM jobs keep running: `lfo ablate --status`)"
                                               if launcher == "slurm" else " (the Ray tasks ended with it)")
        typer.echo(f"interrupted{left}; progress is in {runs / 'runs.csv'} (re-run the same command to resume)",
                   err=True)
        raise typer.Exit(130) from None
    if detach:
        queued = sum(r.status in ("queued", "running") for r in records)
        msg = f"{queued} cell(s) queued on SLURM; follow them with `lfo ablate --status --runs-dir {runs}`"
        print_json({"runs_dir": str(runs), "queued": queued}) if json_out else typer.echo(msg)
        return
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


def _make_launcher(name: str, settings):
    """The launcher called ``name``; its engine is imported only here (``lfo --help`` and local import none)."""
    if name not in LAUNCHERS:
        raise LfoError(f"--launcher must be one of {', '.join(LAUNCHERS)}, got '{name}'")
    require_extra(name)
    if name == "slurm":
        from lfo_cli.ablate.slurm import SlurmLauncher

        return SlurmLauncher(settings)
    if name == "ray":
        from lfo_cli.ablate.ray_cluster import RayLauncher

        return RayLauncher(settings)
    return Launcher(settings)


def _cells_of(grid: str | None, runs_dir: Path | None) -> tuple[Path, list[Cell]]:
    """The runs dir and its cells: from its ``runs.csv`` (every launch writes it), else from the grid file."""
    g = load_grid(grid) if grid is not None else None
    runs = Path(runs_dir) if runs_dir is not None else Path("runs") / "grids" / g.name
    table = runs / "runs.csv"
    if table.is_file():
        import csv

        with table.open(encoding="utf-8", newline="") as fh:
            rows = [r for r in csv.DictReader(fh) if r.get("cell_id")]
        return runs, [Cell(cell_id=r["cell_id"], condition=r.get("condition", ""), values={},
                           seed=int(r["seed"]) if str(r.get("seed", "")).isdigit() else -1, overrides=[],
                           run_dir=Path(r["run_dir"]) if r.get("run_dir") else runs / r["cell_id"]) for r in rows]
    if g is None:
        raise LfoError(f"{runs} holds no runs.csv: nothing was launched there (give --grid NAME to list its cells)")
    return runs, expand(g, runs, validate=False)


def _status(grid: str | None, runs_dir: Path | None, json_out: bool) -> None:
    """Every cell's state, from the runs dir (and SLURM's queue for SLURM jobs); never refused, never launches."""

    if grid is None and runs_dir is None:
        raise LfoError("--status needs --grid NAME or --runs-dir DIR")
    runs, cells = _cells_of(grid, runs_dir)
    sts = statuses(cells, runs)
    counts: dict[str, int] = {}
    for s in sts:
        counts[s.state] = counts.get(s.state, 0) + 1
    if json_out:
        print_json({"runs_dir": str(runs), "counts": counts, "cells": [s.as_dict() for s in sts]})
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(title=f"{runs}: " + ", ".join(f"{n} {k}" for k, n in counts.items()))
    for col in ("cell", "state", "launcher", "job", "note"):
        table.add_column(col, overflow="fold")
    for s in sts:
        table.add_row(Text(s.cell_id), s.state, s.launcher or "-", s.job_id or "-", Text(s.note))
    Console(width=160).print(table)


def _dry_run(g, cells, runs: Path, parallel: int, json_out: bool) -> None:
    """Each cell's status, paste-able command and estimated minutes; the wall time of what is left."""
    statuses = {c.cell_id: "complete" if is_complete(c.run_dir) else ("started" if is_started(c.run_dir) else "pending")
                for c in cells}
    ests = estimate(cells, statuses, finished_durations(runs / "runs.csv"))
    measured = sum(e.source == "done" for e in ests)
    from_steps = g.estimate is not None and any(e.minutes is None for e in ests)
    if from_steps:  # nothing of this grid finished yet: a step time measured elsewhere (the grid's `estimate`)
        ests = from_step_time(cells, statuses, g.estimate.step_s)
    wall = wall_minutes(ests, parallel)
    left_h = sum(e.minutes or 0 for e in ests) / 60 if wall is not None else None
    device_hours = None if left_h is None else left_h * (g.resources.gpus or g.resources.cpus)
    unit = "GPU-hours" if g.resources.gpus else "CPU-hours"
    rows = [{"cell_id": c.cell_id, "seed": c.seed, "values": c.values, "status": statuses[c.cell_id],
             "run_dir": str(c.run_dir), "argv": cell_argv(g, c, resume=statuses[c.cell_id] == "started"),
             "minutes_left": e.minutes, "estimate_from": e.source} for c, e in zip(cells, ests, strict=True)]
    for r in rows:
        r["command"] = paste_command(r["argv"])
    if json_out:
        print_json({"grid": str(g.path), "runs_dir": str(runs), "parallel": parallel, "wall_minutes": wall,
                    unit.lower().replace("-", "_"): device_hours,
                    "estimate_from": "step time" if from_steps else "finished cells", "cells": rows})
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
    if wall is not None and from_steps:
        steps = sorted({(c.resolved.get("trainer") or {}).get("max_steps") for c in cells} - {None})
        typer.echo(f"estimated from a measured step time, {g.estimate.step_s:g} s ({g.estimate.source}): "
                   f"{len(cells) - measured} cells x {'/'.join(map(str, steps))} training steps = {device_hours:.1f} "
                   f"{unit} ({g.resources.gpus or g.resources.cpus} per cell), {wall / 60:.1f} h of wall time at "
                   f"--parallel {parallel}; evaluations and warm-start builds are not in it")
    elif wall is not None:
        typer.echo(f"estimated wall time of the {len(cells) - measured} cells left at --parallel {parallel}: "
                   f"{wall / 60:.1f} h, {device_hours:.1f} {unit} (from the durations of {measured} finished cells in "
                   f"{runs / 'runs.csv'})")
    else:
        typer.echo(f"no estimate: no cell of this grid has finished yet ({runs / 'runs.csv'} records each cell's "
                   "duration once it has)")

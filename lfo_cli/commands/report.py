"""`lfo report [RUNS...] --out reports/`: tables, figures and index.md computed from run dirs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lfo_cli.commands._common import JsonOpt, handle_errors, print_json
from lfo_cli.report.build import build_report

CONTEXT: dict = {}


@handle_errors
def report(
    runs: Annotated[
        list[Path] | None,
        typer.Argument(help="Run dirs, or folders scanned recursively for run dirs (default: runs/)."),
    ] = None,
    out: Annotated[Path, typer.Option("--out", help="Report directory (index.md, PNG + CSV per figure).")] = Path("reports"),
    corr_window: Annotated[
        int | None,
        typer.Option("--corr-window", min=1, help="Steps after step N over which the policy learning rate is measured "
                     "(default: 50, or a fifth of the median run length when runs are shorter)."),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Collect run dirs into one report: learning curves, sample efficiency with bootstrap CIs,
    ablation tables, WM-accuracy correlation, gradient norms, difficulty, behaviour, transfer, WMIL.

    Re-running on the same runs writes byte-identical files.

    Examples:

      lfo report

      lfo report runs/grids/cpu_headline --out reports/cpu_headline

      lfo report runs/grids/lambda_cpu runs/grids/rank_cpu --out reports/ablations --json
    """
    summary = build_report(list(runs or [Path("runs")]), out, corr_window=corr_window)
    if json_out:
        print_json({"out": str(out), **summary})
    else:
        typer.echo(f"wrote {out / 'index.md'} ({summary['runs']} runs, {len(summary['files'])} files)")
        for gain in summary.get("gains", []):  # one run per condition: its gain over its own start, last
            typer.echo(f"{gain['run']}: {gain['sentence']}")

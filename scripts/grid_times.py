"""How long a grid's runs took, each on its own thread, counting a run that stopped and resumed as one run.

    python scripts/grid_times.py ~/.cache/lfo/grids/reading_cpu --parallel 2 --csv reading_times.csv

Per cell of `RUNS_DIR/runs.csv`: the invocations its log records (`lfo ablate` writes a `=== <time> start|resume`
line before each), and its minutes:
- `measured`: one invocation, `lfo ablate`'s wall-clock duration of it;
- `estimated`: resumed: its timed work (`lfo_cli.run_record.run_seconds`: its steps' `step_time` and, in runs
  that log it, its evaluations' `eval_seconds`, each step once) times the grid's median ratio of wall time to
  timed work over its measured cells (start-up, loading and checkpoints included).
Then the grid's totals: CPU-hours (one thread per run), the active wall time at `--parallel` runs at once, and
the calendar span from the first start to the last finished run (sessions apart included). Incomplete cells are
listed and left out of the totals.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import statistics
import sys
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from lfo_cli.run_record import run_seconds  # noqa: E402  (the standard library only)

MARKER = re.compile(r"^=== (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) (start|resume):")


def _rows(path: Path) -> list[dict]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def timed_seconds(run: Path) -> float | None:
    """The run's steps' and evaluations' seconds as its metrics.jsonl keeps them (None without metrics)."""
    metrics = run / "metrics.jsonl"
    return (run_seconds(_rows(metrics)) or None) if metrics.is_file() else None


def _summary(run: Path) -> dict:
    try:
        return json.loads((run / "summary.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise SystemExit(f"error: {run / 'summary.json'} is not readable JSON ({exc})") from None


def cell_times(runs_dir: Path) -> list[dict]:
    """One dict per runs.csv row: cell, status, invocations, first start, minutes and how they were got."""
    with (runs_dir / "runs.csv").open(encoding="utf-8", newline="") as fh:
        cells = list(csv.DictReader(fh))
    out = []
    for c in cells:
        log = runs_dir / "logs" / f"{c['cell_id']}.log"
        starts = [m.group(1) for line in (log.read_text(encoding="utf-8").splitlines() if log.is_file() else [])
                  if (m := MARKER.match(line))]
        run = Path(c["run_dir"]) if c.get("run_dir") else runs_dir / c["cell_id"]
        if not run.is_dir():  # a relative or moved run_dir: the cell's dir beside runs.csv
            run = runs_dir / c["cell_id"]
        summary = _summary(run)
        out.append({"cell_id": c["cell_id"], "condition": c.get("condition", ""), "seed": c.get("seed", ""),
                    "status": c.get("status", ""), "invocations": len(starts), "first_start": starts[0] if starts else "",
                    "last_duration_s": float(c["duration_s"]) if c.get("duration_s") else None,
                    "timed_s": timed_seconds(run),
                    "finished": run / "summary.json" if summary.get("status") == "complete" else None})
    measured = [r for r in out if r["status"] == "complete" and r["invocations"] == 1 and r["last_duration_s"]]
    ratios = [r["last_duration_s"] / r["timed_s"] for r in measured if r["timed_s"]]
    ratio = statistics.median(ratios) if ratios else None
    for r in out:
        if r["status"] != "complete":
            r["minutes"], r["method"] = None, "incomplete"
        elif r["invocations"] <= 1 and r["last_duration_s"]:
            r["minutes"], r["method"] = r["last_duration_s"] / 60, "measured"
        elif ratio and r["timed_s"]:
            r["minutes"], r["method"] = r["timed_s"] * ratio / 60, "estimated"
        else:
            r["minutes"], r["method"] = None, "unknown"
    return out


def totals(rows: list[dict], parallel: int) -> dict:
    done = [r for r in rows if r["minutes"] is not None]
    minutes = sorted(r["minutes"] for r in done)
    starts = [datetime.fromisoformat(r["first_start"]) for r in rows if r["first_start"]]
    ends = [datetime.fromtimestamp(r["finished"].stat().st_mtime) for r in done if r["finished"]]
    return {"cells": len(rows), "timed": len(done), "by_method": {m: sum(r["method"] == m for r in rows)
                                                                  for m in sorted({r["method"] for r in rows})},
            "minutes_min": minutes[0] if minutes else None, "minutes_median": statistics.median(minutes) if minutes else None,
            "minutes_max": minutes[-1] if minutes else None, "cpu_hours": sum(minutes) / 60,
            "active_wall_hours": sum(minutes) / 60 / parallel,
            "calendar_span_hours": (max(ends) - min(starts)).total_seconds() / 3600 if starts and ends else None}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs_dir", type=Path, help="a grid's --runs-dir (runs.csv, logs/, one dir per cell)")
    ap.add_argument("--parallel", type=int, default=2, help="runs at once, for the active wall time (default 2)")
    ap.add_argument("--csv", type=Path, help="write the per-cell table here")
    args = ap.parse_args(argv)
    if not (args.runs_dir / "runs.csv").is_file():
        print(f"error: {args.runs_dir} has no runs.csv (not an `lfo ablate` runs dir)", file=sys.stderr)
        return 2
    rows = cell_times(args.runs_dir)
    if args.csv:
        keys = ["cell_id", "condition", "seed", "status", "invocations", "first_start", "minutes", "method"]
        with args.csv.open("w", encoding="utf-8", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=keys, extrasaction="ignore", lineterminator="\n")
            w.writeheader()
            w.writerows({**r, "minutes": "" if r["minutes"] is None else f"{r['minutes']:.1f}"} for r in rows)
    t = totals(rows, args.parallel)
    fmt = lambda v: "n/a" if v is None else f"{v:.1f}"  # noqa: E731
    print(f"{t['timed']}/{t['cells']} cells timed ({', '.join(f'{k} {v}' for k, v in t['by_method'].items())}); "
          f"minutes per run {fmt(t['minutes_min'])} / {fmt(t['minutes_median'])} / {fmt(t['minutes_max'])} "
          f"(min / median / max); {t['cpu_hours']:.1f} CPU-hours; {t['active_wall_hours']:.1f} h of wall time at "
          f"{args.parallel} at once; calendar span {fmt(t['calendar_span_hours'])} h")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Run a grid's cells as subprocesses, N at a time; resumable, failure-tolerant, recorded in runs.csv.

State lives in the runs dir, never only in memory:

- a cell is *complete* when its run dir holds ``summary.json`` with ``"status": "complete"`` (what
  `lfo train` writes last) or a ``.complete`` marker; complete cells are skipped on every re-run;
- a started but incomplete cell (its run dir has ``recipe.yaml``) is continued with
  ``lfo train --resume RUN_DIR``; a cell never started runs ``lfo train --recipe ...``;
- ``runs.csv`` (cell, axis values, seed, status, exit code, duration, run dir, log) is rewritten
  atomically after every cell finishes, so a kill leaves a consistent table;
- each attempt's stdout/stderr is appended to ``logs/CELL_ID.log``;
- ``.ablate.lock`` (an flock, released by the kernel when the process dies) stops two `lfo ablate`
  from driving the same runs dir;
- ``cells/CELL_ID.json`` holds each cell's state for `lfo ablate --status`, as every launcher writes it
  (:mod:`lfo_cli.ablate.state`);
- children get SIGTERM when `lfo ablate` dies (Linux ``PR_SET_PDEATHSIG``), so killing the driver
  leaves no orphan training that a re-run would race with.
"""

from __future__ import annotations

import csv
import io
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from lfo_cli import run_record as rr
from lfo_cli.ablate.cell_task import pdeathsig
from lfo_cli.ablate.grid import Cell, Grid, cell_argv, format_value
from lfo_cli.ablate.state import Lock, is_complete, is_started, last_line, log_path, write_marker  # noqa: F401 - Lock re-exported
from lfo_cli.errors import LfoError
from lfo_cli.io import atomic_write_text
from lfo_cli.progress import ProgressLog


def check_existing(cells: list[Cell]) -> None:
    """A run dir that already holds a run must hold *this* cell's recipe (else results would mix)."""
    for cell in cells:
        recorded = cell.run_dir / rr.RECIPE_FILE
        if not cell.resolved or not recorded.is_file():
            continue
        try:
            on_disk = yaml.safe_load(recorded.read_text(encoding="utf-8"))
        except yaml.YAMLError:
            raise LfoError(f"{recorded}: corrupt recipe; move the run dir away and re-run") from None
        if on_disk != cell.resolved:
            diff = sorted(k for k in set(on_disk or {}) | set(cell.resolved)
                          if (on_disk or {}).get(k) != cell.resolved.get(k))
            raise LfoError(
                f"{cell.run_dir} holds a run with a different recipe (differs in: {', '.join(diff)}); "
                "use another --runs-dir for a changed grid"
            )


@dataclass
class Record:
    cell: Cell
    status: str = "pending"  # pending | running | complete | failed | interrupted
    exit_code: int | None = None
    duration_s: float | None = None
    note: str = ""

    @property
    def log(self) -> Path:
        return log_path(self.cell.run_dir.parent, self.cell.cell_id)


def _previous(runs_csv: Path) -> dict[str, dict]:
    if not runs_csv.is_file():
        return {}
    try:
        with runs_csv.open(encoding="utf-8", newline="") as fh:
            return {row["cell_id"]: row for row in csv.DictReader(fh) if row.get("cell_id")}
    except (OSError, csv.Error, KeyError):
        return {}


def finished_durations(runs_csv: Path) -> dict[str, float]:
    """Seconds each complete cell took, from ``runs.csv`` (what `ablate --dry-run` estimates from)."""
    out = {}
    for cid, row in _previous(runs_csv).items():
        try:
            if row.get("status") == "complete" and row.get("duration_s"):
                out[cid] = float(row["duration_s"])
        except ValueError:
            continue
    return out


def write_runs_csv(path: Path, grid: Grid, records: list[Record]) -> None:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["cell_id", "condition", *grid.keys, "seed", "status", "exit_code", "duration_s", "run_dir", "log",
                "note"])
    for r in records:
        c = r.cell
        w.writerow([c.cell_id, c.condition, *[format_value(c.values[k]) if k in c.values else "" for k in grid.keys],
                    c.seed, r.status, "" if r.exit_code is None else r.exit_code,
                    "" if r.duration_s is None else f"{r.duration_s:.1f}", str(c.run_dir), str(r.log), r.note])
    atomic_write_text(path, buf.getvalue())


def child_env(parallel: int) -> dict[str, str]:
    """The cell's environment: N cells at a time share the cores (``OMP_NUM_THREADS`` = cores // N).

    Without it every child starts torch with one thread per core, and N children oversubscribe the
    machine. An ``OMP_NUM_THREADS`` already set by the user wins.
    """
    env = dict(os.environ)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    env.setdefault("OMP_NUM_THREADS", str(max(1, cores // parallel)))
    return env


def run_grid(grid: Grid, cells: list[Cell], runs_dir: Path, parallel: int = 1, show: bool = True,
             poll_s: float = 0.2) -> list[Record]:
    """Run every incomplete cell; return one :class:`Record` per cell (in grid order)."""
    if parallel < 1:
        raise LfoError(f"--parallel must be >= 1, got {parallel}")
    runs_dir = Path(runs_dir)
    runs_csv = runs_dir / "runs.csv"
    (runs_dir / "logs").mkdir(parents=True, exist_ok=True)
    previous = _previous(runs_csv)
    records = []
    for cell in cells:
        rec = Record(cell)
        if is_complete(cell.run_dir):
            rec.status = "complete"
            old = previous.get(cell.cell_id, {})
            rec.exit_code = int(old["exit_code"]) if old.get("exit_code", "").lstrip("-").isdigit() else None
            rec.duration_s = float(old["duration_s"]) if old.get("duration_s") else None
            rec.note = old.get("note", "") or "complete before this invocation"
        records.append(rec)
    todo = [r for r in records if r.status != "complete"]
    write_runs_csv(runs_csv, grid, records)

    running: dict[str, tuple[Record, subprocess.Popen, float, object]] = {}
    failed = 0
    done = len(records) - len(todo)
    # A bar on a terminal, plain lines with cells done/total, rate and ETA in a log (ProgressLog draws
    # without a refresh thread, so forking children with preexec_fn is safe).
    with ProgressLog(f"ablate {grid.name}", len(records), unit="cell", start=done, stream=sys.stderr,
                     enabled=show) as bar:
        queue = list(todo)
        try:
            while queue or running:
                while queue and len(running) < parallel:
                    rec = queue.pop(0)
                    resume = is_started(rec.cell.run_dir)
                    argv = cell_argv(grid, rec.cell, resume=resume)
                    rec.log.parent.mkdir(parents=True, exist_ok=True)
                    logfh = rec.log.open("a", encoding="utf-8")
                    logfh.write(f"=== {time.strftime('%Y-%m-%d %H:%M:%S')} {'resume' if resume else 'start'}: "
                                f"{' '.join(argv)}\n")
                    logfh.flush()
                    proc = subprocess.Popen(argv, stdout=logfh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            env=child_env(parallel), preexec_fn=pdeathsig if sys.platform.startswith("linux") else None)
                    rec.status, rec.note = "running", ("resumed" if resume else "")
                    write_marker(runs_dir, rec.cell.cell_id, launcher="local", state="running", job_id=str(proc.pid),
                                 pid=proc.pid, exit_code=None, last_line="")
                    running[rec.cell.cell_id] = (rec, proc, time.monotonic(), logfh)
                    write_runs_csv(runs_csv, grid, records)
                    bar.update(done, note=f"failed {failed} · running: {', '.join(running) or '-'}")
                for cid in list(running):
                    rec, proc, t0, logfh = running[cid]
                    code = proc.poll()
                    if code is None:
                        continue
                    logfh.close()
                    del running[cid]
                    rec.exit_code, rec.duration_s = code, time.monotonic() - t0
                    if code == 0 and is_complete(rec.cell.run_dir):
                        rec.status = "complete"
                    else:
                        rec.status = "failed"
                        failed += 1
                        rec.note = (f"exit code {code}; see {rec.log}" if code != 0 else
                                    f"exit code 0 but no summary.json with status complete; see {rec.log}")
                    write_marker(runs_dir, cid, state="done" if rec.status == "complete" else "failed", exit_code=code,
                                 last_line="" if rec.status == "complete" else last_line(rec.log))
                    write_runs_csv(runs_csv, grid, records)
                    done += 1
                    bar.update(done, note=f"failed {failed} · running: {', '.join(running) or '-'}")
                bar.refresh()
                if running:
                    time.sleep(poll_s)
        except KeyboardInterrupt:
            for rec, proc, t0, logfh in running.values():
                proc.terminate()
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                logfh.close()
                rec.status, rec.exit_code = "interrupted", proc.returncode
                rec.duration_s = time.monotonic() - t0
                rec.note = "lfo ablate was interrupted; re-run to resume"
            write_runs_csv(runs_csv, grid, records)
            raise
    return records


def install_sigterm_as_interrupt() -> None:
    """SIGTERM to `lfo ablate` stops it like Ctrl-C: children terminated, runs.csv written."""

    def handler(signum, frame):
        raise KeyboardInterrupt

    try:
        signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread (e.g. under a test runner thread)
        pass

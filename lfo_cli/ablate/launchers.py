"""Where a grid's cells run: this machine (``local``), a SLURM cluster through submitit, or a Ray cluster.

Every launcher runs the same thing, one `lfo train` per cell in the cell's own run dir under one runs dir
(shared by every worker), with one set of semantics (:mod:`lfo_cli.ablate.state`): a finished cell never
runs again, a started one resumes from its last checkpoint, a failed one is marked failed with its log's
last line while the others go on, and `lfo ablate --status` reads the same files whichever launched them.
lfo schedules nothing itself: the engine queues, throttles, requeues and retries.

- ``local`` (:class:`~lfo_cli.ablate.launcher_base.Launcher`): :func:`lfo_cli.ablate.runner.run_grid`, a
  process pool of ``--parallel`` cells on this machine.
- ``slurm`` (:mod:`lfo_cli.ablate.slurm`, the ``slurm`` extra): one submitit job array per invocation, ``--max-parallel`` its throttle (``%N``); each task is a
  :class:`~submitit.helpers.Checkpointable`, so a task that SLURM preempts or times out is requeued and its
  cell resumes. The driver waits and shows progress (``--detach`` returns once the array is queued); job
  states come from ``squeue`` (``sacct`` needs SLURM's accounting database, which many clusters and
  scripts/slurm_local.sh lack) and from the cells' markers.
- ``ray`` (:mod:`lfo_cli.ablate.ray_cluster`, the ``ray`` extra): one task per cell on the cluster at
  ``--ray-address`` (default: a Ray instance started for the invocation), ``num_cpus``/``num_gpus`` from the
  grid's resources, at most ``--max-parallel`` at a time, retried when its worker dies. Ray ends a driver's
  tasks with the driver, so the driver waits.

The engines are imported only by the command that picks them (``lfo --help`` and the local launcher import
neither).

Cluster settings come, lowest first, from the user's ``~/.config/lfo/cluster.yaml``, a ``NAME.cluster.yaml``
beside the grid file, ``--cluster-config FILE`` and the command line; a grid's ``resources`` give each cell's
CPUs, GPUs, memory and time limit unless those override them.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

from lfo_cli.ablate.grid import Cell, Grid
from lfo_cli.ablate.launcher_base import ClusterSettings, Launcher
from lfo_cli.ablate.runner import Record, run_grid, write_runs_csv
from lfo_cli.ablate.state import (
    LOCK_FILE,
    CellStatus,
    Lock,
    cell_status,
    lock_held,
    read_marker,
)
from lfo_cli.errors import LfoError
from lfo_cli.progress import ProgressLog
from lfo_cli.recipes import read_yaml_mapping

LAUNCHERS = ("local", "slurm", "ray")
EXTRA = {"slurm": ("submitit", "slurm"), "ray": ("ray", "ray")}  # launcher -> (module, lfo's extra)


def user_config() -> Path:
    """The user's cluster.yaml: ``$XDG_CONFIG_HOME/lfo/cluster.yaml`` (default ``~/.config/lfo/cluster.yaml``)."""
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "lfo" / "cluster.yaml"
FINAL = ("done", "failed", "interrupted")


_SECTION_KEYS = {"slurm": {"partition", "account", "qos", "time_min", "cpus", "gpus", "mem_gb", "sbatch", "setup"},
                 "ray": {"address", "cpus", "gpus", "max_retries"}}


def cluster_files(grid: Grid, explicit: Path | None) -> list[Path]:
    """The cluster.yaml files that apply, lowest precedence first."""
    files = [user_config(), grid.path.with_name(f"{grid.path.stem}.cluster.yaml")]
    if explicit is not None:
        if not Path(explicit).is_file():
            raise LfoError(f"--cluster-config {explicit}: no such file")
        files.append(Path(explicit))
    return [f for f in files if f.is_file()]


def load_settings(launcher: str, grid: Grid, explicit: Path | None = None, **cli) -> ClusterSettings:
    """Settings for ``launcher``: the cluster files' section for it, then the command line's non-None values."""
    merged: dict = {}
    for f in cluster_files(grid, explicit):
        data = read_yaml_mapping(f, "cluster config", " with 'slurm:' and/or 'ray:' sections")
        unknown = sorted(set(data) - set(_SECTION_KEYS))
        if unknown:
            raise LfoError(f"{f}: unknown section(s) {', '.join(unknown)} (known: slurm, ray)")
        section = data.get(launcher) or {}
        if not isinstance(section, dict):
            raise LfoError(f"{f}: '{launcher}' must be a mapping of settings")
        bad = sorted(set(section) - _SECTION_KEYS.get(launcher, set()))
        if bad:
            raise LfoError(f"{f}: {launcher}: unknown setting(s) {', '.join(bad)} "
                           f"(known: {', '.join(sorted(_SECTION_KEYS[launcher]))})")
        merged.update(section)
    merged.update({k: v for k, v in cli.items() if v not in (None, [], ())})
    known = {f.name for f in fields(ClusterSettings)}
    try:
        s = ClusterSettings(**{k: v for k, v in merged.items() if k in known})
    except TypeError as exc:
        raise LfoError(f"cluster settings: {exc}") from None
    for key in ("sbatch", "setup"):
        value = getattr(s, key)
        if isinstance(value, str):
            setattr(s, key, [value])
        elif not isinstance(value, list) or not all(isinstance(x, str) for x in value):
            raise LfoError(f"cluster settings: {key} is a list of strings, got {value!r}")
    for key in ("cpus", "time_min", "max_retries"):
        value = getattr(s, key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < (0 if key == "max_retries" else 1)):
            raise LfoError(f"cluster settings: {key} must be an integer >= {0 if key == 'max_retries' else 1}, got {value!r}")
    return s


def require_extra(launcher: str) -> None:
    """One line naming the pip command when the launcher's engine is not installed."""
    if launcher not in EXTRA:
        return
    module, extra = EXTRA[launcher]
    if importlib.util.find_spec(module) is None:
        raise LfoError(f"--launcher {launcher} needs {module}: pip install 'lfo[{extra}]' (or pip install {module})")


# ---- engines: what each says of its jobs ------------------------------------------------------------------
def squeue_states(job_ids: list[str]) -> dict[str, str]:
    """SLURM's view of these array tasks: job id -> queued | running, for the tasks it still holds."""
    arrays = sorted({j.split("_")[0] for j in job_ids if j})
    if not arrays:
        return {}
    if shutil.which("squeue") is None:
        raise LfoError("squeue is not on PATH: run `lfo ablate --status` where SLURM's commands are")
    done = subprocess.run(["squeue", "-h", "-r", "-o", "%i %T", "-j", ",".join(arrays)], capture_output=True,
                          text=True, timeout=60)
    if done.returncode != 0:
        if "Invalid job id" in done.stderr:  # every job of the list has left the queue
            return {}
        raise LfoError(f"squeue failed: {done.stderr.strip().splitlines()[-1] if done.stderr.strip() else done.returncode}")
    out = {}
    for line in done.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2:
            out[parts[0]] = "running" if parts[1] in ("RUNNING", "COMPLETING", "SUSPENDED") else "queued"
    return out


def statuses(cells: list[Cell], runs_dir: Path) -> list[CellStatus]:
    """Every cell's state, asking SLURM about the cells whose markers name a SLURM job."""
    markers = {c.cell_id: read_marker(runs_dir, c.cell_id) for c in cells}
    slurm_ids = [str(m.get("job_id")) for m in markers.values() if m.get("launcher") == "slurm"
                 and m.get("state") in ("queued", "running")]
    slurm = squeue_states(slurm_ids) if slurm_ids else {}
    alive = lock_held(Path(runs_dir) / LOCK_FILE)
    return [cell_status(c, runs_dir, slurm if markers[c.cell_id].get("launcher") == "slurm" else None, alive)
            for c in cells]


def write_status_csv(grid: Grid, cells: list[Cell], runs_dir: Path, sts: list[CellStatus]) -> list[Record]:
    records = []
    for c, s in zip(cells, sts, strict=True):
        m = read_marker(runs_dir, c.cell_id)
        status = {"done": "complete"}.get(s.state, s.state)
        note = "; ".join(x for x in (f"{s.launcher} job {s.job_id}" if s.job_id else "", s.note) if x)
        took = (m["ended_s"] - m["started_s"]) if s.state in FINAL and isinstance(m.get("ended_s"), float) \
            and isinstance(m.get("started_s"), float) else None
        records.append(Record(c, status=status, exit_code=m.get("exit_code"), duration_s=took, note=note))
    write_runs_csv(Path(runs_dir) / "runs.csv", grid, records)
    return records


def launch(launcher: Launcher, grid: Grid, cells: list[Cell], runs_dir: Path, parallel: int = 1, show: bool = True,
           detach: bool = False, poll_s: float = 1.0) -> list[Record]:
    """Run every unfinished cell through ``launcher``; one record per cell, in grid order."""
    if parallel < 1:
        raise LfoError(f"--parallel must be >= 1, got {parallel}")
    runs_dir = Path(runs_dir)
    with Lock(runs_dir / LOCK_FILE, launcher.name) as lock:
        before = statuses(cells, runs_dir)
        live = [s for s in before if s.state in ("queued", "running") and s.launcher == "slurm"]
        if live:
            raise LfoError(f"{len(live)} cell(s) of {runs_dir} are still {'/'.join(sorted({s.state for s in live}))} as "
                           f"SLURM jobs {', '.join(s.job_id for s in live[:6])}{' ...' if len(live) > 6 else ''}: "
                           "wait for them (`lfo ablate --status`) or cancel them (scancel) first")
        if launcher.name == "local":
            return run_grid(grid, cells, runs_dir, parallel=parallel, show=show)
        todo = [c for c, s in zip(cells, before, strict=True) if s.state != "done"]
        (runs_dir / "logs").mkdir(parents=True, exist_ok=True)
        submitted = launcher.submit(grid, todo, runs_dir, parallel) if todo else []
        if launcher.name == "slurm":
            lock.describe(jobs=sorted({str(j).split("_")[0] for j in submitted}))
        sts = statuses(cells, runs_dir)
        records = write_status_csv(grid, cells, runs_dir, sts)
        if detach or not todo:
            return records
        wanted = {c.cell_id for c in todo}
        finished = len(cells) - len(todo)
        try:
            with ProgressLog(f"ablate {grid.name} ({launcher.name})", len(cells), unit="cell", start=finished,
                             stream=sys.stderr, enabled=show) as bar:
                seen = None
                while True:
                    tasks_left = launcher.poll(runs_dir, poll_s)
                    sts = statuses(cells, runs_dir)
                    if tasks_left == 0:
                        # every task ended: a cell the driver still sees as live did not record its end
                        sts = [s if s.state in FINAL else CellStatus(**{**s.as_dict(), "state": "failed",
                               "note": "its task ended without recording a result"}) for s in sts]
                    mine = [s for s in sts if s.cell_id in wanted]
                    key = [(s.cell_id, s.state) for s in sts]
                    if key != seen:
                        seen = key
                        records = write_status_csv(grid, cells, runs_dir, sts)
                        ended = sum(s.state in FINAL for s in mine)
                        running = [s.cell_id for s in mine if s.state == "running"]
                        failed = sum(s.state == "failed" for s in mine)
                        bar.update(finished + ended, note=f"failed {failed} · running: {', '.join(running) or '-'}")
                    bar.refresh()
                    if all(s.state in FINAL for s in mine) and not tasks_left:  # Ray: every task returned
                        return records
        finally:
            launcher.close()

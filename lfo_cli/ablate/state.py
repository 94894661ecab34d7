"""A grid's state on disk, the same for every launcher: what `lfo ablate --status` reads.

The runs dir (on a filesystem every worker shares) holds it all:

- ``CELL_ID/``: the cell's run dir (`lfo train --out`); *done* when it holds ``summary.json`` with status
  complete, *started* when it holds ``recipe.yaml`` (the next attempt resumes it);
- ``cells/CELL_ID.json``: the cell's launcher marker, written atomically by the driver when it queues the
  cell and by the worker when the cell starts and ends: launcher, job id, state, host, pid, exit code and,
  for a failed cell, its log's last line;
- ``logs/CELL_ID.log``: every attempt's stdout and stderr, appended;
- ``.ablate.lock``: an flock held by the live `lfo ablate` that drives the dir, and the holder's
  description (pid, host, launcher, job ids) for the refusal message.

A cell's state is one of pending (never queued), queued, running, done, failed, interrupted (started or
queued, and no live driver or job holds it now: the next `lfo ablate` resumes it).
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from lfo_cli import run_record as rr
from lfo_cli.errors import LfoError
from lfo_cli.io import atomic_write_text

MARKER_DIR = "cells"
LOG_DIR = "logs"
LOCK_FILE = ".ablate.lock"
STATES = ("pending", "queued", "running", "done", "failed", "interrupted")


is_complete = rr.is_complete  # the one definition of a finished run (lfo_cli.run_record)


def is_started(run_dir: Path) -> bool:
    return (run_dir / rr.RECIPE_FILE).is_file()


def log_path(runs_dir: Path, cell_id: str) -> Path:
    return Path(runs_dir) / LOG_DIR / f"{cell_id}.log"


def marker_path(runs_dir: Path, cell_id: str) -> Path:
    return Path(runs_dir) / MARKER_DIR / f"{cell_id}.json"


def read_marker(runs_dir: Path, cell_id: str) -> dict:
    try:
        data = json.loads(marker_path(runs_dir, cell_id).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_marker(runs_dir: Path, cell_id: str, **fields) -> dict:
    """Merge ``fields`` into the cell's marker, atomically (a reader never sees half a file)."""
    data = {**read_marker(runs_dir, cell_id), **fields, "updated": time.strftime("%Y-%m-%dT%H:%M:%S")}
    path = marker_path(runs_dir, cell_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(data, sort_keys=True) + "\n")
    return data


def last_line(path: Path, limit: int = 200) -> str:
    """The last non-empty line of a log (what a failed cell's status shows), cut to ``limit`` characters."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 8192))
            lines = [ln.strip() for ln in fh.read().decode("utf-8", "replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:limit] if lines else ""


@dataclass
class CellStatus:
    cell_id: str
    seed: int
    state: str
    launcher: str = ""
    job_id: str = ""
    run_dir: str = ""
    note: str = ""

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def cell_status(cell, runs_dir: Path, engine: dict[str, str] | None, driver_alive: bool) -> CellStatus:
    """One cell's state from its run dir, its marker and what the engine says of its job.

    ``engine`` maps a job id to ``queued`` or ``running`` for the jobs the engine still holds (None when the
    launcher has no engine to ask, e.g. local and Ray, whose tasks live only as long as their driver);
    ``driver_alive``: a live `lfo ablate` holds the runs dir's lock.
    """
    m = read_marker(runs_dir, cell.cell_id)
    base = dict(cell_id=cell.cell_id, seed=cell.seed, launcher=m.get("launcher", ""), job_id=m.get("job_id", ""),
                run_dir=str(cell.run_dir))
    if is_complete(cell.run_dir):
        return CellStatus(state="done", **base)
    state = m.get("state")
    if state == "failed":
        return CellStatus(state="failed", note=m.get("last_line") or f"exit code {m.get('exit_code')}", **base)
    if state == "interrupted":
        return CellStatus(state="interrupted", note=f"{m.get('last_line') or 'stopped'}; the next `lfo ablate` resumes it",
                          **base)
    if state in ("queued", "running"):
        if engine is not None:
            live = engine.get(str(m.get("job_id")))
            if live:
                return CellStatus(state=live, **base)
        elif driver_alive:
            return CellStatus(state=state, **base)
        return CellStatus(state="interrupted", note="no live job holds it; the next `lfo ablate` resumes it", **base)
    if is_started(cell.run_dir):
        return CellStatus(state="interrupted", note="started; the next `lfo ablate` resumes it", **base)
    return CellStatus(state="pending", **base)


class Lock:
    """An flock on ``RUNS_DIR/.ablate.lock``, released by the kernel when its holder dies; the file names the
    holder, so a refused `lfo ablate` says who holds the dir."""

    def __init__(self, path: Path, launcher: str = "local"):
        self.path = Path(path)
        self.launcher = launcher
        self.fh = None

    def __enter__(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fh = self.path.open("a+")
        try:
            fcntl.flock(self.fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.fh.close()
            raise LfoError(f"another `lfo ablate` is running on {self.path.parent} ({holder(self.path)}; lock "
                           f"{self.path.name}); `lfo ablate --status` shows its cells") from None
        self.describe()
        return self

    def describe(self, **extra) -> None:
        """Write the holder's description into the locked file (pid, host, launcher, start, job ids)."""
        info = {"pid": os.getpid(), "host": socket.gethostname(), "launcher": self.launcher,
                "since": time.strftime("%Y-%m-%d %H:%M:%S"), **extra}
        self.fh.seek(0)
        self.fh.truncate()
        self.fh.write(json.dumps(info) + "\n")
        self.fh.flush()

    def __exit__(self, *exc):
        self.fh.close()  # closing releases the flock


def holder(path: Path) -> str:
    """The lock file's description of its holder, as words."""
    try:
        info = json.loads(Path(path).read_text(encoding="utf-8"))
        return (f"pid {info['pid']} on {info['host']}, launcher {info['launcher']}, since {info['since']}"
                + (f", jobs {', '.join(info['jobs'])}" if info.get("jobs") else ""))
    except (OSError, ValueError, KeyError, TypeError):
        return "holder unknown"


def lock_held(path: Path) -> bool:
    """Whether a live process holds the flock (tried without blocking and released at once; never refuses)."""
    if not Path(path).exists():
        return False
    with Path(path).open("a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fh, fcntl.LOCK_UN)
    return False

"""One cell on a cluster's worker: what a SLURM array task or a Ray task runs.

The task decides at run time whether the cell starts or resumes (its run dir holds ``recipe.yaml``: resume),
so a requeued, retried or resubmitted task continues from the cell's last checkpoint. It runs the cell's
`lfo train` as a child process (the same argv the local launcher runs), appends its output to
``logs/CELL_ID.log`` and records its state in ``cells/CELL_ID.json``. It imports no engine: the SLURM and
Ray launchers wrap it.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field

from lfo_cli.ablate.grid import Cell, Grid, cell_argv
from lfo_cli.ablate.state import is_complete, is_started, last_line, log_path, write_marker

# The driver's variables a cell needs on the worker (its LFO_HOME, offline switches, MKL's reproducibility
# mode); the engine's own environment (SLURM_*, RAY_*) is the worker's.
PASSED_ENV_PREFIXES = ("LFO_", "HF_", "TRL_", "TRANSFORMERS_", "MKL_", "PYTHONPATH", "TOKENIZERS_")


STOPPED = {128 + signal.SIGINT, 128 + signal.SIGTERM, 128 + signal.SIGKILL}  # a shell's exit code for a signal


def driver_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k.startswith(PASSED_ENV_PREFIXES)}


def pdeathsig():  # pragma: no cover - runs in the child between fork and exec
    """SIGTERM to this child when its parent dies (Linux PR_SET_PDEATHSIG): no orphan training."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def job_id_here() -> str:
    """This task's id in its engine: SLURM's ``ARRAYJOB_TASK``, else Ray's task id, else the pid."""
    if os.environ.get("SLURM_ARRAY_JOB_ID"):
        return f"{os.environ['SLURM_ARRAY_JOB_ID']}_{os.environ.get('SLURM_ARRAY_TASK_ID', '0')}"
    if os.environ.get("SLURM_JOB_ID"):
        return os.environ["SLURM_JOB_ID"]
    try:
        import ray  # only where a Ray worker runs this

        if ray.is_initialized():
            return ray.get_runtime_context().get_task_id() or str(os.getpid())
    except ImportError:
        pass
    return str(os.getpid())


@dataclass
class CellTask:
    """Run one cell to its end on this worker; returns its exit code and state (done or failed)."""

    grid: Grid
    cell: Cell
    launcher: str
    threads: int = 1  # the cell's torch threads: the CPUs its engine gave it
    cwd: str = field(default_factory=os.getcwd)  # the driver's: recipes and data dirs resolve as they do there
    env: dict[str, str] = field(default_factory=driver_env)

    def __call__(self) -> dict:
        runs_dir = self.cell.run_dir.parent
        if is_complete(self.cell.run_dir):  # a retry after the cell finished: never run a finished cell again
            write_marker(runs_dir, self.cell.cell_id, state="done", exit_code=0)
            return {"cell_id": self.cell.cell_id, "state": "done", "exit_code": 0}
        resume = is_started(self.cell.run_dir)
        argv = cell_argv(self.grid, self.cell, resume=resume)  # built here: this worker's python
        log = log_path(runs_dir, self.cell.cell_id)
        log.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **self.env, "OMP_NUM_THREADS": str(self.threads)}
        write_marker(runs_dir, self.cell.cell_id, launcher=self.launcher, state="running", job_id=job_id_here(),
                     host=socket.gethostname(), pid=os.getpid(), exit_code=None, last_line="", started_s=time.time())
        with log.open("a", encoding="utf-8") as fh:
            fh.write(f"=== {time.strftime('%Y-%m-%d %H:%M:%S')} {'resume' if resume else 'start'} on "
                     f"{socket.gethostname()} ({self.launcher} {job_id_here()}): {' '.join(argv)}\n")
            fh.flush()
            self._child = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                           env=env, cwd=self.cwd, preexec_fn=pdeathsig)
            code = self._child.wait()
        done = code == 0 and is_complete(self.cell.run_dir)
        if done:
            state, note = "done", ""
        elif code < 0 or code in STOPPED:  # a signal stopped it (scancel, preemption): the next launch resumes it
            state, note = "interrupted", f"stopped by signal {-code if code < 0 else code - 128}"
        else:
            state = "failed"
            note = last_line(log) if code != 0 else "exit code 0 but no summary.json with status complete"
        write_marker(runs_dir, self.cell.cell_id, state=state, exit_code=code, last_line=note, ended_s=time.time())
        return {"cell_id": self.cell.cell_id, "state": state, "exit_code": code}

    def stop_child(self, timeout: float = 60.0) -> None:
        """SIGTERM to the running `lfo train` (it keeps its last checkpoint), SIGKILL after ``timeout``."""
        child = getattr(self, "_child", None)
        if child is None or child.poll() is not None:
            return
        child.terminate()
        try:
            child.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()

    def __getstate__(self):  # the child process stays behind when the task is pickled for a requeue
        return {k: v for k, v in self.__dict__.items() if k != "_child"}

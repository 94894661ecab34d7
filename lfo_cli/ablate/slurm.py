"""The SLURM launcher: a grid's unfinished cells as one submitit job array (the ``slurm`` extra).

Each array task is a :class:`SlurmCellTask`: a :class:`~lfo_cli.ablate.cell_task.CellTask` that is also
submitit's :class:`~submitit.helpers.Checkpointable`. When SLURM preempts it or its time limit nears, SLURM
signals it (submitit's ``--signal``); it stops its `lfo train`, which keeps its last checkpoint, and submitit
requeues it; the requeued task resumes the cell. ``--max-parallel`` is the array's throttle (``%N``).
Job states come from ``squeue`` and the cells' markers, never from ``sacct`` (which needs SLURM's accounting
database), so submitit's own job states are not read.
"""

from __future__ import annotations

from pathlib import Path

import submitit

from lfo_cli.ablate.cell_task import CellTask
from lfo_cli.ablate.grid import Cell, Grid
from lfo_cli.ablate.launcher_base import Launcher
from lfo_cli.ablate.state import write_marker
from lfo_cli.errors import LfoError


class SlurmCellTask(CellTask, submitit.helpers.Checkpointable):
    """A cell as a SLURM array task; requeued (and then resumed) when SLURM preempts it or times it out."""

    def checkpoint(self, *args, **kwargs) -> submitit.helpers.DelayedSubmission:
        self.stop_child()
        write_marker(self.cell.run_dir.parent, self.cell.cell_id, state="queued", note="requeued")
        return submitit.helpers.DelayedSubmission(self)


class SlurmLauncher(Launcher):
    name = "slurm"

    def executor(self, grid: Grid, runs_dir: Path, parallel: int) -> submitit.SlurmExecutor:
        s, r = self.settings, grid.resources
        ex = submitit.SlurmExecutor(folder=Path(runs_dir).resolve() / "slurm" / "%A")
        extra = {}
        for item in s.sbatch:
            key, sep, value = item.lstrip("-").partition("=")
            if not key:
                raise LfoError(f"--sbatch '{item}': expected key=value (e.g. constraint=a100)")
            extra[key.replace("-", "_")] = value if sep else True
        params = dict(job_name=f"lfo-{grid.name}", array_parallelism=parallel, cpus_per_task=self.threads(grid),
                      time=s.time_min or r.time_min or 24 * 60, setup=list(s.setup), additional_parameters=extra,
                      stderr_to_stdout=True)
        gpus = s.gpus if s.gpus is not None else r.gpus
        if gpus:
            params["gpus_per_node"] = gpus
        mem = s.mem_gb if s.mem_gb is not None else r.mem_gb
        if mem:
            params["mem"] = f"{int(mem * 1024)}M"
        for key in ("partition", "account", "qos"):
            if getattr(s, key):
                params[key] = getattr(s, key)
        ex.update_parameters(**params)
        return ex

    def submit(self, grid: Grid, cells: list[Cell], runs_dir: Path, parallel: int) -> list[str]:
        ex = self.executor(grid, runs_dir, parallel)
        jobs = []
        try:
            with ex.batch():
                for cell in cells:
                    jobs.append(ex.submit(SlurmCellTask(**self.task(grid, cell).__dict__)))
        except Exception as exc:  # noqa: BLE001 - submitit raises its own types for a refused sbatch
            msg = [ln for ln in str(exc).strip().splitlines() if ln.strip()]
            raise LfoError(f"sbatch refused the array: {msg[-1] if msg else type(exc).__name__}") from None
        ids = [str(j.job_id) for j in jobs]
        for cell, jid in zip(cells, ids, strict=True):
            write_marker(runs_dir, cell.cell_id, launcher="slurm", state="queued", job_id=jid, exit_code=None,
                         last_line="")
        return ids

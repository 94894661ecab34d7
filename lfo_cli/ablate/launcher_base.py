"""What every launcher is (:mod:`lfo_cli.ablate.launchers` picks one and drives it): the settings a lab writes
once for its cluster, and the base class whose ``submit``/``poll``/``close`` an engine implements."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from lfo_cli.ablate.cell_task import CellTask
from lfo_cli.ablate.grid import Cell, Grid


@dataclass
class ClusterSettings:
    """What a lab writes once for its cluster (``slurm:`` and ``ray:`` sections of a cluster.yaml)."""

    partition: str | None = field(default=None, metadata={"help": "SLURM partition (--partition)."})
    account: str | None = field(default=None, metadata={"help": "SLURM account to charge (--account)."})
    qos: str | None = field(default=None, metadata={"help": "SLURM quality of service (--qos)."})
    time_min: int | None = field(default=None, metadata={
        "help": "SLURM time limit per cell, minutes; a cell past it is requeued and resumes (default: the "
                "grid's resources.time_min, else 24 h)."})
    cpus: int | None = field(default=None, metadata={"help": "CPUs per cell (default: the grid's resources.cpus)."})
    gpus: int | None = field(default=None, metadata={"help": "GPUs per cell (default: the grid's resources.gpus)."})
    mem_gb: float | None = field(default=None, metadata={"help": "Memory per cell in GB (SLURM)."})
    sbatch: list[str] = field(default_factory=list, metadata={
        "help": "Extra #SBATCH options as 'key=value' (e.g. constraint=a100, exclude=node3)."})
    setup: list[str] = field(default_factory=list, metadata={
        "help": "Shell lines each SLURM task runs first (e.g. 'module load cuda', 'source .venv/bin/activate')."})
    address: str | None = field(default=None, metadata={
        "help": "Ray cluster address (host:port or 'auto'); default: start a local one on 127.0.0.1."})
    max_retries: int = field(default=3, metadata={"help": "Ray: retries of a cell whose worker died."})


class Launcher:
    """The local launcher, and the base of the cluster ones: :func:`lfo_cli.ablate.launchers.launch` holds the
    runs dir's lock and runs a local grid through :func:`~lfo_cli.ablate.runner.run_grid`; a cluster launcher
    implements ``submit`` (queue the cells on its engine), and ``poll``/``close`` where its engine needs them."""

    name = "local"

    def __init__(self, settings: ClusterSettings | None = None):
        self.settings = settings or ClusterSettings()

    def threads(self, grid: Grid) -> int:
        return self.settings.cpus or grid.resources.cpus

    def task(self, grid: Grid, cell: Cell) -> CellTask:
        return CellTask(grid=grid, cell=cell, launcher=self.name, threads=self.threads(grid))

    def submit(self, grid: Grid, cells: list[Cell], runs_dir: Path, parallel: int) -> list[str]:
        """Queue ``cells`` (each marked queued); the engine's ids of their jobs."""
        raise NotImplementedError(f"{type(self).__name__} queues nothing: the local launcher runs cells through "
                                  "run_grid, a cluster launcher overrides submit")

    def poll(self, runs_dir: Path, timeout: float) -> int | None:
        """Wait up to ``timeout`` s for the engine; how many submitted tasks it still holds (None: ask the
        markers and the engine's queue instead)."""
        time.sleep(timeout)
        return None

    def close(self) -> None:
        """Let go of the engine (a driver's connection; never the cluster's jobs)."""

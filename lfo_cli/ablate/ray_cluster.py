"""The Ray launcher: one Ray task per cell (the ``ray`` extra).

A task asks for the grid's ``resources`` (``num_cpus``, ``num_gpus``) and is retried when its worker dies
(``max_retries``); the retry resumes the cell from its last checkpoint. Ray ends a driver's tasks when the
driver ends, so `lfo ablate --launcher ray` waits for them. Without ``--ray-address`` (or ``RAY_ADDRESS``)
it starts a Ray instance for the invocation (node address 127.0.0.1; Ray still binds some of its servers to
every interface). A cluster's head accepts whoever reaches it unless its token authentication or TLS is on:
keep it on a private network (docs/cluster.md).
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import ray

from lfo_cli.ablate.cell_task import CellTask
from lfo_cli.ablate.grid import Cell, Grid
from lfo_cli.ablate.launcher_base import Launcher
from lfo_cli.ablate.state import write_marker
from lfo_cli.errors import LfoError


def _run(task: CellTask) -> dict:
    return task()


class RayLauncher(Launcher):
    name = "ray"
    refs: dict

    def connect(self) -> None:
        if ray.is_initialized():
            return
        kwargs = dict(include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
        address = self.settings.address or os.environ.get("RAY_ADDRESS")
        try:
            if address:
                ray.init(address=address, **kwargs)
            else:  # a local cluster for this invocation, on the loopback only
                ray.init(_node_ip_address="127.0.0.1", **kwargs)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            first = str(exc).strip().splitlines()
            raise LfoError(f"could not reach a Ray cluster at {address or 'a new local one'}: "
                           f"{first[0] if first else type(exc).__name__}") from None

    def submit(self, grid: Grid, cells: list[Cell], runs_dir: Path, parallel: int) -> list:
        """Every cell queued (marked so); at most ``parallel`` Ray tasks at once, the next as one ends."""
        self.connect()
        gpus = self.settings.gpus if self.settings.gpus is not None else grid.resources.gpus
        self.opts = dict(num_cpus=self.threads(grid), num_gpus=gpus, max_retries=self.settings.max_retries,
                         retry_exceptions=False)
        self.grid, self.parallel, self.waiting, self.refs = grid, parallel, list(cells), {}
        for cell in cells:
            write_marker(runs_dir, cell.cell_id, launcher="ray", state="queued", job_id="", exit_code=None,
                         last_line="")
        self._fill()
        return [c.cell_id for c in cells]

    def _fill(self) -> None:
        remote = ray.remote(_run)
        while self.waiting and len(self.refs) < self.parallel:
            cell = self.waiting.pop(0)
            ref = remote.options(name=f"lfo-{self.grid.name}-{cell.cell_id}", **self.opts).remote(
                self.task(self.grid, cell))
            self.refs[ref] = cell

    def poll(self, runs_dir: Path, timeout: float) -> int:
        """Collect the tasks that ended (a task whose retries ran out is marked failed with Ray's reason) and
        start the next; how many cells are still queued or running."""
        if not self.refs:
            time.sleep(timeout)
            return len(self.waiting)
        ready, _ = ray.wait(list(self.refs), num_returns=len(self.refs), timeout=timeout)
        for ref in ready:
            cell = self.refs.pop(ref)
            try:
                ray.get(ref)
            except ray.exceptions.RayError as exc:
                lines = [ln for ln in str(exc).splitlines() if ln.strip()]
                write_marker(runs_dir, cell.cell_id, state="failed", exit_code=None,
                             last_line=f"ray: {lines[0][:200] if lines else type(exc).__name__}")
        self._fill()
        return len(self.refs) + len(self.waiting)

    def close(self) -> None:
        ray.shutdown()

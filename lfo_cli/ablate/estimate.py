"""What a grid's remaining cells will cost: each cell's minutes from the grid's own finished cells, and the
wall time of the rest at ``--parallel N`` (cells start in grid order on the first free slot, as `run_grid`
starts them).

A cell is estimated from the finished cells of its condition (mean duration in ``runs.csv``), else from
all finished cells of the grid; a started cell resumes from its last checkpoint, so only the steps after
it are counted. With no finished cell there is no measurement, and the estimate says so instead of guessing.
"""

from __future__ import annotations

import heapq
import shlex
import statistics
from dataclasses import dataclass
from pathlib import Path

from lfo_cli.ablate.grid import Cell
from lfo_cli.train.checkpoints import checkpoints


@dataclass
class CellEstimate:
    cell_id: str
    status: str
    minutes: float | None  # what is left of the cell; None = nothing measured to estimate it from
    source: str  # "condition" (its condition's finished cells), "grid" (any finished cell), "done" or "none"


def _done_fraction(cell: Cell) -> float:
    """Share of a started cell's steps that its last checkpoint holds (what a resume keeps)."""
    found = checkpoints(cell.run_dir)
    total = (cell.resolved.get("trainer") or {}).get("max_steps")
    if not found or not isinstance(total, int) or total <= 0:
        return 0.0
    return min(found[0][0] / total, 1.0)


def estimate(cells: list[Cell], statuses: dict[str, str], durations: dict[str, float]) -> list[CellEstimate]:
    """Per cell: minutes left. ``durations`` = seconds of finished cells (runs.csv ``duration_s``)."""
    by_condition: dict[str, list[float]] = {}
    for c in cells:
        if statuses.get(c.cell_id) == "complete" and c.cell_id in durations:
            by_condition.setdefault(c.condition, []).append(durations[c.cell_id] / 60)
    every = [m for ms in by_condition.values() for m in ms]

    def whole(c: Cell) -> tuple[float | None, str]:
        own = by_condition.get(c.condition)
        if own:
            return statistics.fmean(own), "condition"
        return (statistics.fmean(every), "grid") if every else (None, "none")

    return _left(cells, statuses, whole)


def from_step_time(cells: list[Cell], statuses: dict[str, str], step_s: float) -> list[CellEstimate]:
    """Per cell: its training steps left x a step time measured elsewhere (the grid's ``estimate``); the cells'
    evaluations are not in it."""

    def whole(c: Cell) -> tuple[float | None, str]:
        steps = (c.resolved.get("trainer") or {}).get("max_steps")
        return (steps * step_s / 60, "step time") if isinstance(steps, int) else (None, "none")

    return _left(cells, statuses, whole)


def _left(cells: list[Cell], statuses: dict[str, str], whole) -> list[CellEstimate]:
    """Each cell's minutes left: 0 when complete, ``whole(cell)`` when pending, the part after its last
    checkpoint when started (a resume keeps what the checkpoint holds)."""
    out = []
    for c in cells:
        status = statuses.get(c.cell_id, "pending")
        if status == "complete":
            out.append(CellEstimate(c.cell_id, status, 0.0, "done"))
            continue
        minutes, source = whole(c)
        if minutes is not None and status == "started":
            minutes *= 1 - _done_fraction(c)
        out.append(CellEstimate(c.cell_id, status, minutes, source))
    return out


def wall_minutes(estimates: list[CellEstimate], parallel: int) -> float | None:
    """Wall time of the cells left, started in order on the first free of ``parallel`` slots; None when
    some cell has no estimate."""
    left = [e.minutes for e in estimates if e.source != "done"]
    if any(m is None for m in left):
        return None
    slots = [0.0] * max(1, parallel)
    for m in left:  # slots is a heap of finish times: the next cell starts on the one free first
        heapq.heapreplace(slots, slots[0] + m)
    return max(slots)


def paste_command(argv: list[str]) -> str:
    """A cell's argv as a shell line a user can paste: ``python -m lfo_cli`` shown as ``lfo``."""
    if len(argv) > 2 and argv[1:3] == ["-m", "lfo_cli"] and Path(argv[0]).name.startswith("python"):
        argv = ["lfo", *argv[3:]]
    return shlex.join(argv)

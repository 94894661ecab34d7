"""Progress of long work (warm start, training, evaluation, grids) that reads on a terminal and in a log.

On a terminal a rich bar redraws in place (done/total, elapsed, remaining). Off a terminal (``nohup``,
CI, ``tee``, a grid's per-cell log) a live display prints nothing until it ends, so :class:`ProgressLog`
prints plain lines instead, each with done/total, the rate and the ETA::

    warm start SFT: 45/900 steps (5%) · 1.21 steps/s · ETA 11 min 47 s

The cadence (:class:`Cadence`): a line once another 5% of the total is done since the last line, but
at most one per 10 s (a fast job does not flood its log), and at least one per 60 s while work goes on
(a slow one is never silent for long), plus a last line at the end (a heartbeat-only log, ``Cadence(fraction=None)``,
ends silently when it never needed a heartbeat). A trainer's logged metrics ride on the progress line as its ``note``.

Standard library only; rich is imported for the terminal display alone. The clock is injectable so the
cadence is tested without waiting.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO


@dataclass(frozen=True)
class Cadence:
    fraction: float | None = 0.05  # a line per this share of the total (None: only the heartbeat)
    min_seconds: float = 10.0  # never two lines closer than this (the last line excepted)
    max_seconds: float = 60.0  # a line at least this often while work goes on


DEFAULT_CADENCE = Cadence()


def format_duration(seconds: float) -> str:
    """``42 s``, ``3 min 07 s``, ``1 h 05 min``."""
    seconds = max(0.0, float(seconds))
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, sec = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes} min {sec:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def is_terminal(stream: IO[str]) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a closed or fake stream
        return False


class ProgressLog:
    """One long job's progress: ``update(done)`` as it goes, ``log(text)`` for a line of its own.

    ``unit`` is singular ("step", "episode", "cell"); ``start`` is what was already done when the job
    began (a resumed run): rate and ETA count only the work done here. ``enabled=False`` prints
    nothing (``--json`` output)."""

    def __init__(self, label: str, total: int | None, *, unit: str = "step", start: int = 0,
                 stream: IO[str] | None = None, terminal: bool | None = None,
                 clock: Callable[[], float] = time.monotonic, cadence: Cadence = DEFAULT_CADENCE,
                 enabled: bool = True):
        self.label, self.total, self.unit = label, total, unit
        self.stream = stream if stream is not None else sys.stdout
        self.terminal = is_terminal(self.stream) if terminal is None else terminal
        self.clock, self.cadence, self.enabled = clock, cadence, enabled
        self.start, self.done, self.note = start, start, ""
        self.t0 = self.last_line_t = clock()
        self.last_line_done = start
        self.closed = False
        self.lines = 0  # plain progress lines printed
        self._bar = self._task = None
        if enabled and self.terminal:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            # auto_refresh=False: no refresh thread (a grid forks its runs); every update redraws.
            self._bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                                 TextColumn("{task.fields[note]}"),
                                 console=Console(file=self.stream), auto_refresh=False, transient=False)
            self._bar.start()
            self._task = self._bar.add_task(label, total=total, completed=start, note="")
            self._bar.refresh()

    # ---- what a line says ----
    def _plural(self) -> str:
        return self.unit if self.unit.endswith("s") else self.unit + "s"

    def rate_text(self) -> str:
        """``1.21 steps/s`` or ``16.4 s/step`` (whichever reads as a number above 1); ``-`` before any work."""
        elapsed, n = self.clock() - self.t0, self.done - self.start
        if n <= 0 or elapsed <= 0:
            return "-"
        per_s = n / elapsed
        return f"{per_s:.2f} {self._plural()}/s" if per_s >= 1 else f"{1 / per_s:.1f} s/{self.unit}"

    def eta_text(self) -> str:
        elapsed, n = self.clock() - self.t0, self.done - self.start
        if self.total is None or n <= 0:
            return "ETA -"
        if self.done >= self.total:
            return f"done in {format_duration(elapsed)}"
        return f"ETA {format_duration(elapsed / n * (self.total - self.done))}"

    def status(self) -> str:
        """``45/900 steps (5%) · 1.21 steps/s · ETA 11 min 47 s``."""
        if self.total:
            count = f"{self.done}/{self.total} {self._plural()} ({100 * self.done / self.total:.0f}%)"
        else:
            count = f"{self.done} {self._plural()}"
        parts = [count, self.rate_text(), self.eta_text()]
        if self.note:
            parts.append(self.note)
        return " · ".join(parts)

    # ---- output ----
    def _print(self, text: str) -> None:
        if self._bar is not None:
            self._bar.console.print(text, markup=False, highlight=False)
            self._bar.refresh()
        else:
            print(text, file=self.stream, flush=True)

    def _emitted(self) -> None:
        self.last_line_t, self.last_line_done = self.clock(), self.done
        self.lines += 1

    def _wants_last_line(self) -> bool:
        # A heartbeat-only log (no fraction) that never needed a heartbeat ends silently.
        return self.done != self.last_line_done and (self.cadence.fraction is not None or self.lines > 0)

    def heartbeat_due(self) -> bool:
        """No line for the heartbeat interval (the cadence's ``max_seconds``)."""
        return self.clock() - self.last_line_t >= self.cadence.max_seconds

    def _due(self) -> bool:
        now, c = self.clock(), self.cadence
        since = now - self.last_line_t
        if self.total is not None and self.done >= self.total:
            return self._wants_last_line()
        if since >= c.max_seconds and self.done > self.last_line_done:
            return True
        if c.fraction is None or not self.total or since < c.min_seconds:
            return False
        return self.done - self.last_line_done >= max(1.0, c.fraction * self.total)

    def update(self, done: int, *, total: int | None = None, note: str | None = None, quiet: bool = False) -> None:
        """The job has done ``done`` units (absolute, not a delta). ``quiet``: count it, print nothing (a
        line of the job's own, :meth:`log`, follows)."""
        if total is not None:
            self.total = total
        if note is not None:
            self.note = note
        self.done = done
        if not self.enabled or self.closed:
            return
        if self._bar is not None:
            self._bar.update(self._task, completed=done, total=self.total, note=self.note)
            self._bar.refresh()
        elif not quiet and self._due():
            print(f"{self.label}: {self.status()}", file=self.stream, flush=True)
            self._emitted()

    def refresh(self) -> None:
        """Redraw the terminal bar (its elapsed time) with no new progress; nothing in a log."""
        if self._bar is not None and not self.closed:
            self._bar.refresh()

    def advance(self, n: int = 1, *, note: str | None = None) -> None:
        self.update(self.done + n, note=note)

    def log(self, text: str, *, counts_as_progress: bool = False) -> None:
        """A line of the job's own. ``counts_as_progress``: off a terminal it stands for the cadence's next
        line (it says where the job is itself, e.g. that it ended)."""
        if not self.enabled or self.closed:
            return
        self._print(text)
        if counts_as_progress and self._bar is None:
            self._emitted()

    def close(self) -> None:
        """Stop the display; off a terminal, a last line when the last one was not already at this point."""
        if self.closed:
            return
        self.closed = True
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.stop()
        elif self._wants_last_line():
            print(f"{self.label}: {self.status()}", file=self.stream, flush=True)
            self._emitted()

    def __enter__(self) -> ProgressLog:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def episode_progress(plog: ProgressLog) -> Callable[[int, int], None]:
    """The ``progress(done, total)`` hook of :func:`lfo_cli.models.agent_eval.evaluate_agent`, into ``plog``."""

    def hook(done: int, total: int) -> None:
        plog.update(done, total=total)

    return hook

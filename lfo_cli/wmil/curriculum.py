"""Mastery curriculum (the design's phase 5): advance a level when recent success clears a threshold."""

from __future__ import annotations

from collections import deque

from lfo_cli.errors import LfoError


class CurriculumManager:
    """Keeps the last ``window_size`` episode successes; when the window is full and its success
    rate is at least ``mastery_threshold``, the level goes up by one (until ``max_level``) and the
    window is cleared, so the next level must be mastered on its own episodes."""

    def __init__(self, initial_level: int = 0, max_level: int = 2, mastery_threshold: float = 0.8,
                 window_size: int = 100):
        if not 0.0 < mastery_threshold <= 1.0:
            raise LfoError(f"mastery threshold must be in (0, 1] (got {mastery_threshold})")
        if window_size < 1:
            raise LfoError(f"curriculum window must be >= 1 episode (got {window_size})")
        if not 0 <= initial_level <= max_level:
            raise LfoError(f"initial level {initial_level} outside 0..{max_level}")
        self.level = initial_level
        self.max_level = max_level
        self.mastery_threshold = mastery_threshold
        self.window: deque[float] = deque(maxlen=window_size)
        self.history: list[dict] = []  # {"step": ..., "level": ...} for every advance

    def update(self, successes, step: int = 0) -> bool:
        """Add a batch of episode successes (iterable of 0/1); return True if the level advanced."""
        for s in successes:
            self.window.append(float(s))
        if (len(self.window) == self.window.maxlen and self.level < self.max_level
                and self.success_rate() >= self.mastery_threshold):
            self.level += 1
            self.window.clear()
            self.history.append({"step": step, "level": self.level})
            return True
        return False

    def success_rate(self) -> float:
        return sum(self.window) / len(self.window) if self.window else 0.0

    def get_difficulty(self) -> int:
        return self.level

    def state_dict(self) -> dict:
        return {"level": self.level, "window": list(self.window), "history": list(self.history)}

    def load_state_dict(self, state: dict) -> None:
        self.level = int(state["level"])
        self.window.clear()
        self.window.extend(float(x) for x in state["window"])
        self.history = [dict(h) for h in state["history"]]

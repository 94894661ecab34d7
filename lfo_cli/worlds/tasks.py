"""Task helpers every world shares: tasks are objects with a ``task_id`` and a ``difficulty``."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from typing import Any


def sub_seed(*keys: Any) -> int:
    """A 64-bit seed derived from ``keys`` with sha256 (stable across processes and platforms)."""
    text = "\x1f".join(str(k) for k in keys)
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def stratified_tasks(tasks: list, n: int) -> list:
    """``n`` tasks taken round-robin over difficulties (in task-id order), so every level is measured."""
    by: dict[int, list] = defaultdict(list)
    for t in sorted(tasks, key=lambda t: t.task_id):
        by[t.difficulty].append(t)
    out, levels = [], sorted(by)
    while len(out) < min(n, len(tasks)):
        for d in levels:
            if by[d] and len(out) < n:
                out.append(by[d].pop(0))
    return out

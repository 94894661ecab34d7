"""The model cache under ``$LFO_HOME`` (default ``~/.cache/lfo``): built once, atomically, reused.

Every cached model is a directory that is built under a temporary name and renamed into place only
when complete (:func:`lfo_cli.io.atomic_dir`), and a ``lfo_cache.json`` marker is the last file
written inside it. A build that is killed therefore leaves either nothing at the final path or a
``.NAME.*.tmp`` directory that no loader ever reads (and that the next build sweeps away once its
owner process is gone). A file lock serialises concurrent builders of the same entry.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lfo_cli.io import atomic_dir, atomic_write_json, read_json

MARKER = "lfo_cache.json"
_PID_FILE = ".lfo_build.pid"


def lfo_home() -> Path:
    """``$LFO_HOME`` or ``~/.cache/lfo``."""
    return Path(os.environ.get("LFO_HOME") or Path.home() / ".cache" / "lfo").expanduser()


def models_dir() -> Path:
    return lfo_home() / "models"


def is_complete(path: Path) -> bool:
    """A cache entry counts only when its marker exists (written last, inside the atomic rename)."""
    return (Path(path) / MARKER).is_file()


def entry_info(path: Path) -> dict[str, Any] | None:
    return read_json(Path(path) / MARKER) if is_complete(path) else None


def dir_size(path: Path) -> int:
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale(path: Path) -> list[Path]:
    """Remove leftovers of killed builds of ``path`` (temp dirs whose builder process is gone)."""
    removed = []
    for tmp in Path(path).parent.glob(f".{Path(path).name}.*.tmp"):
        pid_file = tmp / _PID_FILE
        try:
            pid = int(pid_file.read_text().strip())
        except (OSError, ValueError):
            pid = None
        # No pid file yet: either dead before writing it, or just created; give it a minute.
        if pid is None and time.time() - tmp.stat().st_mtime < 60:
            continue
        if pid is None or not _pid_alive(pid):
            shutil.rmtree(tmp, ignore_errors=True)
            removed.append(tmp)
    return removed


@contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / f".{path.name}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def build_once(path: Path, build: Callable[[Path], dict[str, Any]], *, force: bool = False) -> Path:
    """Return ``path`` once it holds a complete entry, calling ``build(tmp_dir) -> info`` if needed.

    ``build`` writes the entry's files into ``tmp_dir`` and returns a small JSON-able dict that is
    stored in the marker (what was built, from what, and when).
    """
    path = Path(path)
    if is_complete(path) and not force:
        return path
    with _locked(path):
        if is_complete(path) and not force:  # another process built it while we waited
            return path
        sweep_stale(path)
        if path.exists():  # a directory without marker: never loadable, rebuild it
            shutil.rmtree(path)
        t0 = time.time()
        with atomic_dir(path) as tmp:
            (tmp / _PID_FILE).write_text(str(os.getpid()))
            info = dict(build(tmp))
            info.setdefault("built_at", time.strftime("%Y-%m-%dT%H:%M:%S%z"))
            info.setdefault("build_seconds", round(time.time() - t0, 2))
            (tmp / _PID_FILE).unlink()
            atomic_write_json(tmp / MARKER, info)
    return path

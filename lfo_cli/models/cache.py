"""The model cache under ``$LFO_HOME`` (default ``~/.cache/lfo``): built once, atomically, reused.

Every cached model is a directory that is built under a temporary name and renamed into place only
when complete (:func:`lfo_cli.io.atomic_dir`), and a ``lfo_cache.json`` marker is the last file
written inside it. A build that is killed therefore leaves either nothing at the final path or a
``.NAME.*.tmp`` directory that no loader ever reads. The next build sweeps it away once its owner
process is gone, unless the build is resumable (a warm start's SFT checkpoints): then the next build
adopts the newest such directory and continues from what it holds, so a build killed after two hours
loses minutes, not the two hours. A file lock serialises concurrent builders of the same entry.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lfo_cli.io import atomic_dir, atomic_write_json, lfo_home, read_json

MARKER = "lfo_cache.json"
_PID_FILE = ".lfo_build.pid"
_FAILED_FILE = ".lfo_build.failed"  # a resumable build that raised: its dir waits for the next build


def models_dir() -> Path:
    return lfo_home() / "models"


def build_command(name: str, *, data_dir: str | Path | None = None, overrides: list[str] | None = None,
                  force: bool = False) -> str:
    """The `lfo models build` line that (re)builds an entry: a warm start's `--set` overrides (a per-seed draw's
    `seed=N`) included, or the line would build another entry."""
    return (f"lfo models build {name}" + (f" --data-dir {data_dir}" if data_dir is not None else "")
            + "".join(f" --set {o}" for o in overrides or []) + (" --force" if force else ""))


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


def stale_builds(path: Path) -> list[Path]:
    """Leftovers of killed builds of ``path`` (temp dirs whose builder process is gone), newest first."""
    stale = []
    for tmp in Path(path).parent.glob(f".{Path(path).name}.*.tmp"):
        if (tmp / _FAILED_FILE).exists():
            stale.append(tmp)
            continue
        pid_file = tmp / _PID_FILE
        try:
            pid = int(pid_file.read_text().strip())
        except (OSError, ValueError):
            pid = None
        # No pid file yet: either dead before writing it, or just created; give it a minute.
        if pid is None and time.time() - tmp.stat().st_mtime < 60:
            continue
        if pid is None or not _pid_alive(pid):
            stale.append(tmp)
    return sorted(stale, key=lambda p: p.stat().st_mtime, reverse=True)


def sweep_stale(path: Path, keep: Path | None = None) -> list[Path]:
    """Remove leftovers of killed builds of ``path``, except ``keep``."""
    removed = [tmp for tmp in stale_builds(path) if tmp != keep]
    for tmp in removed:
        shutil.rmtree(tmp, ignore_errors=True)
    return removed


@contextmanager
def _resumable_dir(path: Path, adopt: Path | None):
    """Like :func:`lfo_cli.io.atomic_dir`, but the temp dir may be a killed build's (``adopt``), and a
    build that fails keeps it for the next one to continue from."""
    if adopt is None:
        adopt = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    (adopt / _FAILED_FILE).unlink(missing_ok=True)
    try:
        yield adopt
    except BaseException:
        (adopt / _FAILED_FILE).touch()  # stale at once, even while this process lives on
        raise
    if path.exists():
        shutil.rmtree(path)
    os.replace(adopt, path)


@contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / f".{path.name}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def build_once(path: Path, build: Callable[..., dict[str, Any]], *, force: bool = False,
               resumable: bool = False) -> Path:
    """Return ``path`` once it holds a complete entry, calling ``build(tmp_dir) -> info`` if needed.

    ``build`` writes the entry's files into ``tmp_dir`` and returns a small JSON-able dict that is
    stored in the marker (what was built, from what, and when). A ``resumable`` build is called as
    ``build(tmp_dir, resumed=...)``: ``resumed`` is True when ``tmp_dir`` is a killed (or failed) build's
    directory, adopted with whatever it holds; such a build must give the same entry as one never
    interrupted. A resumable build that fails keeps its directory for the next build.
    """
    path = Path(path)
    if is_complete(path) and not force:
        return path
    with _locked(path):
        if is_complete(path) and not force:  # another process built it while we waited
            return path
        adopt = next(iter(stale_builds(path)), None) if resumable and not force else None
        sweep_stale(path, keep=adopt)
        if path.exists():  # a directory without marker: never loadable, rebuild it
            shutil.rmtree(path)
        t0 = time.time()
        with (_resumable_dir(path, adopt) if resumable else atomic_dir(path)) as tmp:
            (tmp / _PID_FILE).write_text(str(os.getpid()))
            info = dict(build(tmp, resumed=adopt is not None) if resumable else build(tmp))
            if adopt is not None:
                info.setdefault("resumed_build", True)
            info.setdefault("built_at", time.strftime("%Y-%m-%dT%H:%M:%S%z"))
            info.setdefault("build_seconds", round(time.time() - t0, 2))
            (tmp / _PID_FILE).unlink()
            atomic_write_json(tmp / MARKER, info)
    return path

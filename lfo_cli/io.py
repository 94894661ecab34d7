"""Small, dependency-free file helpers shared by every part of lfo.

Everything lfo writes goes through :func:`atomic_write_bytes` (temp file in the same directory,
fsync, ``os.replace``), so a killed process never leaves a half-written file behind. Readers raise
:class:`~lfo_cli.errors.LfoError` naming the file (and line) when data is corrupt or truncated.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any

from lfo_cli import run_record as rr
from lfo_cli.errors import LfoError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_FILE_MODE = 0o666 & ~_umask()  # what open() would give; mkstemp alone gives 0600


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically: readers see the old file or the new one, never a mix."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, _FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def dumps_canonical(obj: Any) -> str:
    """Deterministic JSON (sorted keys, no NaN): same object, same bytes."""
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, allow_nan=False)


def atomic_write_json(path: str | os.PathLike, obj: Any, indent: int | None = 2) -> Path:
    text = json.dumps(obj, sort_keys=True, ensure_ascii=False, indent=indent, allow_nan=False)
    return atomic_write_text(path, text + "\n")


def atomic_write_jsonl(path: str | os.PathLike, rows: Iterable[Any]) -> Path:
    return atomic_write_text(path, "".join(dumps_canonical(r) + "\n" for r in rows))


def lfo_home() -> Path:
    """``$LFO_HOME`` or ``~/.cache/lfo``: where models, warm starts and generated games are cached."""
    return Path(os.environ.get("LFO_HOME") or Path.home() / ".cache" / "lfo").expanduser()


@contextmanager
def atomic_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Build a directory under a temporary name and rename it into place only when complete."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp gives 0700
    try:
        yield tmp
        if path.exists():
            shutil.rmtree(path)
        os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def read_json(path: str | os.PathLike) -> Any:
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise LfoError(f"{path}: file not found") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise LfoError(f"{path}: corrupt JSON ({exc})") from None


def iter_jsonl(path: str | os.PathLike) -> Iterator[dict]:
    """Yield one dict per line; a corrupt or truncated line raises LfoError naming file and line."""
    path = Path(path)
    try:
        fh = path.open("r", encoding="utf-8")
    except FileNotFoundError:
        raise LfoError(f"{path}: file not found") from None
    with fh:
        lineno = 0
        try:
            for lineno, line in enumerate(fh, start=1):  # noqa: B007
                if not line.strip():
                    continue
                if not line.endswith("\n"):
                    raise LfoError(f"{path}:{lineno}: truncated file (last line has no newline)")
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise LfoError(f"{path}:{lineno}: corrupt JSONL ({exc.msg})") from None
                if not isinstance(row, dict):
                    raise LfoError(f"{path}:{lineno}: expected a JSON object per line")
                yield row
        except UnicodeDecodeError:
            raise LfoError(f"{path}:{lineno + 1}: not UTF-8 text") from None


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    return list(iter_jsonl(path))


def append_jsonl(path: str | os.PathLike, row: Any) -> None:
    """Append one line and fsync (metrics logs: a crash loses at most the line being written)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(dumps_canonical(row) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def sha256_file(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def git_commit(cwd: str | os.PathLike | None = None) -> str | None:
    """The current git commit (with a '-dirty' suffix when the tree has changes), or None."""
    cwd = cwd or Path(__file__).resolve().parent
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=5, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=cwd, capture_output=True, text=True, timeout=5, check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return sha + ("-dirty" if dirty else "")


def short_commit(cwd: str | os.PathLike | None = None) -> str:
    """The first 7 characters of :func:`git_commit`, or "unknown": what a measurement's file name carries."""
    return (git_commit(cwd) or "unknown")[:7]


def write_measurement(out_dir: str | os.PathLike, stem: str, result: dict) -> Path:
    """A benchmark's result as ``OUT_DIR/STEM_DATE_COMMIT.json`` (``result["date"]`` and ``["commit"]``), atomically."""
    path = Path(out_dir) / f"{stem}_{result['date']}_{result['commit']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(result, indent=2) + "\n")
    return path


_TRACKED_PACKAGES = (
    "lfo", "torch", "transformers", "trl", "peft", "accelerate", "datasets", "tokenizers",
    "numpy", "pandas", "scipy", "vllm", "deepspeed",
)


def package_versions(names: Iterable[str] = _TRACKED_PACKAGES) -> dict[str, str]:
    out = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def run_metadata(seed: int | None = None, config: Any = None) -> dict[str, Any]:
    """What every run records: resolved config, seed, versions, git commit, interpreter, platform."""
    return {
        "seed": seed,
        rr.RUN_CONFIG: config,
        "versions": package_versions(),
        rr.GIT_COMMIT: git_commit(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "argv": sys.argv,
    }

"""Warm starts shipped with lfo: a cache entry built once, committed under ``lfo_cli/artifacts/warmstart/KEY``
with a manifest of its files' SHA-256, and installed into ``$LFO_HOME/warmstart/KEY`` on first use instead of
being trained there (the demo's warm start: ~20-30 min of SFT on 2 CPU cores).

Only the key decides: an entry is shipped for the exact key its recipe, world files and base model hash to
(:func:`lfo_cli.models.warmstart_cache.warmstart_key`), so a recipe or world that differs in anything that could
change the weights misses it and builds as before. ``tests/models/test_shipped_warmstart.py`` recomputes each
shipped entry's key from the recipe and world its manifest names, and checks every file's hash. A file that does
not match its hash is refused (one ``error:`` line), never installed. `lfo models build NAME --force` trains the
warm start on this machine instead.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

from lfo_cli.errors import LfoError
from lfo_cli.io import atomic_write_json, read_json
from lfo_cli.models import cache

SHIPPED_ROOT = Path(__file__).resolve().parent.parent / "artifacts" / "warmstart"
MANIFEST = "manifest.json"
# What an entry ships: the model and the small record of its build (what it scored); not its SFT data and
# checkpoints (an 87 MB cache entry becomes ~12 MB).
SHIPPED_FILES = ("model", "summary.json", "metrics.jsonl", "eval_by_difficulty.csv", "eval_episodes.jsonl",
                 "samples.jsonl", "run_metadata.json")


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def shipped_entry(key: str, root: Path = SHIPPED_ROOT) -> Path | None:
    """The shipped entry for cache key ``key`` (``micro-5d2d6f910796``), or None."""
    entry = Path(root) / key
    return entry if (entry / MANIFEST).is_file() else None


def verify(entry: Path) -> dict[str, Any]:
    """The entry's manifest, once every file it lists exists with its SHA-256; else LfoError (one line)."""
    entry = Path(entry)
    try:
        manifest = read_json(entry / MANIFEST)
        files = manifest["files"]
    except (LfoError, KeyError, TypeError) as exc:
        raise LfoError(f"shipped warm start {entry}: unreadable manifest ({exc})") from None
    for rel, digest in sorted(files.items()):
        path = entry / rel
        if not path.is_file():
            raise LfoError(f"shipped warm start {entry}: {rel} is missing; restore it (git checkout -- {path}) or "
                           f"build the warm start here: lfo models build {manifest.get('recipe', 'NAME')} --force")
        if sha256(path) != digest:
            raise LfoError(f"shipped warm start {entry}: {rel} does not match its SHA-256 in {MANIFEST} (corrupt or "
                           f"changed); restore it (git checkout -- {path}) or build the warm start here: "
                           f"lfo models build {manifest.get('recipe', 'NAME')} --force")
    return manifest


def install(path: Path, root: Path = SHIPPED_ROOT) -> dict[str, Any] | None:
    """Install the shipped entry for cache path ``path`` (its name is the key) there, verified, atomically;
    its marker, or None when lfo ships none for that key (or the path already holds a complete entry)."""
    entry = shipped_entry(Path(path).name, root)
    if entry is None or cache.is_complete(path):
        return None
    manifest = verify(entry)

    def _copy(tmp: Path) -> dict[str, Any]:
        for rel in manifest["files"]:
            (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(entry / rel, tmp / rel)
        copied = {rel: sha256(tmp / rel) for rel in manifest["files"]}
        if copied != manifest["files"]:  # the copy, not only the source: what is cached is what was verified
            raise LfoError(f"installing the shipped warm start {entry} into {path}: a copied file changed; run again")
        return {**manifest["marker"], "installed_from": f"shipped warm start {entry.name} (SHA-256 verified)"}

    cache.build_once(path, _copy)
    return cache.entry_info(path)


def ship(cache_entry: Path, root: Path = SHIPPED_ROOT, **provenance: Any) -> Path:
    """Write a complete cache entry's :data:`SHIPPED_FILES` and manifest under ``root/KEY`` (what
    ``scripts/ship_warmstart.py`` commits); ``provenance``: where and from what it was built, kept in the manifest."""
    cache_entry = Path(cache_entry)
    marker = cache.entry_info(cache_entry)
    if marker is None or marker.get("key") != cache_entry.name:
        raise LfoError(f"{cache_entry} is not a complete warm-start cache entry built under its own key")
    dest = Path(root) / cache_entry.name
    if dest.exists():
        shutil.rmtree(dest)
    files: dict[str, str] = {}
    for name in SHIPPED_FILES:
        src = cache_entry / name
        for f in sorted(src.rglob("*")) if src.is_dir() else [src] if src.is_file() else []:
            if f.is_file():
                rel = f.relative_to(cache_entry).as_posix()
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(f, dest / rel)
                files[rel] = sha256(dest / rel)
    atomic_write_json(dest / MANIFEST, {"key": cache_entry.name, "recipe": marker.get("recipe"), **provenance,
                                        "marker": marker, "files": files})
    return dest

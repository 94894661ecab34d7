"""Copy the small files of a grid's finished runs into the repo, so its report can be regenerated from git.

    python scripts/snapshot_runs.py ~/.cache/lfo/grids/observation_cpu reports/studies/observation_cpu/runs

For each finished run (summary.json with status complete) under SRC: recipe.yaml, run.json,
summary.json, metrics.jsonl, README.md (the model card) and curves.csv as they are, and validation/*.json
gzip-compressed (per-episode records, ~10x smaller); never weights, checkpoints or trajectories. The grid's
runs.csv is copied too. A run already in DST is left as it is (a finished run never changes); an unfinished
one is skipped. `lfo report DST` reads the copies like the run dirs.

With ``--warmstarts WS``, each finished run's warm start (its summary's ``base_model_ref`` under
``$LFO_HOME``) has its small files copied to ``WS/<cache key>/`` too (summary, build record, metrics, its
evaluation's CSV): a study whose runs draw their own warm starts (``model.warmstart_per_seed``) keeps every
draw's numbers.

    python scripts/snapshot_runs.py $LFO_HOME/grids/textworld_cpu reports/studies/textworld_cpu/runs \
        --warmstarts reports/studies/textworld_cpu/warmstarts
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import sys
from pathlib import Path

FILES = ("recipe.yaml", "run.json", "summary.json", "metrics.jsonl", "README.md", "curves.csv")
WARMSTART_FILES = ("summary.json", "lfo_cache.json", "run_metadata.json", "metrics.jsonl", "eval_by_difficulty.csv")


def lfo_home() -> Path:
    """$LFO_HOME as lfo resolves it (stdlib only: this script runs without the package)."""
    return Path(os.environ.get("LFO_HOME") or Path.home() / ".cache" / "lfo").expanduser()


def warmstart_dir(run: Path) -> Path | str | None:
    """The warm start a finished run trained from, where its summary's ``base_model_ref`` says it lives; a
    string saying why when the run names a warm start outside ``$LFO_HOME``; None when it trained from none."""
    ref = json.loads((run / "summary.json").read_text()).get("base_model_ref") or {}
    if not isinstance(ref, dict) or not ref.get("warmstart"):
        return None  # an embedded tier or a named model: nothing of its own to keep
    if not ref.get("lfo_home"):
        return f"{run.name} (its warm start is not under $LFO_HOME)"
    model = lfo_home() / ref["lfo_home"]
    return model.parent if model.name == "model" else model


def staged(target: Path, fill, *args) -> None:
    """``target`` made whole or not at all: ``fill(*args, tmp)`` writes a hidden sibling, renamed into place."""
    tmp = target.parent / f".{target.name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    fill(*args, tmp)
    tmp.rename(target)


def copy_files(src: Path, names, tmp: Path) -> None:
    for name in names:
        if (src / name).is_file():
            shutil.copy2(src / name, tmp / name)


def copy_run(run: Path, tmp: Path) -> None:
    """A run's small files; its validation records gzip-compressed."""
    copy_files(run, FILES, tmp)
    if (run / "validation").is_dir():
        (tmp / "validation").mkdir()
        for f in sorted((run / "validation").glob("*.json")):
            data = json.dumps(json.loads(f.read_text()), separators=(",", ":"), sort_keys=True).encode()
            (tmp / "validation" / f"{f.name}.gz").write_bytes(gzip.compress(data, mtime=0))


def finished(run: Path) -> bool:
    try:
        return json.loads((run / "summary.json").read_text()).get("status") == "complete"
    except (OSError, ValueError, AttributeError):
        return False


def snapshot(src: Path, dst: Path, warmstarts: Path | None = None) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {"copied": [], "kept": [], "unfinished": [], "warmstarts": [], "warmstarts_missing": []}
    dst.mkdir(parents=True, exist_ok=True)
    for run in sorted(p for p in src.iterdir() if (p / "recipe.yaml").is_file()):
        done = finished(run)
        ws = warmstart_dir(run) if warmstarts is not None and done else None
        if isinstance(ws, str):
            out["warmstarts_missing"].append(ws)
        elif ws is not None and not (warmstarts / ws.name).exists():
            if (ws / "summary.json").is_file():
                staged(warmstarts / ws.name, copy_files, ws, WARMSTART_FILES)
                out["warmstarts"].append(ws.name)
            else:
                out["warmstarts_missing"].append(ws.name)
        if (dst / run.name).exists():
            out["kept"].append(run.name)
        elif not done:
            out["unfinished"].append(run.name)
        else:
            staged(dst / run.name, copy_run, run)
            out["copied"].append(run.name)
    if (src / "runs.csv").is_file():
        shutil.copy2(src / "runs.csv", dst / "runs.csv")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("src", type=Path, help="the grid's runs dir (lfo ablate --runs-dir)")
    p.add_argument("dst", type=Path, help="where the copies go, e.g. reports/studies/NAME/runs")
    p.add_argument("--warmstarts", type=Path, help="also copy each finished run's warm start's small files here")
    a = p.parse_args(argv)
    if not a.src.is_dir():
        print(f"error: {a.src} is not a directory", file=sys.stderr)
        return 2
    res = snapshot(a.src, a.dst, a.warmstarts)
    print(f"copied {len(res['copied'])} finished runs, kept {len(res['kept'])} already there, "
          f"skipped {len(res['unfinished'])} unfinished: {', '.join(res['unfinished']) or '-'}")
    if a.warmstarts is not None:
        print(f"copied {len(res['warmstarts'])} warm starts; not found under {lfo_home()}: "
              f"{', '.join(res['warmstarts_missing']) or '-'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

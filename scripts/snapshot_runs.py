"""Copy the small files of a grid's finished runs into the repo, so its report can be regenerated from git.

    python scripts/snapshot_runs.py ~/.cache/lfo/grids/observation_cpu reports/studies/observation_cpu/runs

For each finished run (summary.json with status complete) under SRC: recipe.yaml, run.json,
summary.json, metrics.jsonl, README.md (the model card) and curves.csv as they are, and validation/*.json
gzip-compressed (per-episode records, ~10x smaller); never weights, checkpoints or trajectories. The grid's
runs.csv is copied too. A run already in DST is left as it is (a finished run never changes); an unfinished
one is skipped. `lfo report DST` reads the copies like the run dirs.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import sys
from pathlib import Path

FILES = ("recipe.yaml", "run.json", "summary.json", "metrics.jsonl", "README.md", "curves.csv")


def finished(run: Path) -> bool:
    try:
        return json.loads((run / "summary.json").read_text()).get("status") == "complete"
    except (OSError, ValueError, AttributeError):
        return False


def snapshot(src: Path, dst: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {"copied": [], "kept": [], "unfinished": []}
    dst.mkdir(parents=True, exist_ok=True)
    for run in sorted(p for p in src.iterdir() if (p / "recipe.yaml").is_file()):
        target = dst / run.name
        if target.exists():
            out["kept"].append(run.name)
            continue
        if not finished(run):
            out["unfinished"].append(run.name)
            continue
        tmp = dst / f".{run.name}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        for name in FILES:
            if (run / name).is_file():
                shutil.copy2(run / name, tmp / name)
        if (run / "validation").is_dir():
            (tmp / "validation").mkdir()
            for f in sorted((run / "validation").glob("*.json")):
                data = json.dumps(json.loads(f.read_text()), separators=(",", ":"), sort_keys=True).encode()
                (tmp / "validation" / f"{f.name}.gz").write_bytes(gzip.compress(data, mtime=0))
        tmp.rename(target)
        out["copied"].append(run.name)
    if (src / "runs.csv").is_file():
        shutil.copy2(src / "runs.csv", dst / "runs.csv")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("src", type=Path, help="the grid's runs dir (lfo ablate --runs-dir)")
    p.add_argument("dst", type=Path, help="where the copies go, e.g. reports/studies/NAME/runs")
    a = p.parse_args(argv)
    if not a.src.is_dir():
        print(f"error: {a.src} is not a directory", file=sys.stderr)
        return 2
    res = snapshot(a.src, a.dst)
    print(f"copied {len(res['copied'])} finished runs, kept {len(res['kept'])} already there, "
          f"skipped {len(res['unfinished'])} unfinished: {', '.join(res['unfinished']) or '-'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

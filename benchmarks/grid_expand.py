"""Seconds to expand and check every shipped grid (what `lfo ablate --dry-run` does per grid), with lfo's YAML
reading as it is (libyaml's parser, each file parsed once per process) against PyYAML's pure-Python parser
reading every file anew for every cell. Everything else is the same code in both arms.

Both arms run in this process, after one untimed expansion that imports what they need; lfo's arm starts each
repeat with an empty parse cache, as a fresh process does; each arm is the best of ``--repeats``. Prints both
and the ratio (pure Python / lfo's).

    python benchmarks/grid_expand.py
    python benchmarks/grid_expand.py --repeats 3 --json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from unittest import mock

import yaml

REPO = Path(__file__).resolve().parents[1]


def expand_all() -> int:
    from lfo_cli.ablate.cells import expand
    from lfo_cli.ablate.grid import load_grid

    return sum(len(expand(load_grid(p.stem), Path("/nonexistent"))) for p in sorted((REPO / "recipes" / "grids").glob("*.yaml")))


def timed(repeats: int) -> tuple[float, int]:
    from lfo_cli import recipes

    best, cells = float("inf"), 0
    for _ in range(repeats):
        recipes._PARSED.clear()
        t0 = time.perf_counter()
        cells = expand_all()
        best = min(best, time.perf_counter() - t0)
    return best, cells


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    from lfo_cli import recipes

    expand_all()  # the imports both arms use
    lfo_s, cells = timed(a.repeats)

    class PurePython(yaml.SafeLoader):  # what lfo's loader was: the same resolvers, PyYAML's Python parser
        pass

    PurePython.yaml_implicit_resolvers = recipes.YamlLoader.yaml_implicit_resolvers

    def parse_every_time(path: Path):
        return yaml.load(path.read_text(encoding="utf-8"), Loader=PurePython)

    with mock.patch.object(recipes, "_parse_yaml", parse_every_time):
        python_s, _ = timed(a.repeats)
    out = {"cells": cells, "lfo_s": round(lfo_s, 3), "pure_python_s": round(python_s, 3),
           "ratio": round(python_s / lfo_s, 2)}
    if a.json:
        print(json.dumps(out))
    else:
        print(f"{cells} cells of {len(list((REPO / 'recipes' / 'grids').glob('*.yaml')))} grids: "
              f"pure-Python YAML, every file every time {python_s:.2f} s; lfo {lfo_s:.2f} s; "
              f"ratio {python_s / lfo_s:.1f}x")


if __name__ == "__main__":
    main()

"""Seconds to expand and check every shipped grid (what `lfo ablate --dry-run` does per grid), with lfo's YAML
reading as it is (libyaml's parser, each text parsed once per process) against PyYAML's pure-Python parser
reading every file anew for every cell. Everything else is the same code in both arms.

Both arms run in this process, after one untimed expansion that imports what they need, in ``--pairs``
interleaved pairs (the order alternating within each pair); lfo's arm starts each time with an empty parse
cache, as a fresh process does. Prints the median of each arm and the per-pair ratio (pure Python / lfo's) with
its bootstrap 95% interval (scipy.stats.bootstrap over the pairs).

    python benchmarks/grid_expand.py
    python benchmarks/grid_expand.py --pairs 8 --json
"""

from __future__ import annotations

import argparse
import contextlib
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


def timed(parse=None) -> tuple[float, int]:
    """One expansion of every shipped grid: its seconds and cells (``parse`` replaces lfo's YAML reading)."""
    from lfo_cli import recipes

    recipes._PARSED.clear()
    with mock.patch.object(recipes, "_parse_yaml", parse) if parse else contextlib.nullcontext():
        t0 = time.perf_counter()
        cells = expand_all()
        return time.perf_counter() - t0, cells


def main() -> None:
    import numpy as np
    from scipy import stats

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    from lfo_cli import recipes

    class PurePython(yaml.SafeLoader):  # what lfo's loader was: the same resolvers, PyYAML's Python parser
        pass

    PurePython.yaml_implicit_resolvers = recipes.YamlLoader.yaml_implicit_resolvers

    def parse_every_time(path: Path):
        return yaml.load(path.read_text(encoding="utf-8"), Loader=PurePython)

    expand_all()  # the imports both arms use
    lfo, pure, cells = [], [], 0
    for i in range(a.pairs):
        for arm in (("lfo", "pure") if i % 2 == 0 else ("pure", "lfo")):
            seconds, cells = timed(None if arm == "lfo" else parse_every_time)
            (lfo if arm == "lfo" else pure).append(seconds)
    ratios = np.array(pure) / np.array(lfo)
    ci = stats.bootstrap((ratios,), np.median, confidence_level=0.95, random_state=0).confidence_interval
    out = {"cells": cells, "pairs": a.pairs, "lfo_s": round(float(np.median(lfo)), 3),
           "pure_python_s": round(float(np.median(pure)), 3), "ratio": round(float(np.median(ratios)), 2),
           "ratio_low": round(float(ci.low), 2), "ratio_high": round(float(ci.high), 2)}
    if a.json:
        print(json.dumps(out))
    else:
        print(f"{cells} cells, {a.pairs} interleaved pairs: pure-Python YAML, every file every time "
              f"{out['pure_python_s']:.2f} s; lfo {out['lfo_s']:.2f} s (medians); ratio {out['ratio']:.1f}x "
              f"[95% CI {out['ratio_low']:.1f}, {out['ratio_high']:.1f}]")


if __name__ == "__main__":
    main()

"""benchmarks/profile_compare.py: pair ratios with their interval, and the 90-step projection."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
import profile_compare  # noqa: E402


def profile(wall: float, evaluation: float, steps: int = 10) -> dict:
    return {"wall_s": wall, "steps": steps, "phases": {"evaluation": evaluation, "generation": wall - evaluation}}


def test_projection_scales_steps_and_evaluations_separately():
    # 10 steps of 10 s and two evaluations (with held-out) of 50 s each: 90 steps of 10 s, and the
    # evaluation x (7 x 300 + 2 x 200) / (2 x 300 + 2 x 200) = 2.5
    assert profile_compare.projected_run(profile(200.0, 100.0)) == 900.0 + 250.0


def test_ratio_interval_over_pairs_and_the_printed_table(tmp_path, capsys):
    mean, lo, hi = profile_compare.ratio_ci([0.5, 0.5])
    assert math.isclose(mean, 0.5) and math.isclose(lo, 0.5) and math.isclose(hi, 0.5)
    mean, lo, hi = profile_compare.ratio_ci([0.4, 0.6, 0.5])
    assert lo < mean < hi and math.isclose(mean, (0.4 * 0.6 * 0.5) ** (1 / 3))
    assert math.isnan(profile_compare.ratio_ci([0.5])[1])
    files = []
    for i, (wall, ev) in enumerate([(200, 100), (100, 50), (220, 110), (120, 60)]):
        files.append(tmp_path / f"p{i}.json")
        files[-1].write_text(json.dumps(profile(wall, ev)))
    assert profile_compare.main([str(f) for f in files]) == 0
    out = capsys.readouterr().out
    assert "pair 1: 200.0 s -> 100.0 s (x0.500)" in out and "over 2 pair(s)" in out and "evaluation" in out

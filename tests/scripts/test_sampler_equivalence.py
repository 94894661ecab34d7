"""benchmarks/sampler_equivalence.py's two one-sided tests."""

from __future__ import annotations

import random
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
import sampler_equivalence  # noqa: E402


def paired_diffs(p_a: float, p_b: float, n: int, seed: int = 0) -> list[float]:
    rng = random.Random(seed)
    return [float(rng.random() < p_a) - float(rng.random() < p_b) for _ in range(n)]


def test_equal_rates_are_shown_equivalent_and_a_shift_past_the_margin_is_not():
    same = sampler_equivalence.tost_paired(paired_diffs(0.3, 0.3, 4000), margin=0.03)
    assert same["equivalent"] and same["ci90"][0] > -0.03 and same["ci90"][1] < 0.03
    shifted = sampler_equivalence.tost_paired(paired_diffs(0.38, 0.3, 4000), margin=0.03)
    assert not shifted["equivalent"] and shifted["p_upper"] > 0.05
    small = sampler_equivalence.tost_paired(paired_diffs(0.3, 0.3, 40), margin=0.03)
    assert not small["equivalent"]  # too few episodes to show it

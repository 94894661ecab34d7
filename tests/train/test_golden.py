"""The training path's behaviour is pinned: every coupling reproduces its golden values (tests/train/golden_runs.py)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from golden_runs import ABS_TOL, CASES, GOLDEN, REL_TOL, run_all  # noqa: E402

pytestmark = pytest.mark.slow


def test_every_coupling_reproduces_its_golden_values(tmp_path):
    golden = json.loads(GOLDEN.read_text())["runs"]
    got = run_all(tmp_path)
    assert sorted(got) == sorted(golden) == sorted(f"{c}/{s}" for c, s in CASES)
    for case, rows in golden.items():
        assert len(got[case]) == len(rows)
        for want, have in zip(rows, got[case], strict=True):
            assert sorted(have) == sorted(want), f"{case} step {want['step']}: other metrics were logged"
            off = {k: (want[k], have[k]) for k in want
                   if not math.isclose(want[k], have[k], rel_tol=REL_TOL, abs_tol=ABS_TOL)}
            assert not off, f"{case} step {want['step']}: {off}"

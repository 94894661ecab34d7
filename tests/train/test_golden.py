"""The training path's behaviour is pinned: every coupling reproduces its golden values (tests/train/golden_runs.py)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from golden_runs import ABS_TOL, CASES, load_golden, run_all  # noqa: E402

pytestmark = pytest.mark.slow
# Metrics added after the first golden values were recorded (new measurements, not changed behaviour): compared
# where a file has them.
ADDED_SINCE = {"grad_norm/policy_from_rl", "grad_norm/wm_over_rl"}


def test_every_coupling_reproduces_its_golden_values(tmp_path):
    golden, rel_tol, source = load_golden()
    got = run_all(tmp_path)
    assert sorted(got) == sorted(golden) == sorted(f"{c}/{s}" for c, s in CASES)
    for case, rows in golden.items():
        assert len(got[case]) == len(rows)
        for want, have in zip(rows, got[case], strict=True):
            assert sorted(set(have) - ADDED_SINCE) == sorted(set(want) - ADDED_SINCE), \
                f"{case} step {want['step']}: other metrics were logged"
            off = {k: (want[k], have[k]) for k in want
                   if not math.isclose(want[k], have[k], rel_tol=rel_tol, abs_tol=ABS_TOL)}
            assert not off, f"{case} step {want['step']} vs {source}: {off}"


def test_the_rl_part_of_the_policy_gradient_is_what_rl_alone_gives(tmp_path):
    """`grad_norm/policy_from_rl` is the policy gradient minus the probed world-model part (no second
    backward). At the first step, stacked and separate share parameters and rollouts, and separate's world
    model sends the policy nothing: separate's whole policy gradient is the RL part that stacked must report,
    and `wm_over_rl` is stacked's probe over it."""
    import torch
    from golden_runs import run_case

    golden, rel_tol, _ = load_golden()
    rl_alone = golden["separate/joint"][0]["grad_norm/policy"]
    (first, *_) = run_case("stacked", "joint", tmp_path)
    assert first["grad_norm/policy_from_rl"] == pytest.approx(rl_alone, rel=rel_tol)
    assert first["grad_norm/wm_over_rl"] == pytest.approx(first["grad_norm/policy_from_wm"] / rl_alone, rel=1e-4)
    assert first["grad_norm/wm_over_rl"] > 1  # here the world model sends the policy more than RL does

    # No reward variance: the RL part is zero, and nothing is logged (not a ratio over round-off).
    import golden_runs

    original = golden_runs.rollouts

    def flat_advantages(tokenizer, n=8, seed=0):
        output, envs = original(tokenizer, n=n, seed=seed)
        output["advantages"] = torch.zeros_like(output["advantages"])
        return output, envs

    golden_runs.rollouts = flat_advantages
    try:
        rows = run_case("stacked", "joint", tmp_path / "flat")
    finally:
        golden_runs.rollouts = original
    assert all("grad_norm/wm_over_rl" not in r and r["grad_norm/policy_from_wm"] > 0 for r in rows)

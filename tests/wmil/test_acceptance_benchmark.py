"""Acceptance studies (long; `pytest -m benchmark tests/wmil`): the design's MVP over 5 seeds, throughput."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from lfo_cli.wmil.config import WMILConfig
from lfo_cli.wmil.trainer import train


@pytest.mark.benchmark
@pytest.mark.parametrize("seed", [10, 11, 12, 13, 14])
def test_mvp_pattern_echo_criteria(tmp_path, seed):
    """PatternEcho, 8 actions, hidden 64, 2 layers, REINFORCE, deterministic parent, 10,000 steps."""
    s = train(WMILConfig(seed=seed, steps=10_000), tmp_path / "run", progress=False, quiet=True)
    c = s["checks"]
    assert c["success_at_5000"] > 0.5 and c["final_success"] > 0.9
    assert c["entropy_falls"] and c["wm_mse_falls"]
    assert s["eval"]["overall"]["success"] > 0.9


@pytest.mark.benchmark
def test_throughput_targets():
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "wmil_throughput.py"
    spec = importlib.util.spec_from_file_location("wmil_throughput", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    r = mod.main(["--seconds", "5", "--json"])
    assert r["ratio"] >= 50 and r["vectorised"]["env_steps_per_s"] >= 20_000
    assert r["time_to_50pct"]["training_wall_s"] < 10

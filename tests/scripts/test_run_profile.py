"""benchmarks/run_profile.py on a tiny model: every phase of a real run is timed, and they add up to its wall time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "train"))
from tiny import tiny_model, tiny_tokenizer  # noqa: E402

pytestmark = pytest.mark.slow


def test_the_phases_of_a_tiny_run_add_up_to_its_wall_time(tmp_path):
    from lfo_cli.env import generate_world, write_world

    write_world(generate_world(num_companies=12, num_train_tasks=40, num_val_tasks=8, heldout_fraction=0.25, seed=5),
                tmp_path / "data")
    tok = tiny_tokenizer()
    tiny_model(tok).save_pretrained(tmp_path / "model")
    tok.save_pretrained(tmp_path / "model")
    sets = {"model.name": str(tmp_path / "model"), "model.warmstart": "null", "data.dir": str(tmp_path / "data"),
            "eval.every": "2", "eval.num_tasks": "2", "lora.r": "4", "lora.alpha": "8", "trainer.save_steps": "1",
            "trainer.max_completion_length": "24", "trainer.per_device_train_batch_size": "4",
            "trainer.num_generations": "2", "trainer.logging_steps": "1", "wm.coef": "0.5", "wm.grad_probe_every": "1"}
    cmd = [sys.executable, str(REPO / "benchmarks" / "run_profile.py"), "--recipe", "dual_lora_micro", "--steps", "2",
           "--out-dir", str(tmp_path / "out"), "--tag", "tiny"]
    for k, v in sets.items():
        cmd += ["--set", f"{k}={v}"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path,
                          env={**os.environ, "OMP_NUM_THREADS": "1", "TRL_EXPERIMENTAL_SILENCE": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    (path,) = (tmp_path / "out").glob("run_profile_dual_lora_micro_tiny_*.json")
    result = json.loads(path.read_text())
    phases = result["phases"]
    for phase in ("generation", "environment", "reward", "policy loss", "world-model record", "world-model loss",
                  "backward", "optimizer", "evaluation", "checkpoint", "logging"):
        assert result["calls"].get(phase, 0) > 0 and phase in phases, phase  # timed (a random model calls no tool)
    assert sum(phases.values()) == pytest.approx(result["wall_s"], abs=0.05 * len(phases))
    assert 0 <= phases["rest"] < result["wall_s"] / 2
    assert result["calls"]["generation"] >= 2 and "s per step" in done.stdout

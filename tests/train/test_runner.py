"""`lfo train` end to end on a tiny local model: run dir layout, adapters, kill -9 and --resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from tiny import tiny_model, tiny_tokenizer  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from lfo_cli.env import generate_world, write_world

    root = tmp_path_factory.mktemp("train_e2e")
    world = generate_world(num_companies=12, num_train_tasks=40, num_val_tasks=8, heldout_fraction=0.25, seed=5)
    write_world(world, root / "data")
    tok = tiny_tokenizer()
    tiny_model(tok).save_pretrained(root / "model")
    tok.save_pretrained(root / "model")
    return root


def train_cmd(root: Path, out: Path, steps: int, *extra: str) -> list[str]:
    sets = {
        "model.name": str(root / "model"), "model.warmstart": "null", "data.dir": str(root / "data"),
        "eval.every": "0", "lora.r": "4", "lora.alpha": "8", "wm.grad_probe_every": "1",
        "trainer.max_steps": str(steps), "trainer.save_steps": "1", "trainer.max_completion_length": "24",
        "trainer.per_device_train_batch_size": "4", "trainer.num_generations": "2", "trainer.logging_steps": "1",
    }
    cmd = [sys.executable, "-m", "lfo_cli", "train", "--recipe", "dual_lora_micro", "--out", str(out)]
    for k, v in sets.items():
        cmd += ["--set", f"{k}={v}"]
    return cmd + list(extra)


def env():
    return {**os.environ, "OMP_NUM_THREADS": "1", "TRL_EXPERIMENTAL_SILENCE": "1"}


def steps_logged(out: Path) -> list[int]:
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [r["step"] for r in rows if "loss" in r]  # per-step training rows (not the final summary row)


def test_run_dir_layout_and_adapters_load(setup, tmp_path):
    out = tmp_path / "run"
    subprocess.run(train_cmd(setup, out, 2), check=True, capture_output=True, env=env(), timeout=600)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "complete" and summary["steps"] == 2
    run = json.loads((out / "run.json").read_text())
    assert run["seed"] == 0 and "torch" in run["versions"] and run["recipe"] == "dual_lora_micro"
    assert steps_logged(out) == [1, 2]
    assert summary["figures"] == ["curves.csv", "curves.png"] and (out / "curves.png").stat().st_size > 0
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(setup / "model")
    policy = PeftModel.from_pretrained(base, out)
    policy.load_adapter(str(out / "world_model"), adapter_name="world_model")
    assert set(policy.peft_config) == {"default", "world_model"}


def test_kill_and_resume_continue_without_gap(setup, tmp_path):
    out = tmp_path / "run"
    proc = subprocess.Popen(train_cmd(setup, out, 5), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env())
    deadline = time.time() + 500
    while not (out / "checkpoint-2" / "trainer_state.json").exists():
        assert proc.poll() is None, "training ended before it could be killed"
        assert time.time() < deadline
        time.sleep(0.5)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (out / "summary.json").exists()
    done = subprocess.run([sys.executable, "-m", "lfo_cli", "train", "--resume", str(out)],
                          capture_output=True, text=True, env=env(), timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == 5 and summary["resumed_from"]
    assert steps_logged(out) == [1, 2, 3, 4, 5]


def test_accelerate_two_cpu_processes(setup, tmp_path):
    """The real distributed path: `accelerate launch` with 2 CPU processes (gloo) runs 2 steps."""
    out = tmp_path / "ddp"
    cmd = train_cmd(setup, out, 2)
    i = cmd.index("-m")
    launch = [sys.executable, "-m", "accelerate.commands.launch", "--config_file",
              str(Path(__file__).resolve().parents[2] / "recipes" / "accelerate" / "cpu_2proc.yaml"), *cmd[i:]]
    done = subprocess.run(launch, capture_output=True, text=True, env=env(), timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    # 4 completions per process per step x 2 processes / 2 generations = 4 tasks per step
    assert summary["steps"] == 2 and summary["tasks_seen"] == 8
    assert steps_logged(out) == [1, 2]


@pytest.mark.parametrize("seed", [0, 4])
def test_fresh_training_tasks_replace_the_train_split(seed):
    from lfo_cli.env import generate_world
    from lfo_cli.train.recipe_config import DataSection
    from lfo_cli.train.runner import training_tasks

    world = generate_world(num_companies=12, num_train_tasks=40, num_val_tasks=8, heldout_fraction=0.25, seed=5)
    assert training_tasks(world, DataSection(), seed) == world.tasks["train"]
    fresh = training_tasks(world, DataSection(fresh_tasks=50, max_difficulty=2), seed)
    assert len(fresh) == 20 and {t.difficulty for t in fresh} == {1, 2}  # 50 balanced over 1..5, then filtered
    assert not {t.task_id for t in fresh} & {t.task_id for t in world.all_tasks()}
    assert all(world.task(t.task_id) is t for t in fresh)  # the environment can reset to them
    assert {t.company_id for t in fresh} <= world.train_company_ids
    assert len(training_tasks(generate_world(12, 40, 8, 0.25, 5), DataSection(fresh_tasks=50, max_tasks=7), seed)) == 7


def test_validation_metrics_are_means_over_episodes():
    from lfo_cli.train.runner import validation_metrics

    episodes = [{"difficulty": 1, "success": True, "turns": 4, "phone_calls": 1, "first_call": "right_department"},
                {"difficulty": 1, "success": False, "turns": 3, "phone_calls": 1, "first_call": "other_department"},
                {"difficulty": 2, "success": False, "turns": 2, "phone_calls": 0, "first_call": None},
                {"difficulty": 2, "success": False, "turns": 5, "phone_calls": 2, "first_call": "right_department"}]
    turns = [{"valid_tool_call": True, "final_reply": False}] * 3 + [{"valid_tool_call": False, "final_reply": False}]
    row = validation_metrics({"episodes": episodes, "turns": turns})
    assert row["val/success"] == 0.25 and row["val/success/d1"] == 0.5 and row["val/success/d2"] == 0.0
    assert row["val/turns"] == 3.5 and row["val/calls_per_task"] == 1.0
    assert row["val/first_call_right"] == 0.5 and row["val/valid_tool_call_rate"] == 0.75

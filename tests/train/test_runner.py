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
from tiny import lfo_here, logged_values, tiny_world_and_model  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    return tiny_world_and_model(tmp_path_factory.mktemp("train_e2e"))


def train_cmd(root: Path, out: Path, steps: int, *extra: str, **sets_: str) -> list[str]:
    sets = {
        "model.name": str(root / "model"), "model.warmstart": "null", "data.dir": str(root / "data"),
        "eval.every": "0", "lora.r": "4", "lora.alpha": "8", "wm.grad_probe_every": "1",
        "trainer.max_steps": str(steps), "trainer.save_steps": "1", "trainer.max_completion_length": "24",
        "trainer.per_device_train_batch_size": "4", "trainer.num_generations": "2", "trainer.logging_steps": "1",
        "wm.stop_without_targets": "0",  # the random tiny model calls no tool: no world-model target, by design here
    }
    sets.update({k.replace("__", "."): v for k, v in sets_.items()})
    cmd = [sys.executable, "-m", "lfo_cli", "train", "--recipe", "dual_lora_micro", "--out", str(out)]
    for k, v in sets.items():
        cmd += ["--set", f"{k}={v}"]
    return cmd + list(extra)


def env():
    return {**os.environ, "OMP_NUM_THREADS": "1", "TRL_EXPERIMENTAL_SILENCE": "1"}


def steps_logged(out: Path) -> list[int]:
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [r["step"] for r in rows if "loss" in r]  # per-step training rows (not the final summary row)


@pytest.fixture(scope="module")
def layout(setup, tmp_path_factory) -> Path:
    """A 3-step run with validation, a held-out control and TensorBoard, trained once for the tests below."""
    out = tmp_path_factory.mktemp("layout") / "run"
    # Validation every 2 of 3 steps on 2 tasks x 2 samples of difficulties 1-2: evaluations at 0, 2 and
    # (max_steps not a multiple of `every`) at the end.
    # A held-out control of 2 tasks at the start and the end; training and validation on 3 companies.
    validation = ["eval.every=2", "eval.num_tasks=2", "eval.samples_per_task=2", "eval.difficulties=[1,2]",
                  "eval.heldout_tasks=2", "data.companies=3", "data.fresh_tasks=30", "eval.fresh_tasks=30",
                  "trainer.report_to=tensorboard"]
    cmd = train_cmd(setup, out, 3)
    for item in validation:
        cmd += ["--set", item]
    done = lfo_here(cmd)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def test_run_dir_layout_and_adapters_load(setup, layout):
    out = layout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "complete" and summary["steps"] == 3
    run = json.loads((out / "run.json").read_text())
    assert run["seed"] == 0 and "torch" in run["versions"] and run["recipe"] == "dual_lora_micro"
    assert steps_logged(out) == [1, 2, 3]
    assert sorted(p.name for p in (out / "validation").iterdir()) == [
        "heldout_step_0.json", "heldout_step_3.json", "step_0.json", "step_2.json", "step_3.json"]
    assert summary["heldout/vs_start/n"] == 4 and "heldout/success/d2" in summary
    assert 0 <= summary["val/wm_semantic_acc"] <= 1  # the world-model probe ran (wm.coef 0.5)
    episodes = json.loads((out / "validation" / "step_2.json").read_text())["episodes"]
    assert len(episodes) == 4 and all("form_fields" in e and "difficulty" in e for e in episodes)
    start = json.loads((out / "validation" / "step_0.json").read_text())["outcomes"]
    final = json.loads((out / "validation" / "step_3.json").read_text())["outcomes"]
    assert len(start) == 4 and [t for t, _ in start] == [t for t, _ in final]
    assert start[0][0] == start[1][0] and start[0][0] != start[2][0]  # each task twice, one task per difficulty
    assert summary["val/vs_start/n"] == 4
    assert summary["val/vs_start/final_success"] == summary["val/success"]
    assert "reward/first10" in summary and "reward/last10" in summary  # (a random tiny model rarely calls: no wm rows)
    assert summary["figures"] == ["curves.csv", "curves.png"] and (out / "curves.png").stat().st_size > 0
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(setup / "model")
    policy = PeftModel.from_pretrained(base, out)
    policy.load_adapter(str(out / "world_model"), adapter_name="world_model")
    assert set(policy.peft_config) == {"default", "world_model"}


def test_gradient_accumulation_carries_the_world_model_columns_through_trls_split(setup, tmp_path):
    """With 2 micro-batches per generation TRL shuffles and splits the batch itself: the example column
    and the 0-d world-model total must survive that, in TRL's own loop, and every step is logged."""
    out = tmp_path / "run"
    cmd = train_cmd(setup, out, 2, trainer__per_device_train_batch_size="2", trainer__gradient_accumulation_steps="2")
    done = lfo_here(cmd)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "complete" and summary["steps"] == 2
    assert steps_logged(out) == [1, 2]


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_complete_run_is_never_resumed_but_can_continue_into_a_new_dir(setup, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from lfo_cli.cli import app
    from lfo_cli.errors import LfoError
    from lfo_cli.train.run import Run

    # the run is made by a script through lfo_cli.train.run.Run, what `lfo train` calls: nothing is written
    # before start(), and the run is laid out as `lfo train`'s
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    out = tmp_path / "run"
    cmd = train_cmd(setup, out, 2)
    sets = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--set"]
    run = Run.new("dual_lora_micro", sets, out=out)
    assert run.run_dir == out and not out.exists() and run.recipe.resolved["trainer"]["max_steps"] == 2
    assert run.start()["status"] == "complete"
    assert steps_logged(out) == [1, 2] and (out / "recipe.yaml").is_file() and (out / "run.json").is_file()
    with pytest.raises(LfoError, match="already holds a run"):
        Run.new("dual_lora_micro", sets, out=out)
    with pytest.raises(LfoError, match="is complete; continue it into a new dir"):
        Run.resumed(out)
    later = Run.resumed(out, out=tmp_path / "later", overrides=["trainer.max_steps=3"])
    assert later.resume and later.source == out and not (tmp_path / "later").exists()
    before = _tree(out)
    resume = ["train", "--resume", str(out)]
    done = CliRunner().invoke(app, resume)
    assert done.exit_code == 0 and "is complete; nothing to resume" in done.stdout
    assert "--set trainer.max_steps=N" in " ".join(done.stdout.split())
    assert _tree(out) == before  # not a byte changed, no step 3
    refused = CliRunner().invoke(app, [*resume, "--set", "trainer.max_steps=3"])
    assert refused.exit_code == 2 and refused.stderr.count("\n") == 1 and "--out NEW" in refused.stderr
    more = tmp_path / "more"
    done = lfo_here(*resume, "--out", str(more), "--set", "trainer.max_steps=3")
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads((more / "summary.json").read_text())["steps"] == 3 and steps_logged(more) == [1, 2, 3]
    assert json.loads((more / "run.json").read_text())["continued_from"] == str(out)
    assert _tree(out) == before
    again = CliRunner().invoke(app, [*resume, "--out", str(more)])
    assert again.exit_code == 2 and "already exists" in again.stderr


# One uninterrupted run, the reference both resume tests must reproduce: 5 steps, evaluated every 2, every
# checkpoint kept.
WHOLE = {"eval__every": "2", "eval__num_tasks": "2", "trainer__save_total_limit": "10"}


@pytest.fixture(scope="module")
def whole(setup, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("whole") / "run"
    done = lfo_here(train_cmd(setup, out, 5, **WHOLE))
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def test_kill_and_resume_continue_without_gap(setup, whole, tmp_path):
    out = tmp_path / "run"
    proc = subprocess.Popen(train_cmd(setup, out, 5, **WHOLE), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env())
    deadline = time.time() + 500
    while not (out / "checkpoint-2" / "trainer_state.json").exists():
        assert proc.poll() is None, "training ended before it could be killed"
        assert time.time() < deadline
        time.sleep(0.5)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (out / "summary.json").exists()
    done = lfo_here("train", "--resume", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == 5 and summary["resumed_from"]
    assert steps_logged(out) == [1, 2, 3, 4, 5]
    # the run's time counts each of its 5 steps and 4 evaluations (steps 0, 2, 4 and the last) once, the ones
    # before the kill too; this invocation's only some
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    times = [r.get(k) for r in rows for k in ("step_time", "eval_seconds") if r.get(k)]
    assert [r["step"] for r in rows if "eval_seconds" in r] == [0, 2, 4, 5]
    assert summary["run_seconds"] == pytest.approx(sum(times), abs=0.2)
    assert summary["run_seconds"] > 0
    # exact resume: the same values as a run never interrupted (RNG, data order, environment seeds restored)
    assert logged_values(out) == logged_values(whole)


def test_an_incomplete_checkpoint_is_never_loaded_and_the_resume_is_exact(whole, tmp_path):
    """A kill while checkpoint-3 was being written leaves it without trainer_state.json (the Trainer writes
    that last): the resume starts from checkpoint-2, rewrites checkpoint-3, and logs what the whole run did."""
    import shutil

    cut = tmp_path / "cut"
    shutil.copytree(whole, cut)
    for p in ("checkpoint-4", "checkpoint-5", "summary.json", "world_model", "adapter_model.safetensors", "README.md"):
        shutil.rmtree(cut / p) if (cut / p).is_dir() else (cut / p).unlink()
    (cut / "checkpoint-3" / "trainer_state.json").unlink()  # cut off while writing
    (cut / "checkpoint-3" / "optimizer.pt").write_bytes(b"truncated")
    done = lfo_here("train", "--resume", str(cut))
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads((cut / "summary.json").read_text())["resumed_from"].endswith("checkpoint-2")
    assert logged_values(cut) == logged_values(whole)
    assert (cut / "checkpoint-3" / "trainer_state.json").is_file()


@pytest.mark.long
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


def tiny_warmstart_recipe(root: Path, tmp_path: Path) -> Path:
    recipe = tmp_path / "ws_tiny.yaml"
    recipe.write_text(
        f"base: {Path(__file__).resolve().parents[2] / 'recipes' / 'warmstart_micro.yaml'}\n"
        f"model: {{name: {root / 'model'}, full_finetune: true}}\n"
        "data: {fresh_tasks: 0, max_tasks: 4, rollouts_per_task: 1}\n"
        "train: {max_steps: 1, batch_size: 2, max_length: 8192, logging_steps: 1, save_steps: 1}\n"
        "eval: {num_tasks: 2, samples_per_task: 1, max_turns: 1, max_new_tokens: 8, batch_size: 2}\n"
    )
    return recipe


def test_a_warm_start_built_per_seed_in_the_run_leaves_mixed_precision_to_the_trainer(setup, tmp_path):
    """A warm start built on first use runs its own Trainer in the `lfo train` process (a fresh one here, as a
    user's): a bf16 GRPO run after it must still get its bf16 Accelerator (it crashed on the first GPU run).
    With `model.warmstart_per_seed` the run builds it with its own seed (its own cache entry, not the recipe's
    own seed's) and records the override beside the recipe in the base model's reference."""
    from lfo_cli.models.warmstart_cache import warmstart_status

    home = tmp_path / "home"
    recipe = tiny_warmstart_recipe(setup, tmp_path)
    out = tmp_path / "run"
    cmd = train_cmd(setup, out, 1, "--seed", "5", model__warmstart=str(recipe), model__warmstart_per_seed="true",
                    trainer__bf16="true", trainer__use_cpu="true")
    done = subprocess.run(cmd, capture_output=True, text=True, env={**env(), "LFO_HOME": str(home)}, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["steps"] == 1 and str(home / "warmstart") in summary["base_model"]
    assert json.loads((out / "run.json").read_text())["config"]["trainer"]["bf16"] is True
    drawn = warmstart_status(str(recipe), data_dir=str(setup / "data"), overrides=["seed=5"])["path"]
    own = warmstart_status(str(recipe), data_dir=str(setup / "data"))["path"]
    assert drawn != own and Path(summary["base_model"]).parent.name == Path(drawn).name
    assert summary["base_model_ref"]["warmstart_set"] == ["seed=5"]
    assert [p.name for p in (home / "warmstart").iterdir() if not p.name.startswith(".")] == [Path(drawn).name]


def test_distributed_launch_does_not_build_a_missing_warm_start(setup, tmp_path):
    """Under `accelerate launch` every rank would train the warm start (and under DeepSpeed its Trainer
    inherits the plugin): the run stops with the command that builds it, and builds nothing."""
    home = tmp_path / "home"
    recipe = tiny_warmstart_recipe(setup, tmp_path)
    cmd = train_cmd(setup, tmp_path / "ddp", 1, model__warmstart=str(recipe))
    i = cmd.index("-m")
    launch = [sys.executable, "-m", "accelerate.commands.launch", "--config_file",
              str(Path(__file__).resolve().parents[2] / "recipes" / "accelerate" / "cpu_2proc.yaml"), *cmd[i:]]
    done = subprocess.run(launch, capture_output=True, text=True, env={**env(), "LFO_HOME": str(home)}, timeout=600)
    assert done.returncode != 0
    assert "warm start 'ws_tiny' is not built yet" in done.stderr and f"lfo models build {recipe} --data-dir " in done.stderr
    assert not (home / "warmstart").exists() or not any((home / "warmstart").iterdir())


@pytest.mark.parametrize("seed", [0, 4])
def test_fresh_training_tasks_replace_the_train_split(seed):
    from lfo_cli.env import generate_world
    from lfo_cli.env.task_pools import training_tasks
    from lfo_cli.train.recipe_config import world_sections

    DataSection = world_sections("customer_service")["data"]

    world = generate_world(num_companies=12, num_train_tasks=40, num_val_tasks=8, heldout_fraction=0.25, seed=5)
    assert training_tasks(world, DataSection(), seed) == world.tasks["train"]
    fresh = training_tasks(world, DataSection(fresh_tasks=50, max_difficulty=2), seed)
    assert len(fresh) == 20 and {t.difficulty for t in fresh} == {1, 2}  # 50 balanced over 1..5, then filtered
    assert not {t.task_id for t in fresh} & {t.task_id for t in world.all_tasks()}
    assert all(world.task(t.task_id) is t for t in fresh)  # the environment can reset to them
    assert {t.company_id for t in fresh} <= world.train_company_ids
    assert len(training_tasks(generate_world(12, 40, 8, 0.25, 5), DataSection(fresh_tasks=50, max_tasks=7), seed)) == 7


def test_validation_metrics_are_means_over_episodes():
    from lfo_cli.env import generate_world
    from lfo_cli.env.plugin import CustomerServiceWorld
    from lfo_cli.train.run_metrics import validation_metrics

    episodes = [{"difficulty": 1, "success": True, "turns": 4, "phone_calls": 1, "first_call": "right_department"},
                {"difficulty": 1, "success": False, "turns": 3, "phone_calls": 1, "first_call": "other_department"},
                {"difficulty": 2, "success": False, "turns": 2, "phone_calls": 0, "first_call": None},
                {"difficulty": 2, "success": False, "turns": 5, "phone_calls": 2, "first_call": "right_department"}]
    turns = [{"valid_tool_call": True, "final_reply": False}] * 3 + [{"valid_tool_call": False, "final_reply": False}]
    row = validation_metrics({"episodes": episodes, "turns": turns}, world=CustomerServiceWorld(generate_world(12, 40, 8, 0.25, 5)))
    assert row["val/success"] == 0.25 and row["val/success/d1"] == 0.5 and row["val/success/d2"] == 0.0
    assert row["val/turns"] == 3.5 and row["val/calls_per_task"] == 1.0
    assert row["val/first_call_right"] == 0.5 and row["val/valid_tool_call_rate"] == 0.75


def _write_outcomes(run_dir: Path, step: int, outcomes: list) -> None:
    (run_dir / "validation").mkdir(parents=True, exist_ok=True)
    (run_dir / "validation" / f"step_{step}.json").write_text(json.dumps({"step": step, "outcomes": outcomes}))


def test_vs_start_pairs_final_with_step_zero(tmp_path):
    from lfo_cli.train.run_metrics import vs_start

    _write_outcomes(tmp_path, 0, [["a", 0], ["a", 0], ["b", 1], ["c", 1], ["d", 0]])
    _write_outcomes(tmp_path, 40, [["a", 1], ["a", 1], ["b", 1], ["c", 0], ["d", 0]])
    row = vs_start(tmp_path, 40)
    assert row["val/vs_start/n"] == 5 and row["val/vs_start/wins"] == 2 and row["val/vs_start/losses"] == 1
    assert row["val/vs_start/start_success"] == pytest.approx(0.4)
    assert row["val/vs_start/final_success"] == pytest.approx(0.6)
    assert row["val/vs_start/mean_diff"] == pytest.approx(0.2)
    assert row["val/vs_start/diff_low"] <= 0.2 <= row["val/vs_start/diff_high"]
    assert vs_start(tmp_path, 20) == {}  # no evaluation at that step
    assert vs_start(tmp_path, 0) == {}  # nothing to compare
    _write_outcomes(tmp_path, 60, [["a", 1], ["b", 1], ["a", 1], ["c", 0], ["d", 0]])
    assert vs_start(tmp_path, 60) == {}  # different episodes: not a paired comparison


def test_vs_start_per_difficulty_where_the_files_name_it(tmp_path):
    import json as _json

    from lfo_cli.train.run_metrics import vs_start

    eps = [{"task_id": t, "difficulty": d} for t, d in (("a", 1), ("b", 2), ("c", 2), ("d", 2))]
    for step, outs in ((0, [1, 0, 0, 0]), (30, [0, 1, 1, 0])):
        (tmp_path / "validation").mkdir(exist_ok=True)
        (tmp_path / "validation" / f"step_{step}.json").write_text(_json.dumps(
            {"step": step, "outcomes": [[e["task_id"], o] for e, o in zip(eps, outs, strict=True)], "episodes": eps}))
    row = vs_start(tmp_path, 30)
    assert row["val/vs_start/n"] == 4 and row["val/vs_start/d2/n"] == 3 and row["val/vs_start/d1/n"] == 1
    assert row["val/vs_start/d2/start_success"] == 0 and row["val/vs_start/d2/final_success"] == pytest.approx(2 / 3)
    assert row["val/vs_start/d2/wins"] == 2 and row["val/vs_start/d1/losses"] == 1


def test_trends_average_first_and_last_logged_values(tmp_path):
    from lfo_cli.train.run_metrics import trends

    rows = [{"step": i, "wm/token_acc": i / 10, "reward": 0.1} for i in range(1, 21)] + [{"step": 20, "val/success": 0.3}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    row = trends(tmp_path)
    assert row["wm/token_acc/first10"] == pytest.approx(0.55) and row["wm/token_acc/last10"] == pytest.approx(1.55)
    assert row["reward/first10"] == pytest.approx(0.1) and "losses/wm/first10" not in row
    short = trends(tmp_path, window=50)  # fewer rows than two windows: halves
    assert short["wm/token_acc/first50"] == pytest.approx(0.55)


@pytest.mark.parametrize("bad", [{"difficulties": []}, {"difficulties": [0]}, {"difficulties": [6]},
                                 {"samples_per_task": 0}, {"samples_per_task": 65}])
def test_eval_section_rejects_bad_values(bad):
    from lfo_cli.errors import LfoError
    from lfo_cli.train.recipe_config import EvalSection

    with pytest.raises(LfoError, match="eval\\."):
        EvalSection(**bad)
    assert EvalSection(difficulties=[2, 1, 2]).difficulties == [1, 2]


@pytest.mark.parametrize(("batch", "ga", "spg", "mu", "procs", "expected"), [
    (16, 1, 1, 1, 1, [0, 2, 4, 20]),     # 2 prompts x 8 generations per step
    (4, 2, 2, 1, 2, [0, 2, 4, 20]),      # accumulation over 2 micro-steps, 2 processes: 16 completions / 8
    (16, 1, 1, 2, 1, [0, 2, 2, 10]),     # num_iterations 2: each generated batch serves two steps
    (16, 1, 4, 1, 1, [0, 8, 8, 24]),     # steps_per_generation 4: one batch of 4 steps' prompts, made up front
])
def test_tasks_seen_follows_trl_generation_batches(batch, ga, spg, mu, procs, expected):
    from types import SimpleNamespace

    from lfo_cli.train.callbacks import TasksSeen

    args = SimpleNamespace(per_device_train_batch_size=batch, gradient_accumulation_steps=ga, steps_per_generation=spg,
                           num_iterations=mu, num_generations=8)
    seen = TasksSeen(args, procs)
    assert [seen(s) for s in (0, 1, 2, 10)] == expected


def test_validation_pool_fresh_tasks_are_the_worlds_not_the_runs():
    """eval.fresh_tasks: new tasks on training companies, the same for every run of a world, apart from the
    val split and the RL/SFT draws; eval.difficulties filters them; 0 keeps the val split."""
    from lfo_cli.env import generate_world
    from lfo_cli.env.task_pools import validation_pool
    from lfo_cli.errors import LfoError
    from lfo_cli.train.recipe_config import EvalSection

    def world(seed=3):
        return generate_world(num_companies=14, num_train_tasks=20, num_val_tasks=10, heldout_fraction=0.3, seed=seed)

    w = world()
    assert validation_pool(w, EvalSection(difficulties=[2])) == [t for t in w.tasks["val"] if t.difficulty == 2]
    pool = validation_pool(w, EvalSection(fresh_tasks=35, difficulties=[1]))
    assert len(pool) == 7 and {t.difficulty for t in pool} == {1}  # 35 balanced over 5 difficulties
    assert all(t.company_id in w.train_company_ids for t in pool)
    assert all(w.task(t.task_id) == t for t in pool)  # registered: the environment resolves their ids
    ids = {t.task_id for t in pool}
    assert not ids & {t.task_id for split in w.tasks.values() for t in split}
    again = validation_pool(world(), EvalSection(fresh_tasks=35, difficulties=[1]))  # another run, same world
    assert [(t.task_id, t.goal, t.user_values) for t in again] == [(t.task_id, t.goal, t.user_values) for t in pool]
    other = validation_pool(world(seed=4), EvalSection(fresh_tasks=35, difficulties=[1]))
    assert [t.goal for t in other] != [t.goal for t in pool]
    with pytest.raises(LfoError, match="eval.fresh_tasks"):
        EvalSection(fresh_tasks=-1)
    with pytest.raises(LfoError, match="no validation tasks"):
        validation_pool(world(), EvalSection(fresh_tasks=3, difficulties=[5]))  # 3 draws: difficulties 1-3 only


def test_company_subset_restricts_training_and_validation_but_not_the_heldout_control():
    from lfo_cli.env import generate_world
    from lfo_cli.env.task_pools import heldout_pool, training_tasks, validation_pool
    from lfo_cli.env.tasks import select_companies
    from lfo_cli.errors import LfoError
    from lfo_cli.train.recipe_config import EvalSection, world_sections

    DataSection = world_sections("customer_service")["data"]

    world = generate_world(num_companies=14, num_train_tasks=20, num_val_tasks=10, heldout_fraction=0.3, seed=3)
    data = DataSection(fresh_tasks=100, companies=2, max_difficulty=2)
    subset = set(select_companies(world, 2))
    train = training_tasks(world, data, seed=0)
    assert {t.company_id for t in train} == subset and {t.difficulty for t in train} == {1, 2}
    val = validation_pool(world, EvalSection(fresh_tasks=50, difficulties=[2]), sorted(subset))
    assert {t.company_id for t in val} == subset and {t.difficulty for t in val} == {2}
    split = validation_pool(world, EvalSection(), sorted(subset))  # the val split, filtered to the subset
    assert split and {t.company_id for t in split} <= subset
    held = heldout_pool(world, EvalSection(heldout_tasks=9, heldout_difficulties=[1, 2]))
    assert len(held) == 9 and {t.company_id for t in held} <= world.heldout_company_ids
    assert {t.difficulty for t in held} == {1, 2} and all(world.task(t.task_id) is t for t in held)
    assert heldout_pool(world, EvalSection()) == []
    with pytest.raises(LfoError, match="data.companies needs data.fresh_tasks"):
        DataSection(companies=3)
    with pytest.raises(LfoError, match="eval.heldout"):
        EvalSection(heldout_tasks=-1)


def test_world_model_probe_calls_are_the_priors_auth_failures_at_exception_departments():
    from lfo_cli.env import generate_world, parse_reply
    from lfo_cli.env.plugin import exception_calls
    from lfo_cli.env.specificity import exception_fields
    from lfo_cli.train.objectives import objective_class

    world = generate_world(num_companies=14, num_train_tasks=60, num_val_tasks=30, heldout_fraction=0.3, seed=3)
    tasks = world.tasks["val"]
    calls = exception_calls(world, tasks, limit=5)
    assert 1 <= len(calls) <= 5
    for call in calls:
        reply = parse_reply(call.observation)
        assert reply.category == "auth_failure" and reply.fields  # names what is missing
        # the fields named include the exception's (the prior never asks for it)
        phone = call.action["args"]["phone_number"]
        company, dept = world.phone_index[phone.replace("-", "")]
        assert set(exception_fields(company)[dept.name]) & set(reply.fields)
    # the adapters the probe predicts with are the objective's
    assert objective_class("stacked").predict_adapters == ("policy", "world_model")
    assert objective_class("shared").predict_adapters == ("policy",)
    assert objective_class("separate").predict_adapters == ("world_model",)


def test_report_to_tensorboard_receives_lfos_own_metrics(layout):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = list(layout.rglob("events.out.tfevents.*"))  # TensorBoardCallback's default: RUN/runs/<time>_<host>/
    assert events
    acc = EventAccumulator(str(events[0].parent))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    # lfo's validation rows and gradient norms reach the tracker, next to TRL's own metrics (transformers'
    # TensorBoardCallback files every non-eval key under "train/")
    assert {"train/val/success", "train/grad_norm/policy", "train/grad_norm/wm"} <= tags, sorted(tags)
    assert [e.step for e in acc.Scalars("train/val/success")] == [0, 2, 3]
    # and metrics.jsonl still holds one validation row per evaluation
    rows = [json.loads(line) for line in (layout / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "val/success" in r] == [0, 2, 3]


@pytest.mark.parametrize(("value", "message"), [("foo", "unknown integration 'foo'"),
                                                 ("trackio", "pip install 'lfo[track]'")])
def test_report_to_is_checked_at_dry_run(value, message, monkeypatch):
    from transformers.integrations import integration_utils

    monkeypatch.setattr(integration_utils, "is_trackio_available", lambda: False)  # whatever is installed here
    from typer.testing import CliRunner

    from lfo_cli.cli import app

    result = CliRunner().invoke(app, ["train", "--recipe", "dual_lora_micro", "--set", f"trainer.report_to={value}",
                                      "--dry-run"])
    assert result.exit_code == 2 and message in result.output and result.output.count("\n") == 1


def test_console_lines_are_compact():
    from lfo_cli.console import format_log

    step = format_log({"reward": 0.41234, "frac_reward_zero_std": 0.25, "losses/policy": 0.01, "epoch": 0.1}, 3, 90)
    assert step == "step 3/90: reward 0.412 · zero-var groups 0.25 · policy loss 0.0100"
    sft = format_log({"loss": 0.5, "mean_token_accuracy": 0.9, "learning_rate": 1e-3}, 10, 100)
    assert sft == "step 10/100: loss 0.5000 · token acc 0.900"
    val = format_log({"val/success": 0.3, "val/success/d2": 0.05, "val/turns": 4.0}, 15, 90)
    assert val == "validation @ step 15: success 0.300 · d2 0.050"
    assert format_log({"epoch": 1.0}, 3, 90) is None
    assert format_log({"train_runtime": 123.4}, 90, 90) == "trained 90 steps in 123 s"


@pytest.mark.parametrize(("seed", "weights"), [(0, {1: 1, 2: 3}), (3, {1: 2, 2: 1}), (1, {"1": 0, "2": 1.5})])
def test_difficulty_weights_thin_the_pool_to_the_mix(seed, weights):
    from lfo_cli.env import generate_world
    from lfo_cli.env.task_pools import training_tasks
    from lfo_cli.train.recipe_config import world_sections

    DataSection = world_sections("customer_service")["data"]

    data = DataSection(fresh_tasks=200, max_difficulty=2, difficulty_weights=weights)
    w = data.difficulty_weights
    assert set(w) <= {1, 2} and all(isinstance(k, int) for k in w)  # string keys (a JSON round trip) become ints
    full = training_tasks(generate_world(12, 40, 8, 0.25, 5), DataSection(fresh_tasks=200, max_difficulty=2), seed)
    mixed = training_tasks(generate_world(12, 40, 8, 0.25, 5), data, seed)
    counts = {d: sum(t.difficulty == d for t in mixed) for d in (1, 2)}
    pool = {d: sum(t.difficulty == d for t in full) for d in (1, 2)}
    total = sum(w.values())
    for d in (1, 2):
        assert abs(counts[d] / len(mixed) - w.get(d, 0) / total) < 0.02
        assert counts[d] <= pool[d]
    assert max(counts[d] / pool[d] for d in (1, 2)) > 0.97  # the largest such sub-pool: one difficulty kept whole
    ids = [t.task_id for t in full]
    assert [t.task_id for t in mixed] == sorted((t.task_id for t in mixed), key=ids.index)  # seeded order kept


@pytest.mark.parametrize("weights", [{3: 1}, {1: -1}, {1: 0, 2: 0}, {"x": 1}, {1: "a"}])
def test_bad_difficulty_weights_are_rejected(weights):
    from lfo_cli.errors import LfoError
    from lfo_cli.train.recipe_config import world_sections

    DataSection = world_sections("customer_service")["data"]

    with pytest.raises(LfoError, match="difficulty_weights"):
        DataSection(fresh_tasks=10, max_difficulty=2, difficulty_weights=weights)



def test_a_run_builds_its_trainer_config_once(setup, tmp_path, monkeypatch):
    """`lfo train` resolves the recipe, checks and builds the run's `DualLoRAConfig` once (before the run dir
    holds anything), and the runner trains with that object: no rebuild, no validation copy."""
    from typer.testing import CliRunner

    from lfo_cli.cli import app
    from lfo_cli.train import runner
    from lfo_cli.train.config import DualLoRAConfig

    built, used = [], []
    post_init = DualLoRAConfig.__post_init__
    monkeypatch.setattr(DualLoRAConfig, "__post_init__", lambda self: (built.append(self), post_init(self))[1])
    run_training = runner.run_training
    monkeypatch.setattr(runner, "run_training", lambda cfg, out, **kw: (used.append(kw["args"]),
                                                                        run_training(cfg, out, **kw))[1])
    out = tmp_path / "run"
    cmd = train_cmd(setup, out, 1, wm__coef="0.5", trainer__save_steps="0")[3:]
    result = CliRunner().invoke(app, cmd)
    assert result.exit_code == 0, result.output
    assert len(built) == 1 and used == built and built[0].wm.coef == 0.5
    assert json.loads((out / "summary.json").read_text())["steps"] == 1


def test_vs_start_pairs_a_worlds_sub_skill_episode_by_episode(tmp_path):
    import json as _json

    from lfo_cli.env.plugin import CustomerServiceWorld
    from lfo_cli.train.run_metrics import vs_start

    ids = ["a", "b", "c", "d", "e"]
    calls = {0: ["other_department", None, "right_department", "invalid_number", "other_department"],
             30: ["right_department", "right_department", "other_department", "right_department", "other_department"]}
    for step, firsts in calls.items():
        eps = [{"task_id": t, "difficulty": 2, "first_call": f} for t, f in zip(ids, firsts, strict=True)]
        (tmp_path / "validation").mkdir(exist_ok=True)
        (tmp_path / "validation" / f"step_{step}.json").write_text(_json.dumps(
            {"step": step, "outcomes": [[t, 0] for t in ids], "episodes": eps}))
    row = vs_start(tmp_path, 30, world=CustomerServiceWorld)
    key = "val/vs_start/first_call_right/"
    assert row[key + "start_success"] == pytest.approx(0.2) and row[key + "final_success"] == pytest.approx(0.6)
    assert row[key + "wins"] == 3 and row[key + "losses"] == 1 and row[key + "n"] == 5
    assert row["val/vs_start/mean_diff"] == 0  # success unchanged: the skill is its own comparison
    assert not any("first_call_right" in k for k in vs_start(tmp_path, 30))  # no world: success only
    (tmp_path / "validation" / "step_30.json").write_text(_json.dumps(  # a file that does not tell the skill
        {"step": 30, "outcomes": [[t, 0] for t in ids], "episodes": [{"task_id": t, "difficulty": 2} for t in ids]}))
    assert not any("first_call_right" in k for k in vs_start(tmp_path, 30, world=CustomerServiceWorld))

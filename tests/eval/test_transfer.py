"""`transfer_eval`: difficulty filter, per-episode outcomes and the paired comparison with the base.

The model is a stand-in whose success depends on whether its adapter is switched off, so the test
checks the plumbing (same episodes for both, pairing, the test's numbers) without a training run; the
real model path is the same `evaluate_agent` the warm start and validation use.
"""

from __future__ import annotations

import contextlib

import pytest
import yaml

from lfo_cli.errors import LfoError


class AdapterModel:
    """Succeeds on even-numbered tasks with its adapter, on tasks divisible by 4 without it."""

    def __init__(self):
        self.adapter_on = True

    @contextlib.contextmanager
    def disable_adapter(self):
        self.adapter_on = False
        try:
            yield
        finally:
            self.adapter_on = True


@pytest.fixture
def run(tmp_path, monkeypatch):
    from lfo_cli.env.generate import generate_world
    from lfo_cli.env.world_files import write_world

    write_world(generate_world(num_companies=10, num_train_tasks=10, num_val_tasks=20, heldout_fraction=0.3, seed=5),
                tmp_path / "data")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "recipe.yaml").write_text(yaml.safe_dump({"kind": "grpo", "data": {"dir": str(tmp_path / "data")}}))
    model = AdapterModel()
    seen: list[tuple[bool, list[str]]] = []

    def fake_evaluate(m, tokenizer, world, tasks, **kw):
        seen.append((m.adapter_on, [t.task_id for t in tasks]))
        episodes = []
        for t in tasks:
            k = int(t.task_id.rsplit("-", 1)[-1])
            win = k % 2 == 0 if m.adapter_on else k % 4 == 0
            episodes.append({"task_id": t.task_id, "difficulty": t.difficulty, "success": win})
        return {"episodes": episodes, "turns": []}

    monkeypatch.setattr("lfo_cli.eval.transfer.load_run_model", lambda *a, **k: (model, None))
    monkeypatch.setattr("lfo_cli.eval.transfer.evaluate_agent", fake_evaluate)
    return tmp_path / "run", seen


def test_against_base_pairs_the_same_episodes(run):
    from lfo_cli.env import load_world
    from lfo_cli.eval.transfer import transfer_eval

    run_dir, seen = run
    world = load_world(run_dir.parent / "data")
    out = transfer_eval(run_dir, ("val",), samples=2, difficulties=(1, 2), against_base=True)
    expected = [t.task_id for t in world.tasks["val"] if t.difficulty in (1, 2) for _ in range(2)]
    assert seen == [(True, expected), (False, expected)]  # policy first, then the base on the same episodes
    assert out["difficulties"] == [1, 2]
    policy, base, test = out["splits"]["val"], out["base"]["val"], out["vs_base"]["val"]
    assert [o[0] for o in policy["outcomes"]] == [o[0] for o in base["outcomes"]] == expected
    nums = [int(t.rsplit("-", 1)[-1]) for t in expected]
    wins = sum(k % 2 == 0 and k % 4 != 0 for k in nums)
    assert test["n"] == len(expected) and test["wins"] == wins and test["losses"] == 0
    assert test["mean_diff"] == pytest.approx(policy["success"] - base["success"]) == pytest.approx(wins / len(nums))
    assert set(policy["by_difficulty"]) <= {"1", "2"}

    plain = transfer_eval(run_dir, ("val",))
    assert plain["base"] is None and plain["vs_base"] is None and plain["difficulties"] is None
    assert len(plain["splits"]["val"]["outcomes"]) == len(world.tasks["val"])


def test_identical_models_give_null_statistics_and_valid_json(run, monkeypatch):
    import json

    from lfo_cli.eval.transfer import transfer_eval

    run_dir, _ = run
    model_state = {}

    class Same(AdapterModel):  # the adapter changes nothing: every episode ties
        @contextlib.contextmanager
        def disable_adapter(self):
            model_state["disabled"] = True
            yield

    monkeypatch.setattr("lfo_cli.eval.transfer.load_run_model", lambda *a, **k: (Same(), None))
    out = transfer_eval(run_dir, ("val",), against_base=True)
    test = out["vs_base"]["val"]
    assert model_state["disabled"] and test["wins"] == test["losses"] == 0 and test["mean_diff"] == 0
    assert test["wilcoxon_p"] is None and test["ttest_p"] is None
    json.dumps(out, allow_nan=False)  # what the CLI writes and prints


def test_bad_combinations_are_one_line_errors(run):
    from lfo_cli.eval.transfer import transfer_eval

    run_dir, _ = run
    with pytest.raises(LfoError, match="no val tasks at difficulty"):
        transfer_eval(run_dir, ("val",), difficulties=(9,))
    with pytest.raises(LfoError, match="transformers backend"):
        transfer_eval(run_dir, ("val",), against_base=True, backend="vllm")


def test_cli_prints_the_paired_line_and_valid_json(run):
    import json

    from typer.testing import CliRunner

    from lfo_cli.cli import app

    run_dir, _ = run
    args = ["transfer-eval", str(run_dir), "--split", "val", "--difficulty", "1", "--samples", "3", "--against-base"]
    shown = CliRunner().invoke(app, args)
    assert shown.exit_code == 0, shown.output
    assert "paired episodes" in shown.output and "won" in shown.output and "pass^3" in shown.output
    again = CliRunner().invoke(app, args)  # the same parameters: refused, the file kept
    assert again.exit_code == 2 and "exists (an evaluation with these parameters)" in again.stderr
    out = json.loads(CliRunner().invoke(app, [*args, "--json", "--out", str(run_dir / "evals" / "copy.json")]).stdout)
    other = CliRunner().invoke(app, ["transfer-eval", str(run_dir), "--split", "val", "--samples", "2"])
    assert other.exit_code == 0 and (run_dir / "evals" / "transfer_eval-val-k2-T1-seed0.json").is_file()
    assert out["difficulties"] == [1] and out["vs_base"]["val"]["n"] == len(out["splits"]["val"]["outcomes"])
    written = run_dir / "evals" / "transfer_eval-val-k3-T1-seed0-d1-vsbase.json"
    assert json.loads(written.read_text())["parameters"] == out["parameters"]
    assert out["file"] == str(run_dir / "evals" / "copy.json") and json.loads((run_dir / "evals" / "copy.json").read_text()) == out
    bad = CliRunner().invoke(app, ["transfer-eval", str(run_dir), "--difficulty", "7"])
    assert bad.exit_code == 2
    bad = CliRunner().invoke(app, ["transfer-eval", str(run_dir), "--split", "trian"])
    assert bad.exit_code == 2 and "--split must be" in bad.stderr


def test_train_split_plays_the_world_train_tasks(run):
    from lfo_cli.env import load_world
    from lfo_cli.eval.transfer import transfer_eval

    run_dir, _ = run
    world = load_world(run_dir.parent / "data")
    out = transfer_eval(run_dir, ("train",), max_tasks=3)
    assert [t for t, _ in out["splits"]["train"]["outcomes"]] == [t.task_id for t in world.tasks["train"][:3]]
    assert out.get("gap") is None


def test_pass_hat_k_is_the_share_of_tasks_whose_k_samples_all_succeed():
    from lfo_cli.eval.transfer import pass_hat_k

    eps = [{"task_id": t, "success": s} for t, s in
           [("a", 1), ("a", 1), ("a", 1), ("b", 1), ("b", 0), ("b", 1), ("c", 0), ("c", 0), ("c", 0)]]
    got = pass_hat_k(eps)
    assert got == {"k": 3, "tasks": 3, "pass_1": pytest.approx(5 / 9), "pass_k": pytest.approx(1 / 3)}
    assert pass_hat_k(eps[:4])["k"] is None and pass_hat_k(eps[:4])["pass_k"] is None  # unequal samples per task
    assert pass_hat_k([{"task_id": "x", "success": True}]) == {"k": 1, "tasks": 1, "pass_1": 1.0, "pass_k": 1.0}


def test_an_evaluation_records_its_parameters_and_is_named_by_them(run):
    from lfo_cli.eval.transfer import eval_file_name, transfer_eval

    run_dir, _ = run
    a = transfer_eval(run_dir, ("val",), samples=2, difficulties=(1,))
    b = transfer_eval(run_dir, ("val",), samples=3, difficulties=(1,))
    assert a["parameters"]["samples"] == 2 and a["parameters"]["difficulties"] == [1]
    assert a["splits"]["val"]["k"] == 2 and a["splits"]["val"]["pass_k"] <= a["splits"]["val"]["success"]
    assert eval_file_name(a["parameters"]) != eval_file_name(b["parameters"])
    assert eval_file_name(a["parameters"]) == "transfer_eval-val-k2-T1-seed0-d1.json"


def test_behaviour_is_the_worlds_own_measures_under_validations_names():
    """transfer-eval's `behaviour` is World.episode_metrics (what validation logs as val/NAME) and the valid-call
    rate: a world's measures reach it without transfer-eval naming them."""
    from lfo_cli import run_record as rr
    from lfo_cli.env import Episode, generate_world, run_episode
    from lfo_cli.env.plugin import CustomerServiceWorld
    from lfo_cli.eval.transfer import summarise_split

    world = CustomerServiceWorld(generate_world(num_companies=8, num_train_tasks=10, num_val_tasks=20,
                                                heldout_fraction=0.25, seed=3))
    ep, episodes = Episode(world.data), []
    for i, task in enumerate(world.data.tasks["val"]):
        done = run_episode(ep, "prior", task, rollout_seed=i)
        episodes.append({**done.info, "task_id": task.task_id, "difficulty": task.difficulty, "success": done.reward})
    turns = [{"valid_tool_call": True}] * 3 + [{"valid_tool_call": False}, {"final_reply": True}]
    row = summarise_split({"episodes": episodes, "turns": turns}, world)
    assert row["behaviour"] == {**world.episode_metrics(episodes), "valid_tool_call_rate": 0.75}
    assert {rr.AUTH_BEFORE_CALL, rr.FIRST_CALL_RIGHT, rr.CALLS_PER_TASK, rr.FORMS} <= set(row["behaviour"])

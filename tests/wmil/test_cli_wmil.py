"""`lfo wmil` commands: bad input is one line + exit 2; train/eval/probe/ablate write their files."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from lfo_cli.cli import app

runner = CliRunner()


@pytest.mark.parametrize("args, needle", [
    (["--task", "nope"], "unknown task"),
    (["--num-actions", "1"], "num-actions"),
    (["--steps", "-5"], "steps must be >= 0"),
    (["--algorithm", "sac"], "unknown algorithm"),
    (["--parent", "oracle"], "unknown parent"),
    (["--parent-url", "http://127.0.0.1:9"], "--parent-url needs --parent llm"),
    (["--parent", "llm", "--parent-url", "not a url"], "parent URL"),
    (["--num-heads", "3"], "divisible"),
    (["--save-every", "30", "--log-every", "20"], "multiple"),
    (["--reward-weights", "1,2"], "three numbers"),
    (["--level", "7"], "level"),
])
def test_bad_input_exits_2_with_one_line(tmp_path, args, needle):
    res = runner.invoke(app, ["wmil", "train", *args, "--out", str(tmp_path / "o"), "--no-progress"])
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0], res.output


def test_eval_probe_on_bad_dir(tmp_path):
    for cmd in ("eval", "probe"):
        res = runner.invoke(app, ["wmil", cmd, str(tmp_path)])
        assert res.exit_code == 2 and "not a WMIL run directory" in res.output


def test_train_eval_probe_write_outputs(tmp_path):
    out = tmp_path / "run"
    res = runner.invoke(app, ["wmil", "train", "--task", "pattern_echo", "--steps", "300", "--seed", "0", "--out", str(out),
                              "--log-every", "25", "--save-every", "100", "--eval-episodes", "256", "--json"])
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "summary.json").read_text())
    for name in ("metrics.jsonl", "metrics.csv", "training_curves.png", "eval.json", "config.json",
                 "checkpoints/latest.json"):
        assert (out / name).is_file(), name
    assert summary["run_metadata"]["seed"] == 0 and "versions" in summary["run_metadata"]
    assert summary["checks"]["entropy_falls"] and summary["checks"]["wm_mse_falls"]
    assert summary["eval"]["overall"]["success"] > 0.8  # learns PatternEcho within 300 steps
    row = json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])
    for key in ("reward/goal", "reward/pred", "reward/cons", "losses/world_model", "losses/entropy", "charts/success"):
        assert key in row  # fix 4: reward components logged separately
    res = runner.invoke(app, ["wmil", "eval", str(out), "--episodes", "256", "--json"])
    assert res.exit_code == 0, res.output
    ev = json.loads(res.output)
    assert ev["policies"]["model"]["overall"]["success"] > 0.8 > 0.3 > ev["policies"]["random"]["overall"]["success"]
    assert (out / "eval_report.png").is_file() and (out / "eval_report.csv").is_file()
    res = runner.invoke(app, ["wmil", "probe", str(out), "--samples", "300", "--json"])
    assert res.exit_code == 0, res.output
    probe = json.loads(res.output)
    assert probe["probes"][0]["attribute"] == "target" and probe["probes"][0]["trained_acc"] > 0.9
    assert (out / "tsne.png").is_file() and (out / "tsne.csv").is_file() and (out / "probe.csv").is_file()


def test_ablate_small_study(tmp_path):
    res = runner.invoke(app, ["wmil", "ablate", "--task", "pattern_echo", "--seeds", "2", "--steps", "60",
                              "--conditions", "wm,no_wm,random", "--out", str(tmp_path / "abl"), "--json"])
    assert res.exit_code == 0, res.output
    result = json.loads(res.output)
    conds = {(r["condition"], r["metric"]) for r in result["summary"]}
    assert ("wm", "eval_success") in conds and ("random", "train_auc") in conds
    assert {t["comparison"] for t in result["tests"]} == {"wm - no_wm", "wm - random"}
    for name in ("runs.csv", "summary.csv", "tests.csv", "ablation.png", "ablation.json"):
        assert (tmp_path / "abl" / name).is_file()
    res = runner.invoke(app, ["wmil", "ablate", "--conditions", "wm,bogus", "--out", str(tmp_path / "b")])
    assert res.exit_code == 2 and "unknown condition" in res.output


def test_every_config_field_is_an_option_and_reaches_the_config(tmp_path):
    """`lfo wmil train`'s options are generated from WMILConfig (ablate's too, but the seed): a field added to the
    dataclass is an option with its help, and what is given lands in the run's config.json."""
    import dataclasses

    from typer.main import get_command

    from lfo_cli.wmil.config import WMILConfig

    wmil = get_command(app).commands["wmil"]
    for name, left_out in (("train", set()), ("ablate", {"seed"})):
        opts = {o for p in wmil.commands[name].params for o in p.opts}
        for f in dataclasses.fields(WMILConfig):
            assert (f"--{f.name.replace('_', '-')}" in opts) == (f.name not in left_out), (name, f.name)
    out = tmp_path / "run"
    res = runner.invoke(app, ["wmil", "train", "--steps", "2", "--num-envs", "4", "--log-every", "1", "--save-every", "2",
                              "--eval-episodes", "4", "--gamma", "0.5", "--clip-eps", "0.3", "--reward-weights", "1,0.5,0",
                              "--curriculum", "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    cfg = json.loads((out / "config.json").read_text())
    assert (cfg["gamma"], cfg["clip_eps"], cfg["reward_weights"], cfg["curriculum"]) == (0.5, 0.3, [1.0, 0.5, 0.0], True)
    assert cfg["num_actions"] == WMILConfig().num_actions  # what is not given keeps the dataclass default


def test_a_wmil_recipe_runs_through_lfo_train_and_its_finished_run_is_left_as_it_is(tmp_path):
    """`kind: wmil` is a recipe kind: `lfo train --recipe wmil/NAME` resolves it with the recipes' loader and
    overrides, runs WMIL's trainer in the run dir `lfo train` lays out, and marks the run complete; `lfo wmil train
    --config` reads the same file."""
    out = tmp_path / "run"
    res = runner.invoke(app, ["train", "--recipe", "wmil/mvp_pattern_echo", "--seed", "2", "--out", str(out), "--json",
                              "--set", "steps=20", "--set", "log_every=10", "--set", "save_every=20",
                              "--set", "num_envs=4", "--set", "eval_episodes=4"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output[res.output.index("{\n"):])["steps"] == 20
    cfg = json.loads((out / "config.json").read_text())
    assert (cfg["seed"], cfg["steps"], cfg["task"]) == (2, 20, "pattern_echo")
    assert (out / "recipe.yaml").is_file() and (out / "summary.json").is_file() and (out / ".complete").is_file()
    from lfo_cli.report.load import read_run

    run = read_run(out)  # the report reads it as `lfo wmil train`'s runs: by its config.json, no `kind` condition
    assert run.kind == "wmil" and run.status == "complete" and "kind" not in run.config and run.seed == 2
    before = (out / "summary.json").read_bytes()
    res = runner.invoke(app, ["train", "--resume", str(out)])
    assert res.exit_code == 0 and "is complete" in res.output and (out / "summary.json").read_bytes() == before
    assert "train a new run with more steps" in " ".join(res.output.split())  # not grpo's --set trainer.max_steps
    res = runner.invoke(app, ["train", "--resume", str(out), "--out", str(tmp_path / "more"), "--set", "steps=40"])
    assert res.exit_code == 2 and "a wmil run is not continued into a new dir" in " ".join(res.output.split())
    assert not (tmp_path / "more").exists()
    res = runner.invoke(app, ["train", "--recipe", "wmil/mvp_pattern_echo", "--set", "stepz=3", "--out", str(tmp_path / "b")])
    assert res.exit_code == 2 and "did you mean 'steps'" in res.output
    (tmp_path / "grpo.yaml").write_text("kind: grpo\nsteps: 3\n")
    res = runner.invoke(app, ["wmil", "train", "--config", str(tmp_path / "grpo.yaml"), "--out", str(tmp_path / "c")])
    assert res.exit_code == 2 and "not a WMIL config" in res.output

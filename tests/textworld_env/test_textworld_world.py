"""TextWorld as an lfo world: `lfo gen-env --world textworld` writes a world whose games are pinned by hash,
the gold policy wins it through the World's episode runner, and `lfo train` runs on it (env.kind: textworld)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lfo_cli.cli import app
from lfo_cli.errors import LfoError

pytest.importorskip("textworld")
sys.path.insert(0, str(Path(__file__).parents[1] / "train"))

GEN = ["gen-env", "--world", "textworld", "--go", "1", "--games", "3", "--val-games", "2", "--heldout-games", "1",
       "--seed", "7"]


@pytest.fixture(scope="module")
def world_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("tw_world")
    home = root / "home"
    old = os.environ.get("LFO_HOME")
    os.environ["LFO_HOME"] = str(home)
    try:
        result = CliRunner().invoke(app, [*GEN, "--output-dir", str(root / "data"), "--json"])
    finally:
        if old is None:
            os.environ.pop("LFO_HOME")
        else:
            os.environ["LFO_HOME"] = old
    assert result.exit_code == 0, result.output
    return root


@pytest.fixture
def home(world_dir, monkeypatch):
    monkeypatch.setenv("LFO_HOME", str(world_dir / "home"))
    return world_dir


def test_the_world_file_pins_every_split_and_a_rerun_writes_the_same(home):
    from lfo_cli.textworld_env.world import WORLD_FILE

    content = json.loads((home / "data" / WORLD_FILE).read_text())
    assert content["seeds"] == {"train": [7, 8, 9], "val": [10, 11], "heldout": [12]}
    assert content["spec"]["split"] == "train" and content["heldout_split"] == "valid"
    again = CliRunner().invoke(app, [*GEN, "--output-dir", str(home / "again")])
    assert again.exit_code == 0, again.output
    assert (home / "again" / WORLD_FILE).read_text() == (home / "data" / WORLD_FILE).read_text()
    other = CliRunner().invoke(app, [*GEN[:-1], "8", "--output-dir", str(home / "data")])  # another world, same dir
    assert other.exit_code == 2 and "holds another world; pass --force" in other.output
    # every split's spec and seed is checked before the first game is made
    for args, says in ((["--seed", "500", "--heldout-split", "bogus"], "split must be one of"),
                       (["--seed", str(2**32 - 2)], "integer in [0, 4294967295], got 4294967296")):
        bad = CliRunner().invoke(app, [*GEN[:-2], *args, "--output-dir", str(home / "bad")])
        assert bad.exit_code == 2 and says in bad.output, bad.output
    assert not list((home / "home").rglob("seed-500.*")) and not list((home / "home").rglob("seed-4294967294.*"))


@pytest.mark.parametrize("args, says", [
    (["--game-type", "coin_collector", "--go", "6", "--heldout-split", "test"],
     "textworld coin_collector: --go, --heldout-split are not options of this game type; it takes --level"),
    (["--game-type", "treasure_hunter", "--recipe", "2"], "--recipe is not an option of this game type"),
    (["--game-type", "cooking", "--level", "3"],
     "textworld cooking: --level is not an option of this game type; it takes --go, --recipe"),
])
def test_an_option_of_another_game_type_is_refused_before_any_game(tmp_path, monkeypatch, args, says):
    monkeypatch.setenv("LFO_HOME", str(tmp_path / "home"))
    bad = CliRunner().invoke(app, ["gen-env", "--world", "textworld", "--games", "2", "--seed", "3", *args,
                                   "--output-dir", str(tmp_path / "data")])
    assert bad.exit_code == 2 and bad.output.startswith("error: ") and says in bad.output, bad.output
    assert not (tmp_path / "home").exists() and not (tmp_path / "data").exists()


def test_gold_wins_every_game_through_the_worlds_episode_runner(home):
    from lfo_cli.textworld_env.episodes import gold_policy
    from lfo_cli.worlds import load_world

    world = load_world("textworld", home / "data")
    assert [t.task_id for t in world.tasks("heldout")] == ["heldout-12"]
    runner, gold = world.episode(50), gold_policy()
    for task in world.tasks("train") + world.tasks("val") + world.tasks("heldout"):
        observation = runner.reset(task)
        while not runner.done:
            observation = runner.step("act", {"command": gold(runner.env, observation)})
        assert runner.info()["success"] and runner.info()["score_share"] == 1.0
        text, (a, b) = world.world_model_example(runner.transitions[0])
        assert text[a:b] == f"<|reply|>{runner.transitions[0].observation}<|/reply|>"
        assert not any(line.startswith(">") for t in runner.transitions for line in t.observation.splitlines())
    assert runner.step("look", {}) and runner.info()["invalid_tool_calls"] == 1  # not the act tool
    probe = world.semantic_probe(world.tasks("val"), seed=0)
    assert probe and all(probe.judge(r, r) for r in probe.replies) and not probe.judge("You win.", probe.replies[0])


def test_a_world_file_that_disagrees_with_its_games_is_one_error(home, tmp_path):
    from lfo_cli.textworld_env.world import WORLD_FILE, TextWorldWorld

    content = json.loads((home / "data" / WORLD_FILE).read_text())
    content["games"]["val"]["10"] = "0" * 64
    (tmp_path / WORLD_FILE).write_text(json.dumps(content))
    with pytest.raises(LfoError, match="val game 10 is not the game recorded"):
        TextWorldWorld.load(tmp_path)
    (tmp_path / WORLD_FILE).write_text("{")
    with pytest.raises(LfoError, match="corrupt JSON"):
        TextWorldWorld.load(tmp_path)
    with pytest.raises(LfoError, match="no TextWorld world"):
        TextWorldWorld.load(tmp_path / "nowhere")


@pytest.mark.slow
def test_lfo_train_runs_on_the_textworld_world(home, tmp_path):
    from tiny import lfo_here, tiny_model, tiny_tokenizer

    tok = tiny_tokenizer()
    tiny_model(tok).save_pretrained(tmp_path / "model")
    tok.save_pretrained(tmp_path / "model")
    sets = {"env.kind": "textworld", "wm.predict": "act", "wm.coef": "0.5",
            "model.name": str(tmp_path / "model"), "model.warmstart": "null", "data.dir": str(home / "data"),
            "lora.r": "4", "lora.alpha": "8", "eval.every": "2", "eval.num_tasks": "2", "eval.samples_per_task": "1",
            "eval.fresh_tasks": "0",
            "eval.heldout_tasks": "1", "trainer.max_steps": "2", "trainer.max_completion_length": "16",
            "trainer.max_tool_calling_iterations": "3", "trainer.per_device_train_batch_size": "4",
            "trainer.num_generations": "2", "trainer.logging_steps": "1", "trainer.save_steps": "2"}
    cmd = [sys.executable, "-m", "lfo_cli", "train", "--recipe", "dual_lora_micro", "--out", str(tmp_path / "run")]
    cmd += [arg for k, v in sets.items() for arg in ("--set", f"{k}={v}")]
    cmd += ["--set", "~env.field_credit"]  # the base recipe's customer-service reward option
    done = lfo_here(cmd)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    val = [r for r in rows if "val/success" in r]
    assert [r["step"] for r in val] == [0, 2]
    assert all({"val/score_share", "heldout/score_share", "val/steps", "val/wm_semantic_acc"} <= set(r) for r in val)
    step0 = json.loads((tmp_path / "run" / "validation" / "step_0.json").read_text())
    assert [e["task_id"] for e in step0["episodes"]] == ["val-10", "val-11"]
    assert json.loads((tmp_path / "run" / "run.json").read_text())["world"]["kind"] == "textworld"
    # inspect-wm on the run's world model: the game's replies to noisy walkthroughs of the validation games
    inspect = CliRunner().invoke(app, ["inspect-wm", str(tmp_path / "run"), "--episodes", "1", "--max-new-tokens", "8",
                                       "--json"])
    assert inspect.exit_code == 0, inspect.output
    out = json.loads(inspect.stdout)
    assert out["overall"]["n"] >= 3 and set(out["by_category"]) == {"all"}
    assert out["source"] == "1 noisy walkthrough episodes on val"
    probe = CliRunner().invoke(app, ["inspect-wm", str(tmp_path / "run"), "--probe"])
    assert probe.exit_code == 2 and "the textworld world" in probe.output and "has no synthetic probes" in probe.output
    # lfo report on the run: its curves and tables from the run's files, whatever the world
    report = CliRunner().invoke(app, ["report", str(tmp_path / "run"), "--out", str(tmp_path / "report")])
    assert report.exit_code == 0, report.output
    index = (tmp_path / "report" / "index.md").read_text()
    assert "1 runs (1 complete)" in index
    assert "### Transfer to held-out games" in index and "compan" not in index.split("### Transfer")[1].split("###")[0]
    assert (tmp_path / "report" / "transfer.csv").read_text().count("\n") >= 2  # the held-out games' success


def test_the_teacher_is_the_walkthrough_with_random_detours(home):
    from lfo_cli.worlds import load_world
    from lfo_cli.worlds.noise import TeacherNoise

    world = load_world("textworld", home / "data")
    played, tasks = world.sft_tasks(type("Data", (), {"fresh_tasks": 0, "fresh_companies": 0, "probe_rate": 0.0,
                                                      "max_tasks": None})(), seed=0)
    assert played is world and [t.task_id for t in tasks] == ["train-7", "train-8", "train-9"]
    gold = world.teacher_rollouts(tasks, policy="gold", seed=0)
    assert all(r["reward"] == 1.0 and r["info"]["random_steps"] == [] for r in gold)
    noisy = world.teacher_rollouts(tasks, policy="gold", noise=TeacherNoise(epsilon=0.5), seed=0, rollouts_per_task=2)
    assert len(noisy) == 6 and any(r["info"]["random_steps"] for r in noisy)
    assert noisy == world.teacher_rollouts(tasks, policy="gold", noise=TeacherNoise(epsilon=0.5), seed=0,
                                           rollouts_per_task=2)  # reproducible from the seed
    assert noisy == [r for chunk in (tasks[:1], tasks[1:]) for r in  # played in chunks (the data phase's progress)
                     world.teacher_rollouts(chunk, policy="gold", noise=TeacherNoise(epsilon=0.5), seed=0,
                                            rollouts_per_task=2)]
    first = gold[0]["transitions"][0]
    assert first["action"]["tool"] == "act" and first["observation"] and gold[0]["prompt"] == first["state"]
    # Its teacher's one noise is epsilon: the customer-service teacher's form noise is not a key of its recipes.
    from lfo_cli.recipes import load_recipe

    with pytest.raises(LfoError, match="unknown key 'data.noise.field_dropout'"):
        load_recipe("warmstart_textworld", ["data.noise.field_dropout=0.1"])
    assert type(load_recipe("warmstart_textworld").config.data.noise) is TeacherNoise


@pytest.mark.slow
def test_micros_textworld_tokenizer_and_a_warm_start_through_the_world(home, tmp_path):
    """The micro tokenizer trained on TextWorld's text keeps its markers and the act call's opening as single
    tokens; `lfo train --recipe warmstart_micro --set env.kind=textworld` imitates the noisy walkthrough."""
    from tiny import tiny_model, tiny_tokenizer

    from lfo_cli.models import micro
    from lfo_cli.textworld_env.world import TextWorldWorld

    spec = micro.TokenizerSpec(vocab_size=3000, corpus_world_seeds=(7,), corpus_tasks=4)
    corpus = list(micro.environment_corpus(spec, TextWorldWorld))
    assert corpus[-1] == TextWorldWorld.system_prompt and any("<|reply|>" in t for t in corpus)
    tokenizer = micro.train_tokenizer(corpus, spec, extra_tokens=micro.boilerplate_tokens(world=TextWorldWorld))
    for marker in ("<|reply|>", "<|/reply|>", '{"name": "act", "arguments": {"command": "'):
        assert len(tokenizer(marker, add_special_tokens=False)["input_ids"]) == 1, marker
    assert micro.model_name(TextWorldWorld) == "micro_textworld"
    assert micro.cache_key(TextWorldWorld) != micro.cache_key()

    tok = tiny_tokenizer()
    tiny_model(tok).save_pretrained(tmp_path / "model")
    tok.save_pretrained(tmp_path / "model")
    sets = {"env.kind": "textworld", "data.policy": "gold", "data.dir": str(home / "data"), "data.fresh_tasks": "0",
            "data.noise.epsilon": "0.2", "model.name": str(tmp_path / "model"),
            "model.full_finetune": "true", "train.max_steps": "2", "train.batch_size": "2", "train.max_length": "4096",
            "eval.num_tasks": "2", "eval.samples_per_task": "1", "eval.max_turns": "3", "eval.min_valid_rate": "null"}
    args = ["train", "--recipe", "warmstart_micro", "--out", str(tmp_path / "ws")]
    kept = CliRunner().invoke(app, args + ["--dry-run"] + [a for k, v in sets.items() for a in ("--set", f"{k}={v}")])
    assert kept.exit_code == 2 and "unset: [data.noise.field_dropout]" in kept.output  # the base's form noise, named
    args += ["--set", "~data.noise.field_dropout"]
    result = CliRunner().invoke(app, args + [a for k, v in sets.items() for a in ("--set", f"{k}={v}")])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (tmp_path / "ws" / "sft_trajectories.jsonl").read_text().splitlines()]
    assert {r["task_id"] for r in rows} == {"train-7", "train-8", "train-9"}
    assert rows[0]["messages"][0]["content"] == TextWorldWorld.system_prompt
    summary = json.loads((tmp_path / "ws" / "summary.json").read_text())
    assert summary["eval/episodes"] == 2 and summary["teacher/success_d1"] > 0


def test_a_truncated_world_file_is_one_error_wherever_it_is_read(tmp_path):
    from lfo_cli.textworld_env.world import WORLD_FILE, TextWorldWorld

    (tmp_path / WORLD_FILE).write_text('{"kind": "textworld", "seeds"')
    for read in (TextWorldWorld.load, TextWorldWorld.fingerprint, TextWorldWorld.data_identity):
        with pytest.raises(LfoError, match="corrupt JSON"):
            read(tmp_path)
    (tmp_path / WORLD_FILE).write_text('{"spec": {}, "seeds": {"train": [], "val": [], "heldout": []}, "games": 3}')
    with pytest.raises(LfoError, match="is not a TextWorld world file"):
        TextWorldWorld.load(tmp_path)

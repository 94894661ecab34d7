"""Worlds as plugins: the registry, the customer-service world behind the interface, and a world written
outside lfo (tests/worlds/toy_world.py) that trains through `lfo train` by its entry point alone."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "train"))

from lfo_cli.env import generate_world  # noqa: E402
from lfo_cli.env.plugin import CustomerServiceWorld  # noqa: E402
from lfo_cli.errors import LfoError  # noqa: E402
from lfo_cli.worlds import World, kinds, registry, world_class  # noqa: E402


def test_the_customer_service_world_is_built_in():
    assert "customer_service" in kinds()
    cls = world_class("customer_service")
    assert cls is CustomerServiceWorld and issubclass(cls, World) and cls.kind == "customer_service"


def test_an_unknown_kind_names_the_known_ones():
    with pytest.raises(LfoError, match="unknown world kind 'bogus'.*customer_service"):
        world_class("bogus")


def test_a_missing_extra_names_the_install_command(monkeypatch):
    monkeypatch.setitem(registry.BUILTIN, "needs_extra", ("lfo_no_such_package.world:W", "someextra", ""))
    with pytest.raises(LfoError, match=r"pip install -e '\.\[someextra\]'"):
        world_class("needs_extra")


def _entry_points(*pairs):
    eps = [EntryPoint(name, value, registry.GROUP) for name, value in pairs]
    return lambda group=None: [ep for ep in eps if group in (None, ep.group)]


def test_a_plugin_is_found_by_its_entry_point_and_must_be_a_world(monkeypatch):
    monkeypatch.setattr(registry, "entry_points", _entry_points(("say", "toy_world:SayWorld"),
                                                               ("broken", "toy_world:Task"),
                                                               ("missing", "toy_world_nope:X")))
    assert world_class("say").kind == "say" and "say" in kinds()
    with pytest.raises(LfoError, match="not a lfo_cli.worlds.World subclass"):
        world_class("broken")
    with pytest.raises(LfoError, match="world plugin 'missing'.*does not load"):
        world_class("missing")


def test_env_options_are_the_recipes_worlds_own():
    from lfo_cli.recipes import build_config
    from lfo_cli.train.recipe_config import EnvSection, TrainConfig, world_sections

    cs_env = world_sections("customer_service")["env"]
    assert cs_env().options() == {} and cs_env(field_credit=0.2).options() == {"field_credit": 0.2}
    assert build_config(TrainConfig, {"env": {"probe_bonus": 0.2}}).env.options() == {"probe_bonus": 0.2}
    assert type(build_config(TrainConfig, {}).env) is cs_env  # a recipe without an env section: the default world's
    with pytest.raises(LfoError, match="env.field_credit"):
        cs_env(field_credit=1.5)
    with pytest.raises(LfoError, match=r"env.field_credit \+ probe_bonus must add up to less than 1"):
        TrainConfig(env=cs_env(field_credit=0.6, probe_bonus=0.5))  # together a failure would earn a success's 1
    assert not {f.name for f in dataclasses.fields(EnvSection)} - {"kind"}  # lfo's env section: the world alone
    with pytest.raises(LfoError, match="unknown world kind"):
        EnvSection(kind="bogus")
    with pytest.raises(LfoError, match="wm.predict=act is not one of the customer_service world's: phone, phone_form, all"):
        build_config(TrainConfig, {"wm": {"predict": "act"}})


def test_a_runs_warm_start_must_be_of_its_world():
    from typer.testing import CliRunner

    from lfo_cli.cli import app

    result = CliRunner().invoke(app, ["train", "--recipe", "textworld_micro", "--set", "model.warmstart=warmstart_micro",
                                      "--dry-run"])
    assert result.exit_code == 2
    assert "model.warmstart=warmstart_micro imitates the customer_service world, but env.kind is textworld" in result.output


def test_the_customer_service_world_gives_the_runs_tasks_and_probe():
    from lfo_cli.train.recipe_config import EvalSection, world_sections

    DataSection = world_sections("customer_service")["data"]
    world = CustomerServiceWorld(generate_world(num_companies=14, num_train_tasks=60, num_val_tasks=30,
                                                heldout_fraction=0.3, seed=3))
    pools = world.task_pools(DataSection(fresh_tasks=40, companies=3),
                             EvalSection(num_tasks=10, fresh_tasks=50, heldout_tasks=6), seed=1)
    companies = {t.company_id for t in pools.train}
    assert len(companies) == 3 and len(pools.validation) == 10 and len(pools.heldout) == 6
    assert {t.company_id for t in pools.validation} <= companies
    assert sorted({t.difficulty for t in pools.validation}) == [1, 2, 3, 4, 5]  # round-robin over difficulties
    assert {t.company_id for t in pools.heldout} <= world.data.heldout_company_ids
    probe = world.semantic_probe(world.tasks("val"), seed=0)
    assert probe and len(probe.inputs) == len(probe.replies) and probe.stop == "<|/csr|>"
    assert all(probe.judge(reply, reply) for reply in probe.replies)  # a reply means itself
    assert not probe.judge("<|csr|>Thanks, you are verified.<|/csr|>", probe.replies[0])


def test_the_objective_reads_the_worlds_tools_and_example_format():
    import torch
    from toy_world import SayWorld, Task

    from lfo_cli.train.objectives import Separate
    from lfo_cli.train.wm_settings import WorldModelSettings

    game = SayWorld(["apple", "pear"]).episode(4)
    game.reset(Task("say-apple", 1, "apple"))
    game.step("say", {"word": "plum"})
    game.step("shout", {"word": "plum"})  # not a predicted tool
    objective = Separate(WorldModelSettings(predict="say"), tokenizer=None, total=torch.as_tensor, world=SayWorld)
    [(text, (a, b))] = objective.examples(game)
    assert text == "<said>plum</said><reply>Wrong: it starts with a.</reply>" and text[a:b] == "Wrong: it starts with a.</reply>"
    with pytest.raises(ValueError, match="wm.predict=phone is not one of the say world's: say"):
        Separate(WorldModelSettings(predict="phone"), tokenizer=None, total=torch.as_tensor, world=SayWorld)
    assert Separate(WorldModelSettings(), tokenizer=None, total=torch.as_tensor, world=SayWorld).tools == ("say",)


@pytest.mark.slow
def test_a_world_registered_by_entry_point_trains_validates_and_probes(tmp_path, monkeypatch):
    """`lfo train` on the say world: its tasks, system prompt, episode fields, own metric and probe reach the
    run's files, with nothing in lfo naming it (its package's entry point is all lfo sees)."""
    from tiny import tiny_model, tiny_tokenizer

    dist = tmp_path / "site" / "say_world-0.1.dist-info"  # what `pip install` of the plugin would leave
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: say-world\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[lfo.worlds]\nsay = toy_world:SayWorld\n")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "words.json").write_text(json.dumps(["apple", "pear", "plum", "fig", "kiwi", "lime"]))
    tok = tiny_tokenizer()
    tiny_model(tok).save_pretrained(tmp_path / "model")
    tok.save_pretrained(tmp_path / "model")
    sets = {"env.kind": "say", "wm.predict": "say", "wm.coef": "0.5", "model.name": str(tmp_path / "model"),
            "model.warmstart": "null", "data.dir": str(tmp_path / "data"), "lora.r": "4", "lora.alpha": "8",
            "eval.every": "2", "eval.num_tasks": "2", "eval.heldout_tasks": "2", "trainer.max_steps": "2",
            "trainer.max_completion_length": "16", "trainer.per_device_train_batch_size": "4",
            "trainer.num_generations": "2", "trainer.logging_steps": "1", "trainer.save_steps": "2"}
    cmd = [sys.executable, "-m", "lfo_cli", "train", "--recipe", "dual_lora_micro", "--out", str(tmp_path / "run")]
    cmd += [arg for k, v in sets.items() for arg in ("--set", f"{k}={v}")] + ["--set", "~env.field_credit"]
    path = os.pathsep.join([str(tmp_path / "site"), str(HERE), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1", "TRL_EXPERIMENTAL_SILENCE": "1"}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    run = tmp_path / "run"
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    val = [r for r in rows if "val/success" in r]
    assert [r["step"] for r in val] == [0, 2]
    assert all("val/said_anything" in r and "heldout/said_anything" in r and "val/wm_semantic_acc" in r for r in val)
    step0 = json.loads((run / "validation" / "step_0.json").read_text())
    assert sorted({e["task_id"] for e in step0["episodes"]}) == ["say-kiwi", "say-lime"]  # the world's val tasks
    assert all(set(e) == {"task_id", "difficulty", "success", "turns", "calls"} for e in step0["episodes"])
    meta = json.loads((run / "run.json").read_text())
    assert meta["world"]["kind"] == "say" and meta["world"]["fingerprint"]
    # The other world's options are refused by this one, in one line (checked here, the plugin found as above).
    from typer.testing import CliRunner

    from lfo_cli.cli import app

    monkeypatch.setattr(registry, "entry_points", _entry_points(("say", "toy_world:SayWorld")))
    monkeypatch.syspath_prepend(str(HERE))
    bad = CliRunner().invoke(app, [str(tmp_path / "bad") if arg == str(run) else arg for arg in cmd[3:]]
                             + ["--set", "env.field_credit=0.1", "--dry-run"])
    last = bad.stderr.strip().splitlines()[-1]
    assert bad.exit_code == 2 and last.startswith("error:") and "unknown key 'env.field_credit'" in last


@pytest.mark.slow
def test_a_plugin_worlds_warm_start_imitates_its_teacher(tmp_path, monkeypatch):
    """`lfo train --recipe warmstart_micro --set env.kind=say`: the warm start plays the say world's teacher,
    trains on its conversations with its tool and system prompt, and evaluates on its validation tasks."""
    from tiny import tiny_model, tiny_tokenizer
    from toy_world import TeachingSayWorld as SayWorld

    monkeypatch.setattr(registry, "entry_points", _entry_points(("say", "toy_world:TeachingSayWorld")))
    monkeypatch.setenv("LFO_HOME", str(tmp_path / "home"))
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "words.json").write_text(json.dumps(["apple", "pear", "plum", "fig", "kiwi", "lime"]))
    tok = tiny_tokenizer()
    tiny_model(tok).save_pretrained(tmp_path / "model")
    tok.save_pretrained(tmp_path / "model")
    from typer.testing import CliRunner

    from lfo_cli.cli import app

    sets = {"env.kind": "say", "data.policy": "gold", "data.dir": str(tmp_path / "data"), "data.fresh_tasks": "0",
"model.name": str(tmp_path / "model"), "model.full_finetune": "true",
            "train.max_steps": "2", "train.batch_size": "2", "train.max_length": "2048", "eval.num_tasks": "2",
            "eval.samples_per_task": "1", "eval.min_valid_rate": "null"}
    args = ["train", "--recipe", "warmstart_micro", "--out", str(tmp_path / "ws"), "--set", "~data.noise.field_dropout"]
    result = CliRunner().invoke(app, args + [a for k, v in sets.items() for a in ("--set", f"{k}={v}")])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (tmp_path / "ws" / "sft_trajectories.jsonl").read_text().splitlines()]
    assert {r["task_id"] for r in rows} == {"say-apple", "say-pear", "say-plum", "say-fig"}  # the training words
    messages = rows[0]["messages"]
    assert messages[0] == {"role": "system", "content": SayWorld.system_prompt}
    assert messages[2]["tool_calls"][0]["function"] == {"name": "say", "arguments": {"word": "apple"}}
    summary = json.loads((tmp_path / "ws" / "summary.json").read_text())
    assert summary["eval/episodes"] == 2 and summary["data/teacher_success"] == 1.0


def test_a_plugin_that_does_not_implement_the_interface_is_one_error(monkeypatch):
    import toy_world

    class Half(toy_world.SayWorld):  # a method of training's role left out
        episode = World.episode

    monkeypatch.setattr(toy_world, "Half", Half, raising=False)
    monkeypatch.setattr(registry, "entry_points", _entry_points(("half", "toy_world:Half")))
    with pytest.raises(LfoError, match="does not implement episode"):
        world_class("half")
    with pytest.raises(LfoError, match="env.kind must be a world's name"):
        world_class(["customer_service"])


def test_the_customer_service_validation_files_keep_their_fields(tmp_path):
    """The customer-service world's validation records: what they always were, plus the task's departments
    (per-department success in the reading study's report); records written before it lack that field."""
    from lfo_cli.train.callbacks import Validation

    world = CustomerServiceWorld(generate_world(12, 40, 8, 0.25, 5))
    episode = {"task_id": "t", "difficulty": 2, "success": True, "turns": 3, "auth_before_first_call": True,
               "department_order_correct": True, "phone_calls": 1, "forms_submitted": 1, "form_fields": ["zip_code"],
               "invalid_tool_calls": 0, "first_call": "right_department", "probe_calls": 0, "form_holds_named": None,
               "departments": ["billing"]}
    validation = Validation(tmp_path, world, [], None, 0, 1.0, 0, 0, 16)
    [record] = validation._records({"episodes": [episode]})
    assert list(record) == ["task_id", "difficulty", "success", "turns", "form_fields", "first_call", "phone_calls",
                            "probe_calls", "form_holds_named", "departments"]


def test_runs_recorded_before_env_kind_pool_with_new_customer_service_runs():
    from lfo_cli.report.load import Run, assign_conditions

    old = Run(Path("old"), "grpo", 0, {"wm.coef": 0, "data.dir": "data"}, "complete", [], {})
    new = Run(Path("new"), "grpo", 1, {"wm.coef": 0, "data.dir": "data", "env.kind": "customer_service"}, "complete", [], {})
    other = Run(Path("tw"), "grpo", 0, {"wm.coef": 0, "data.dir": "data", "env.kind": "textworld"}, "complete", [], {})
    assert assign_conditions([old, new]) == {"grpo": []} and old.condition == new.condition == "baseline"
    assert assign_conditions([old, new, other])["grpo"] == ["env.kind"] and old.condition == new.condition != other.condition


def test_a_world_implements_only_its_roles(tmp_path, monkeypatch):
    """Training's role is the minimum (the abstract methods); a teacher, the micro tokenizer's corpus and inspect-wm's
    calls are each one error naming what is missing when a command needs them, and the rest has defaults."""
    from toy_world import FILE, SayWorld

    from lfo_cli.models.warmstart_config import WarmStartConfig
    from lfo_cli.recipes import build_config
    from lfo_cli.worlds.base import Trainable, World

    assert World.__abstractmethods__ == Trainable.__abstractmethods__ == {
        "load", "seed", "fingerprint", "world_model_example", "tasks", "task_pools", "env_factory", "episode"}
    world = SayWorld(["apple", "pear", "plum"])
    with pytest.raises(LfoError, match=r"the say world has no teacher \(World.sft_tasks, teacher_rollouts\)"):
        world.sft_tasks(None, 0)
    with pytest.raises(LfoError, match="the say world has no corpus for the micro tokenizer"):
        list(SayWorld.corpus(None))
    with pytest.raises(LfoError, match="the say world has no calls to inspect"):
        world.inspection_calls("val", 2, 0)
    assert world.inspection_probes(2, 0) is None and SayWorld.reply_category("Correct.") is None
    assert SayWorld.reply_text("Wrong: it starts with a.</reply>junk") == "Wrong: it starts with a."
    assert SayWorld.same_reply("Wrong:  it starts\nwith a.</reply>", "Wrong: it starts with a.")
    assert not SayWorld.same_reply("Correct.</reply>", "Wrong: it starts with a.")
    (tmp_path / FILE).write_text(json.dumps(["apple", "pear"]))
    assert SayWorld.data_identity(tmp_path) == SayWorld.fingerprint(tmp_path)  # a warm start's key holds it
    monkeypatch.setattr(registry, "entry_points", _entry_points(("say", "toy_world:SayWorld")))
    monkeypatch.syspath_prepend(str(HERE))
    with pytest.raises(LfoError, match="the say world has no teacher .*model.warmstart: null"):
        build_config(WarmStartConfig, {"env": {"kind": "say"}, "data": {"noise": {"epsilon": 0.1}}})

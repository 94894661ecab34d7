"""Recipe resolution: base chains, overrides, strict keys and types, one-line errors."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import pytest

from lfo_cli import recipes
from lfo_cli.errors import LfoError
from lfo_cli.recipe_explain import explain
from lfo_cli.recipes import load_recipe


@dataclass
class WM:
    coef: float = field(default=0.5, metadata={"help": "lambda"})
    coupling: Literal["separate", "stacked", "shared"] = "separate"

    def __post_init__(self):
        if self.coef < 0:
            raise LfoError(f"wm.coef must be >= 0, got {self.coef}")


@dataclass
class ToyConfig:
    seed: int = 0
    model: str = "micro"
    steps: int = 10
    targets: list[str] = field(default_factory=lambda: ["q_proj"])
    wm: WM = field(default_factory=WM)


@pytest.fixture
def recipe_dir(tmp_path, monkeypatch):
    monkeypatch.setitem(recipes.KINDS, "toy", recipes.Kind("toy", f"{__name__}:ToyConfig", f"{__name__}:ToyConfig"))
    (tmp_path / "root.yaml").write_text("kind: toy\nsteps: 100\nwm:\n  coef: 0.5\n")
    (tmp_path / "child.yaml").write_text("base: root\nwm:\n  coef: 1.0\n")
    (tmp_path / "grandchild.yaml").write_text("base: child\nmodel: smollm2-135m\n")
    return tmp_path


def test_chain_merges_deltas(recipe_dir):
    rec = recipes.load_recipe("grandchild", recipe_dir=recipe_dir)
    assert rec.config.steps == 100 and rec.config.wm.coef == 1.0 and rec.config.model == "smollm2-135m"
    assert rec.config.wm.coupling == "separate"  # dataclass default survives the merge
    assert [p.split("/")[-1] for p in rec.chain] == ["root.yaml", "child.yaml", "grandchild.yaml"]
    assert rec.resolved["wm"] == {"coef": 1.0, "coupling": "separate"}


def test_overrides_are_typed(recipe_dir):
    rec = recipes.load_recipe("child", ["wm.coef=2", "seed=7", "targets=[q_proj, v_proj]"], recipe_dir=recipe_dir)
    assert rec.config.wm.coef == 2.0 and isinstance(rec.config.wm.coef, float)
    assert rec.config.seed == 7 and rec.config.targets == ["q_proj", "v_proj"]


def test_exponent_without_a_dot_is_a_number():
    # PyYAML (YAML 1.1) reads `1e-3` as a string; a float field must still take it.
    rec = recipes.load_recipe("dual_lora_micro", ["trainer.learning_rate=1e-3", "wm.coef=5e-1"])
    assert rec.config.trainer["learning_rate"] == 1e-3 and rec.config.wm.coef == 0.5
    for bad in ("trainer.learning_rate=nan", "trainer.learning_rate=1e-3x"):
        with pytest.raises(LfoError, match="expected a number"):
            recipes.load_recipe("dual_lora_micro", [bad])


@pytest.mark.parametrize(
    "override, message",
    [
        ("wm.coeff=1", "unknown key 'wm.coeff' (did you mean 'coef'?)"),
        ("coef=1", "unknown key 'coef' (did you mean 'wm.coef'?)"),  # a key of a nested section
        ("wm.coef=-1", "wm.coef must be >= 0"),
        ("wm.coupling=glued", "must be one of"),
        ("steps=ten", "expected an integer"),
        ("steps=1.5", "expected an integer"),
        ("wm=3", "expected a mapping"),
        ("nonsense", "--set expects KEY=VALUE"),
    ],
)
def test_bad_values_raise_one_line(recipe_dir, override, message):
    with pytest.raises(LfoError) as info:
        recipes.load_recipe("child", [override], recipe_dir=recipe_dir)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(("files", "name", "message"), [
    ({"broken": "kind: toy\nwm: [unclosed\n"}, "broken", "broken.yaml.*malformed YAML"),
    ({"a": "base: b\n", "b": "base: a\n"}, "a", "cycle"),
    ({"list": "- 1\n- 2\n"}, "list", "must be a YAML mapping"),
    ({}, "chlid", "did you mean 'child'"),
    ({"nokind": "steps: 3\n"}, "nokind", "'kind' must be one of"),
])
def test_malformed_yaml_cycles_unknown_recipes_and_kinds(recipe_dir, files, name, message):
    for stem, text in files.items():
        (recipe_dir / f"{stem}.yaml").write_text(text)
    with pytest.raises(LfoError, match=message):
        recipes.load_recipe(name, recipe_dir=recipe_dir)


def test_cli_bad_recipe_exits_2_with_one_line(tmp_path):
    from typer.testing import CliRunner

    from lfo_cli.cli import app

    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: [\n")
    result = CliRunner().invoke(app, ["train", "--recipe", str(bad)])
    assert result.exit_code == 2
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and "bad.yaml" in lines[0]


@pytest.mark.parametrize("name", recipes.available_recipes())
def test_shipped_recipes_resolve(name):
    merged, _ = recipes.resolve_chain(name)
    assert merged["kind"] in recipes.KINDS  # the one table of kinds
    rec = recipes.load_recipe(name)
    assert rec.resolved["kind"] == merged["kind"]
    # The resolved mapping is a fixed point: resolving it again gives the same config.
    again = recipes.recipe_from_mapping(rec.resolved, name=name)
    assert again.resolved == rec.resolved


@pytest.mark.parametrize(
    "override, message",
    [
        ("trainer.learnin_rate=1", "did you mean 'learning_rate'"),
        ("trainer.epsilon_high=abc", "trainer.epsilon_high: expected a number"),
        ("trainer.wm_coef=1", "in the wm section (wm.coef)"),
        ("trainer.num_generations=3", "divisible by num_generations"),
        ("data.max_difficulty=9", "max_difficulty <= 5"),
        ("lora.r=0", "lora.r must be >= 1"),
        ("wm.coef=-0.5", "wm.coef must be >= 0"),
        ("wm.schedule=sometimes", "wm.schedule must be"),
        ("env.field_credit=1.0", "env.field_credit must be in [0, 1)"),
        ("env.progress_shaping=-0.1", "env.progress_shaping must be in [0, 1)"),
        ("env.field_credits=0.5", "did you mean 'field_credit'"),
        ("eval.heldout_samples_per_task=0", "eval.heldout_samples_per_task must be null or in [1, 64]"),
    ],
)
def test_grpo_recipe_rejects_bad_values(override, message):
    with pytest.raises(LfoError) as info:
        recipes.load_recipe("dual_lora_micro", [override]).check()  # check(): TRL's own checks too
    assert message in str(info.value) and "\n" not in str(info.value)


def test_gpu_recipe_on_cpu_fails_fast_without_a_run_dir(tmp_path):
    import torch
    from typer.testing import CliRunner

    from lfo_cli.cli import app

    if torch.cuda.is_available():
        pytest.skip("checks the CPU-machine behaviour")
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["train", "--recipe", "dual_lora", "--out", str(out)])
    assert result.exit_code == 2 and "GPU recipe on a CPU machine" in result.output
    assert not out.exists()  # nothing created, nothing built (no warm start was started)


def test_grpo_recipe_env_section_reaches_the_environment():
    """`env:` shaping in a recipe is what the training environments are built with."""
    import dataclasses

    from lfo_cli.env import generate_world, make_env_factory

    rec = recipes.load_recipe("dual_lora_micro", ["env.field_credit=0.25", "env.progress_shaping=0.5",
                                                   "env.probe_bonus=0.125"])
    opts = rec.config.env.options()
    assert opts == {"progress_shaping": 0.5, "field_credit": 0.25, "probe_bonus": 0.125}
    assert dataclasses.asdict(rec.config.env) == {"kind": "customer_service", **opts}
    world = generate_world(num_companies=6, num_train_tasks=10, num_val_tasks=4, seed=1)
    episode = make_env_factory(world, **opts)().episode
    assert (episode.progress_shaping, episode.field_credit, episode.probe_bonus) == (0.5, 0.25, 0.125)


def test_world_model_options_are_declared_once_with_their_help():
    """The recipe's wm section is the trainer config's `wm`: one dataclass, passed as is."""
    import dataclasses
    import typing

    from lfo_cli.train.config import DualLoRAConfig
    from lfo_cli.train.recipe_config import TrainConfig
    from lfo_cli.train.wm_settings import WorldModelSettings

    assert typing.get_type_hints(TrainConfig)["wm"] is WorldModelSettings
    assert typing.get_type_hints(DualLoRAConfig)["wm"] is WorldModelSettings
    assert not [f.name for f in dataclasses.fields(DualLoRAConfig) if f.name.startswith("wm_")]
    assert all(f.metadata.get("help") for f in dataclasses.fields(WorldModelSettings))
    cfg = recipes.load_recipe("dual_lora_micro", ["wm.coef=0.25", "wm.coupling=stacked"]).config
    args = cfg.training_args("/tmp/lfo-wm-settings", portable=True)
    assert args.wm is cfg.wm and (args.wm.coef, args.wm.coupling) == (0.25, "stacked")
    assert args.to_dict()["wm"]["coef"] == 0.25  # TRL's serialisation (trackers) gets a mapping


def test_train_list_shows_each_recipe_with_its_description():
    import json

    from typer.testing import CliRunner

    from lfo_cli.cli import app

    listed = json.loads(CliRunner().invoke(app, ["train", "--list", "--json"]).stdout)
    assert [r["name"] for r in listed] == recipes.available_recipes()
    assert all(r["description"] for r in listed)  # every shipped recipe says what it is
    text = CliRunner().invoke(app, ["train", "--list"]).stdout
    assert "observation_micro" in text and "company exceptions" in text
    # a description documents its file only: it never reaches the resolved recipe (nor warm-start keys)
    assert "description" not in recipes.load_recipe("observation_micro").resolved


@pytest.mark.parametrize(("sets", "val", "held"), [([], 2, 2), (["eval.heldout_samples_per_task=4"], 2, 4)])
def test_held_out_episodes_per_task_default_to_validations(sets, val, held):
    from types import SimpleNamespace

    from lfo_cli.train.runner import evaluation_episodes

    cfg = recipes.load_recipe("dual_lora_micro", ["eval.samples_per_task=2", *sets]).config
    pools = SimpleNamespace(validation=["v1", "v2"], heldout=["h1", "h2", "h3"])
    got_val, got_held = evaluation_episodes(pools, cfg.eval)
    assert got_val == [v for v in pools.validation for _ in range(val)]
    assert got_held == [h for h in pools.heldout for _ in range(held)]


def test_explain_gives_a_keys_type_default_and_help_from_the_config_itself():
    from lfo_cli.train.wm_settings import WorldModelSettings

    got = explain("grpo", "wm.coef")
    assert got["type"] == "float" and got["default"] == WorldModelSettings().coef
    assert got["help"].startswith("lambda, the world-model loss weight")
    assert explain("warmstart", "train.epochs")["type"] == "float"
    section = explain("grpo", "wm")
    assert "coef" in section["fields"] and "default" not in section
    with pytest.raises(LfoError, match=r"grpo recipes have no key 'wm.coefs' \(did you mean 'coef'\?\)"):
        explain("grpo", "wm.coefs")
    with pytest.raises(LfoError, match="wm.coef is a float, not a section"):
        explain("grpo", "wm.coef.x")


def test_lfo_train_explain_prints_the_recipes_value_beside_the_default():
    from typer.testing import CliRunner

    from lfo_cli.cli import app

    out = CliRunner().invoke(app, ["train", "--explain", "trainer.max_steps", "--recipe", "demo_micro"])
    assert out.exit_code == 0, out.output
    assert out.output.startswith("trainer.max_steps (grpo): int = ") and "; in demo_micro: 12\n" in out.output
    bad = CliRunner().invoke(app, ["train", "--explain", "trainer.max_stepz"])
    assert bad.exit_code == 2 and bad.output.strip().splitlines()[-1].startswith("error: grpo recipes have no key")


def test_unset_leaves_out_what_the_base_chain_set(tmp_path):
    """A delta over a base of another world leaves out that world's settings: `unset` in a recipe, `~KEY` on the
    command line (Hydra's spelling); what is left out takes its default, and naming a key the base never set is
    an error (a typo would otherwise do nothing)."""
    (tmp_path / "mine.yaml").write_text("base: dual_lora_micro\nunset: [env.field_credit, wm.learning_rate]\n")
    base = load_recipe("dual_lora_micro").config
    mine = load_recipe(str(tmp_path / "mine.yaml")).config
    assert base.env.field_credit == 0.5 and mine.env.field_credit == 0.0 and mine.wm.learning_rate != base.wm.learning_rate
    assert load_recipe("dual_lora_micro", ["~env.field_credit"]).config.env.options() == {}
    (tmp_path / "typo.yaml").write_text("base: dual_lora_micro\nunset: [env.field_credits]\n")
    with pytest.raises(LfoError, match="unset: its base chain sets no 'env.field_credits'"):
        load_recipe(str(tmp_path / "typo.yaml"))
    with pytest.raises(LfoError, match="sets no 'env.probe_bonus'"):
        load_recipe("dual_lora_micro", ["~env.probe_bonus"])
    (tmp_path / "bad.yaml").write_text("base: dual_lora_micro\nunset: env.field_credit\n")
    with pytest.raises(LfoError, match="'unset' must be a list of dotted keys"):
        load_recipe(str(tmp_path / "bad.yaml"))


def test_another_worlds_key_is_refused_with_the_way_to_leave_it_out():
    pytest.importorskip("textworld")
    with pytest.raises(LfoError, match=r"unknown key 'env.field_credit' \(a setting of another world, from a base "
                                       r"recipe\? leave it out with `unset: \[env.field_credit\]`"):
        load_recipe("dual_lora_micro", ["env.kind=textworld"])
    tw = load_recipe("dual_lora_micro", ["env.kind=textworld", "~env.field_credit", "~wm.predict"]).config
    assert tw.env.options() == {} and tw.wm.predict == "act"  # wm.predict left out: the world's default


def test_a_run_recorded_before_its_world_owned_its_settings_resumes(tmp_path):
    """A TextWorld run recorded when its recipes listed the customer-service world's keys (at the values that switch
    them off) resumes; one that set such a key to anything else cannot have run, and is refused."""
    import yaml

    from lfo_cli.train.run import Run

    pytest.importorskip("textworld")
    resolved = load_recipe("textworld_micro").resolved
    old = {**resolved, "data": {**resolved["data"], "companies": None, "fresh_companies": 0, "fresh_company_share": 0.0},
           "env": {**resolved["env"], "progress_shaping": 0.0, "field_credit": 0.0, "probe_bonus": 0.0}}
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(old))
    run = Run.resumed(tmp_path)
    assert run.resume and run.recipe.resolved == resolved
    old["env"]["field_credit"] = 0.5
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(old))
    with pytest.raises(LfoError, match="unknown key 'env.field_credit'"):
        Run.resumed(tmp_path)


def test_a_recorded_recipe_from_before_a_key_resumes_with_the_value_its_run_had():
    from lfo_cli.recipes import KINDS, fill_added_later

    old = {"kind": "grpo", "trainer": {"max_steps": 90}}  # recorded before trainer.rollout_dropout existed
    assert fill_added_later(old)["trainer"]["rollout_dropout"] is True  # it sampled with dropout
    assert "rollout_dropout" not in old["trainer"]  # the recorded mapping itself is left as it is
    new = {"kind": "grpo", "trainer": {"rollout_dropout": False}}
    assert fill_added_later(new) == new  # a recipe that names the key keeps its value
    assert fill_added_later({"kind": "warmstart", "train": {}}) == {"kind": "warmstart", "train": {}}
    assert set(KINDS["grpo"].added_later) == {"trainer.rollout_dropout", "wm.targets", "wm.tools"}


@pytest.mark.parametrize(("recipe", "hint"), [
    ("kind: grpo\ntrainer: {max_steps: 3}\n", "--out NEW --set trainer.max_steps=N"),
    ("kind: wmil\nsteps: 3\n", "train a new run with more steps (only a grpo run is continued"),
    ("kind: [1]\n", "train a new run"),  # a kind that is no kind's name
    ("kind: grpo\n  : [\n", "train a new run"),  # malformed YAML
    (None, "train a new run"),  # no recipe.yaml: not a run `lfo train` laid out
])
def test_a_finished_runs_hint_follows_its_recorded_kind_and_never_fails(tmp_path, recipe, hint):
    from lfo_cli.train.run import continue_hint

    if recipe is not None:
        (tmp_path / "recipe.yaml").write_text(recipe)
    (tmp_path / "run.json").write_text("{not json")
    assert hint in continue_hint(tmp_path)

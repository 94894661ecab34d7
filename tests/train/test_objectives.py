"""World-model objectives: the normalisers on hand-made numbers, the registry, and a fourth coupling added as
one class (the example in docs/training.md)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from test_trainer import make_inputs, make_trainer  # noqa: E402
from tiny import tiny_tokenizer  # noqa: E402

from lfo_cli.train.normalise import NORMALISERS, ObsTokens, TokenMean  # noqa: E402
from lfo_cli.train.objectives import COUPLINGS, OBJECTIVES, Separate, Shared, Stacked, objective_class  # noqa: E402
from lfo_cli.train.wm_settings import WorldModelSettings  # noqa: E402
from lfo_cli.worlds import world_class  # noqa: E402

LFO = Path(__file__).resolve().parents[2] / "lfo_cli"


def test_the_normalisers_on_hand_made_sums_and_counts():
    sums, counts = torch.tensor([6.0, 4.0, 0.0]), torch.tensor([3, 1, 0])  # a long reply, a short one, none
    assert float(ObsTokens().reduce(sums, counts)) == pytest.approx((2.0 + 4.0) / 2)  # every sequence weighs 1
    assert float(TokenMean().reduce(sums, counts)) == pytest.approx(10.0 / 4)  # every token weighs 1
    assert ObsTokens().units(counts) == 2.0 and TokenMean().units(counts) == 4.0
    assert set(NORMALISERS) == {"obs_tokens", "token_mean"}


@pytest.mark.parametrize(("normalize", "expected", "units"), [("obs_tokens", (4 / 2 + 6 / 1) / 2, 2.0),
                                                             ("token_mean", 10 / 3, 3.0), ("legacy", 10 / 3, 3.0)])
def test_shared_normalisations_on_hand_made_log_probs_and_reply_masks(normalize, expected, units):
    """Two rollouts: reply tokens with log-probs -1, -3 in the first and -6 in the second; the other
    positions (the agent's own tokens) and the third rollout (no reply) count for nothing."""

    from lfo_cli.train.rollout_record import RolloutRecord, StepWMMetrics

    logps = torch.tensor([[-1.0, -9.0, -3.0], [-7.0, -6.0, -8.0], [-5.0, -5.0, -5.0]], requires_grad=True)
    mask = torch.tensor([[1, 0, 1], [0, 1, 0], [0, 0, 0]])
    objective = Shared(WorldModelSettings(coupling="shared", normalize=normalize), tokenizer=None, total=torch.as_tensor,
                       world=world_class("customer_service"))
    objective.observe_policy_forward(logps, None)
    part = StepWMMetrics()
    loss, n = objective.loss(None, RolloutRecord(reply_mask=mask), part)
    assert float(loss) == pytest.approx(expected) and n == units and part.units == units and part.targets == 3
    loss.backward()
    assert float(logps.grad[2].abs().sum()) == 0 and float(logps.grad[0, 1]) == 0  # only reply tokens
    output = {"completion_ids": torch.zeros(3, 3, dtype=torch.long), "completion_mask": torch.ones(3, 3, dtype=torch.long)}
    objective.reply_masks = lambda out, envs: mask
    objective.collect(output, environments=[])
    assert float(output["lfo_wm_units"]) == units  # the generation's total counts the same units


def test_a_normalisation_a_coupling_cannot_count_is_refused_at_config_time(tmp_path):
    from lfo_cli.errors import LfoError
    from lfo_cli.train.config import DualLoRAConfig

    with pytest.raises(LfoError, match="wm.normalize=token_mean does not go with wm.coupling=separate"):
        WorldModelSettings(coupling="separate", normalize="token_mean")
    assert DualLoRAConfig(output_dir=str(tmp_path), use_cpu=True).wm.normalize == "obs_tokens"  # the default
    wm = WorldModelSettings(coupling="shared", normalize="token_mean")
    wm.coupling = "separate"  # changed after construction: the trainer's config checks what it is given
    with pytest.raises(LfoError, match="wm.normalize=token_mean does not go with wm.coupling=separate"):
        DualLoRAConfig(output_dir=str(tmp_path), use_cpu=True, wm=wm)


def test_each_coupling_is_one_registered_class_with_its_adapters_and_normaliser():
    assert COUPLINGS == ("separate", "stacked", "shared") and OBJECTIVES["stacked"] is Stacked
    assert (Separate.has_adapter, Stacked.has_adapter, Shared.has_adapter) == (True, True, False)
    assert Separate.predict_adapters == ("world_model",) and Stacked.predict_adapters == ("policy", "world_model")
    assert Separate.default_normaliser is ObsTokens and Shared.default_normaliser is TokenMean
    with pytest.raises(ValueError, match="unknown wm.coupling 'bogus'"):
        objective_class("bogus")


def test_coupling_names_are_compared_nowhere_but_the_registry_and_the_configs_literal():
    """No `coupling == "shared"` and no dict keyed by coupling names: the only string constants equal to a
    coupling's name are the objectives' own `name`s and the config's default."""
    found = []
    for path in LFO.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Constant) and node.value in COUPLINGS:
                found.append(f"{path.relative_to(LFO)}:{node.value}")
    assert sorted(found) == ["train/objectives.py:separate", "train/objectives.py:shared",
                             "train/objectives.py:stacked", "train/wm_settings.py:separate"]


@pytest.fixture()
def fourth_coupling():
    """The docs' example: the policy adapter alone predicts the formatted replies (an ECHO-like weight
    sharing with the world model's own inputs), with no world-model adapter."""
    from lfo_cli.train.objectives import _ExampleObjective

    class PolicyPredicts(_ExampleObjective):
        name = "policy_predicts"
        has_adapter = False
        predict_adapters = ("policy",)

    yield PolicyPredicts
    del OBJECTIVES["policy_predicts"]


def test_a_fourth_coupling_is_one_class(fourth_coupling, tmp_path):
    from lfo_cli.train.adapters import POLICY, adapter_params

    tokenizer = tiny_tokenizer()
    trainer = make_trainer(tokenizer, tmp_path, dual=False, wm_coupling="policy_predicts", wm_coef=1.0)
    assert isinstance(trainer.objective, fourth_coupling)
    for p in adapter_params(trainer.model, POLICY):
        torch.nn.init.normal_(p, std=0.1)
    trainer.model.train()
    trainer.compute_loss(trainer.model, make_inputs(tokenizer))
    logged = trainer._metrics["train"]
    assert logged["losses/wm"][-1] > 0 and logged["wm/examples"][-1] == 4.0
    assert logged["grad_norm/policy_from_wm"][-1] > 0  # its world-model gradient trains the policy
    with pytest.raises(ValueError, match="exists already"):
        type("Again", (fourth_coupling,), {"name": "policy_predicts"})


def test_a_recipe_names_a_coupling_defined_in_the_users_module(fourth_coupling):
    from lfo_cli import recipes

    rec = recipes.load_recipe("dual_lora_micro", ["wm.coupling=policy_predicts", "wm.schedule=joint"])
    assert rec.config.wm.objective is fourth_coupling
    assert "policy_predicts" in __import__("lfo_cli.train.objectives", fromlist=["couplings"]).couplings()


def _plugin(tmp_path, monkeypatch, body: str) -> str:
    """What `pip install` of a package with an `lfo.objectives` entry point leaves: a dist-info and its module
    (named afresh per test: Python keeps a module it imported once). Returns the entry point's target."""
    import uuid

    module = f"plug_{uuid.uuid4().hex[:8]}"
    dist = tmp_path / "site" / "plug-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: plug\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[lfo.objectives]\nplug = {module}:Plug\n")
    (tmp_path / "site" / f"{module}.py").write_text(body)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    return f"{module}:Plug"


def test_a_coupling_registered_by_entry_point_is_accepted_at_config_time(tmp_path, monkeypatch):
    from lfo_cli import recipes
    from lfo_cli.train.objectives import couplings

    _plugin(tmp_path, monkeypatch, "from lfo_cli.train.objectives import Stacked\n\n\n"
                                   "class Plug(Stacked):\n    name = 'plug'\n")
    try:
        assert "plug" in couplings()
        wm = recipes.load_recipe("dual_lora_micro", ["wm.coupling=plug"]).config.wm
        assert wm.objective.__name__ == "Plug" and wm.objective.predict_adapters == Stacked.predict_adapters
    finally:
        OBJECTIVES.pop("plug", None)


@pytest.mark.parametrize("body, needle", [
    ("raise ImportError('no torch here')\n", "does not load: ImportError: no torch here"),
    ("class Plug:\n    name = 'plug'\n", "is not a WorldModelObjective subclass with name = 'plug'"),
])
def test_a_broken_coupling_plugin_is_one_error_naming_it(tmp_path, monkeypatch, body, needle):
    from typer.testing import CliRunner

    from lfo_cli.cli import app

    target = _plugin(tmp_path, monkeypatch, body)
    r = CliRunner().invoke(app, ["train", "--recipe", "dual_lora_micro", "--set", "wm.coupling=plug", "--dry-run"])
    assert r.exit_code == 2 and needle in r.output and target in r.output and r.output.count("\n") == 1


def test_an_unknown_coupling_says_how_to_add_one():
    from typer.testing import CliRunner

    from lfo_cli.cli import app

    r = CliRunner().invoke(app, ["train", "--recipe", "dual_lora_micro", "--set", "wm.coupling=nope", "--dry-run"])
    assert r.exit_code == 2
    assert "unknown wm.coupling 'nope' (known: separate, stacked, shared" in r.output
    assert "subclass of lfo_cli.train.objectives.WorldModelObjective with name = 'nope'" in r.output


def test_the_entropy_gate_keeps_the_replies_to_the_uncertain_turns():
    """PaW's gate on hand-made entropies: turns (runs of the agent's own tokens) numbered per rollout, each
    reply tagged with the turn before it; at quantile 0.5 of the turns' mean entropies (2.0, 0.1, 1.0 ->
    1.0) the replies to the 2.0 and 1.0 turns count, the one after the confident 0.1 turn does not."""

    from lfo_cli.train.rollout_record import RolloutRecord, StepWMMetrics, turn_ids

    tool = [[1, 1, 0, 0, 1, 0], [1, 0, 0, 0, 0, 0]]
    real = [[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0]]
    reply = [[0, 0, 1, 1, 0, 1], [0, 1, 1, 0, 0, 0]]
    turns = torch.tensor([turn_ids(t, c, r) for t, c, r in zip(tool, real, reply, strict=True)])
    assert turns.tolist() == [[1, 1, -1, -1, 2, -2], [1, -1, -1, 0, 0, 0]]
    entropies = torch.tensor([[2.0, 2.0, 9.0, 9.0, 0.1, 9.0], [1.0, 9.0, 9.0, 9.0, 9.0, 9.0]])
    objective = Shared(WorldModelSettings(coupling="shared", gate_quantile=0.5), tokenizer=None, total=torch.as_tensor,
                       world=world_class("customer_service"))
    kept = objective.gate_mask(entropies, turns, torch.tensor(reply))
    assert kept.tolist() == [[0, 0, 1, 1, 0, 0], [0, 1, 1, 0, 0, 0]]
    logps = -torch.arange(1.0, 13.0).reshape(2, 6)
    objective.observe_policy_forward(logps, entropies)
    part = StepWMMetrics()
    loss, n = objective.loss(None, RolloutRecord(reply_mask=torch.tensor(reply), turns=turns), part)
    assert float(loss) == pytest.approx(((3 + 4) / 2 + (8 + 9) / 2) / 2) and n == 2.0  # obs_tokens over kept tokens
    assert (part.gate_kept, part.gate_total) == (4.0, 5.0)


def test_the_gate_is_refused_for_a_coupling_that_does_not_read_the_policys_forward(tmp_path):
    from lfo_cli.errors import LfoError

    with pytest.raises(LfoError, match="does not read the policy's forward"):
        WorldModelSettings(coupling="stacked", gate_quantile=0.5)
    with pytest.raises(LfoError, match=r"must be in \[0, 1\)"):
        WorldModelSettings(coupling="shared", gate_quantile=1.5)

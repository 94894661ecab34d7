"""`lfo inspect-wm`: metrics on a real (tiny) world model, trained vs untrained, through the CLI."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent))
from wm_fixture import tiny_env_tokenizer, tiny_world, train_world_model  # noqa: E402

from lfo_cli.cli import app  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    import torch
    from transformers import AutoModelForCausalLM

    from lfo_cli.env import write_world
    from lfo_cli.env.plugin import CustomerServiceWorld
    from lfo_cli.models import micro
    from lfo_cli.train.adapters import LoraSettings, attach_dual_lora, save_adapters

    torch.manual_seed(0)
    root = tmp_path_factory.mktemp("inspect_wm")
    world = tiny_world()
    write_world(world, root / "data")
    tok = tiny_env_tokenizer()
    arch = micro.MicroArch(hidden_size=96, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                           head_dim=24, intermediate_size=192, max_position_embeddings=2048, induction_init=False)
    micro.init_model(tok, arch).save_pretrained(root / "base")
    tok.save_pretrained(root / "base")
    lora = LoraSettings(r=32, alpha=64, dropout=0.0,
                        target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
    model = attach_dual_lora(AutoModelForCausalLM.from_pretrained(root / "base"), lora)
    recipe = {"kind": "grpo", "data": {"dir": str(root / "data")}, "wm": {"max_length": 384}}
    for name in ("untrained", "trained"):
        if name == "trained":
            # Trained on the oracle's successful calls only: 80 steps of a tiny model learn that reply family
            # (token accuracy 0.28 against 0.29 after 200 steps at half the learning rate), so the trained
            # adapter must score above the untrained one on the success share of the evaluation calls.
            calls = [t for t in CustomerServiceWorld(world).inspection_calls("train", 80, 0, policy="oracle")
                     if t.category == "success"]
            train_world_model(model, tok, calls, steps=80, lr=6e-3, max_length=384)
        (root / name).mkdir()
        (root / name / "recipe.yaml").write_text(yaml.safe_dump(recipe))
        save_adapters(model, root / name)
    return root


def inspect(run: Path, *extra: str) -> dict:
    result = CliRunner().invoke(app, ["inspect-wm", str(run), "--episodes", "8", "--max-new-tokens", "40",
                                       "--probe-companies", "3", "--json", *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_trained_world_model_beats_untrained(runs):
    before, after = inspect(runs / "untrained"), inspect(runs / "trained")
    for out in (before, after):
        assert set(out) == {"run_dir", "source", "overall", "by_category"}
        assert set(out["overall"]) == {"n", "token_accuracy", "perplexity", "semantic_accuracy", "bleu"}
        assert out["overall"]["n"] == sum(c["n"] for c in out["by_category"].values()) > 0
    assert after["overall"]["semantic_accuracy"] > before["overall"]["semantic_accuracy"]
    assert after["overall"]["token_accuracy"] > before["overall"]["token_accuracy"] + 0.1
    assert after["overall"]["bleu"] > before["overall"]["bleu"]


def test_probe_section_and_bad_input(runs):
    out = inspect(runs / "trained", "--probe")
    assert set(out["probes"]) == {"val", "transfer"}
    assert all(set(kinds) <= {"auth_failure", "success"} for kinds in out["probes"].values())
    bad = CliRunner().invoke(app, ["inspect-wm", str(runs / "nope")])
    assert bad.exit_code == 2 and "not a run directory" in bad.output
    bad = CliRunner().invoke(app, ["inspect-wm", str(runs / "trained"), "--split", "moon"])
    assert bad.exit_code == 2 and "--split" in bad.output


def test_side_by_side_prints_model_text_literally(capsys, monkeypatch):
    """Generated replies are arbitrary text: "[/csr]" or "[red]" must print as written, not as rich markup
    (an unmatched closing tag made rich raise)."""
    from lfo_cli.commands.inspect_wm import _print

    monkeypatch.setenv("COLUMNS", "300")
    metrics = {"n": 1, "token_accuracy": 0.5, "perplexity": 2.0, "bleu": 1.0, "semantic_accuracy": 0.0}
    out = {"source": "test", "overall": metrics, "by_category": {"auth_failure": metrics}}
    examples = [{"category": "auth_failure", "predicted": "need [/csr] your [red]pin[/red]",
                 "actual": "[account_number] please", "semantic_ok": False}]
    _print(out, examples)
    printed = capsys.readouterr().out
    assert "need [/csr] your [red]pin[/red]" in printed and "[account_number] please" in printed

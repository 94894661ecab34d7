"""A finished run dir loads after it and $LFO_HOME move, and `lfo export` writes files that load without lfo."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from tiny import tiny_model, tiny_tokenizer  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A 2-step run whose base lives under $LFO_HOME (like a warm start), then run and home both moved."""
    from lfo_cli.env import generate_world, write_world

    root = tmp_path_factory.mktemp("portable")
    write_world(generate_world(num_companies=12, num_train_tasks=40, num_val_tasks=8, heldout_fraction=0.25, seed=5),
                root / "data")
    base = root / "home1" / "warmstart" / "tiny" / "model"
    tok = tiny_tokenizer()
    tiny_model(tok).save_pretrained(base)
    tok.save_pretrained(base)
    sets = {"model.name": str(base), "model.warmstart": "null", "data.dir": str(root / "data"), "eval.every": "0",
            "lora.r": "4", "lora.alpha": "8", "trainer.max_steps": "2", "trainer.save_steps": "1",
            "trainer.max_completion_length": "24", "trainer.per_device_train_batch_size": "4",
            "trainer.num_generations": "2", "trainer.logging_steps": "1"}
    cmd = [sys.executable, "-m", "lfo_cli", "train", "--recipe", "dual_lora_micro", "--out", str(root / "run")]
    for k, v in sets.items():
        cmd += ["--set", f"{k}={v}"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TRL_EXPERIMENTAL_SILENCE": "1", "LFO_HOME": str(root / "home1")}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((root / "run" / "summary.json").read_text())
    card = (root / "run" / "README.md").read_text()
    shutil.move(root / "home1", root / "home2")  # another machine: $LFO_HOME elsewhere, the run copied
    shutil.move(root / "run", root / "moved")
    return root, summary, card


def logits(model, tokenizer) -> torch.Tensor:
    ids = tokenizer("call the billing department", return_tensors="pt").input_ids
    with torch.no_grad():
        return model(input_ids=ids).logits


def test_the_run_records_a_portable_base_and_a_card_naming_both_adapters(trained):
    root, summary, card = trained
    assert summary["base_model_ref"] == {"lfo_home": "warmstart/tiny/model"}
    assert "base_model: $LFO_HOME/warmstart/tiny/model" in card
    assert "world_model/" in card and "PeftModel.from_pretrained" in card
    assert (root / "moved" / "tokenizer.json").is_file()  # the tokenizer travels with the run


def test_a_moved_run_loads_against_this_machines_lfo_home(trained, monkeypatch):
    from lfo_cli.errors import LfoError
    from lfo_cli.eval.loading import load_run_model

    root, _, _ = trained
    monkeypatch.setenv("LFO_HOME", str(root / "home2"))
    model, tok = load_run_model(root / "moved", "policy")
    assert model.active_adapters == ["policy"] and logits(model, tok).shape[-1] == len(tok)
    wm, _ = load_run_model(root / "moved", "world_model")
    assert wm.active_adapters == ["world_model"]
    monkeypatch.setenv("LFO_HOME", str(root / "nowhere"))
    with pytest.raises(LfoError, match=r"\$LFO_HOME/warmstart/tiny/model is not on this machine"):
        load_run_model(root / "moved", "policy")


@pytest.mark.parametrize("merge", [True, False])
def test_export_writes_files_that_load_without_lfo(trained, merge, monkeypatch):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from lfo_cli.eval.loading import load_run_model

    root, _, _ = trained
    out = root / f"export_{merge}"
    env = {**os.environ, "LFO_HOME": str(root / "home2"), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "lfo_cli", "export", str(root / "moved"), "--out", str(out), "--json"]
    done = subprocess.run(cmd + (["--merge"] if merge else []), capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["merged"] is merge
    monkeypatch.setenv("LFO_HOME", str(root / "home2"))
    want_model, want_tok = load_run_model(root / "moved", "policy")
    want = logits(want_model, want_tok)
    if merge:
        got_model, got_tok = AutoModelForCausalLM.from_pretrained(out), AutoTokenizer.from_pretrained(out)
        assert not any("lora" in n for n, _ in got_model.named_parameters())
    else:
        got_tok = AutoTokenizer.from_pretrained(out)
        got_model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(out / "base"), out / "policy")
        assert (out / "world_model" / "adapter_model.safetensors").is_file()
    torch.testing.assert_close(logits(got_model, got_tok), want, rtol=1e-4, atol=1e-4)
    again = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert again.returncode == 2 and again.stderr.strip().splitlines() == [
        f"error: {out} already exists; choose a new --out (an export never overwrites)"]


def test_the_readme_snippet_loads_an_export_with_both_adapters(trained, monkeypatch):
    """The README's "Load a trained run" block, run as written on a real export (only its path replaced)."""
    import re

    from lfo_cli.eval.loading import load_run_model

    root, _, _ = trained
    out = root / "export_readme"
    env = {**os.environ, "LFO_HOME": str(root / "home2"), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "lfo_cli", "export", str(root / "moved"), "--out", str(out)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("## Load a trained run", 1)[1].split("\n## ", 1)[0]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert 'path = "exported/dual_s0"' in code
    scope: dict = {}
    exec(code.replace('"exported/dual_s0"', repr(str(out)), 1), scope)  # noqa: S102 - the README's own lines
    model = scope["model"]
    assert set(model.peft_config) == {"policy", "world_model"} and model.active_adapters == ["policy"]
    monkeypatch.setenv("LFO_HOME", str(root / "home2"))
    want_model, want_tok = load_run_model(root / "moved", "policy")
    torch.testing.assert_close(logits(model, scope["tokenizer"]), logits(want_model, want_tok), rtol=1e-4, atol=1e-4)

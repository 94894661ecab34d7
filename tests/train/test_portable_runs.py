"""A finished run dir loads after it and $LFO_HOME move, and `lfo export` writes files that load without lfo."""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from tiny import Done, lfo_here, tiny_model, tiny_tokenizer  # noqa: E402

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
    done = lfo_here(cmd, env={"LFO_HOME": str(root / "home1")})
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
    cmd = ["export", str(root / "moved"), "--out", str(out), "--json"]
    done = _lfo(root, *cmd, *(["--merge"] if merge else []))
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
    again = _lfo(root, *cmd)
    assert again.returncode == 2 and again.stderr.strip().splitlines() == [
        f"error: {out} already exists; choose a new --out (an export never overwrites)"]


def test_the_documented_snippet_loads_an_export_with_both_adapters(trained, monkeypatch):
    """The loading snippet of docs/training.md ("Run dir"), run as written on a real export (only its path
    replaced)."""
    import re

    from lfo_cli.eval.loading import load_run_model

    root, _, _ = trained
    out = root / "export_readme"
    done = _lfo(root, "export", str(root / "moved"), "--out", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    doc = (Path(__file__).resolve().parents[2] / "docs" / "training.md").read_text()
    section = doc.split("\n## Run dir", 1)[1].split("\n## ", 1)[0]
    code = next(c for c in re.findall(r"```python\n(.*?)```", section, re.S) if "PeftModel" in c)
    assert 'path = "exported/dual_s0"' in code
    scope: dict = {}
    exec(code.replace('"exported/dual_s0"', repr(str(out)), 1), scope)  # noqa: S102 - the README's own lines
    model = scope["model"]
    assert set(model.peft_config) == {"policy", "world_model"} and model.active_adapters == ["policy"]
    monkeypatch.setenv("LFO_HOME", str(root / "home2"))
    want_model, want_tok = load_run_model(root / "moved", "policy")
    torch.testing.assert_close(logits(model, scope["tokenizer"]), logits(want_model, want_tok), rtol=1e-4, atol=1e-4)


def _lfo(root: Path, *args: str, cwd: Path | None = None) -> Done:
    """`lfo ARGS` in this process with this machine's $LFO_HOME (home2), from ``cwd`` where given."""
    with contextlib.chdir(cwd or Path.cwd()):
        return lfo_here(*args, env={"LFO_HOME": str(root / "home2")})


@pytest.mark.parametrize("damage", ["truncated policy", "wrong-shape world model"])
def test_export_refuses_a_damaged_adapter_with_one_line_naming_it(trained, damage):
    from safetensors.torch import load_file, save_file

    root, _, _ = trained
    run = root / f"damaged_{damage.split()[0]}"
    shutil.copytree(root / "moved", run)
    if damage == "truncated policy":
        bad = run / "adapter_model.safetensors"
        bad.write_bytes(bad.read_bytes()[:1000])
        says = "corrupt or truncated adapter weights"
    else:
        bad = run / "world_model" / "adapter_model.safetensors"
        tensors = load_file(bad)
        name = sorted(k for k in tensors if "lora_A" in k)[0]
        tensors[name] = torch.zeros(tensors[name].shape[0] + 1, tensors[name].shape[1])
        save_file(tensors, bad)
        says = f"wrong shape tensor {name}"
    for merge in ([], ["--merge"]) if damage == "truncated policy" else ([],):
        out = root / f"export_{run.name}{merge and '_merged' or ''}"
        done = _lfo(root, "export", str(run), "--out", str(out), *merge)
        assert done.returncode == 2 and done.stdout == ""
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        line = done.stderr.strip()
        assert line.startswith(f"error: {bad}") and (says in line or "corrupt or truncated" in line), line
        assert not out.exists() and not list(root.glob(f".{out.name}.*"))  # nothing written, no temporary dir


def test_evaluations_find_the_runs_world_or_refuse_another(trained, tmp_path):
    from lfo_cli.env import generate_world, write_world
    from lfo_cli.env.world_files import world_fingerprint

    root, _, _ = trained
    recorded = json.loads((root / "moved" / "run.json").read_text())["world"]
    assert recorded == {"dir": str((root / "data").resolve()), "kind": "customer_service",
                        "fingerprint": world_fingerprint(root / "data")}
    other = tmp_path / "other_world"
    write_world(generate_world(num_companies=12, num_train_tasks=40, num_val_tasks=8, heldout_fraction=0.25, seed=6),
                other)
    for command in (["transfer-eval", str(root / "moved"), "--max-tasks", "1"],
                    ["inspect-wm", str(root / "moved"), "--episodes", "1"]):
        refused = _lfo(root, *command, "--data-dir", str(other))
        assert refused.returncode == 2 and refused.stdout == ""
        assert refused.stderr.strip().splitlines() == [
            f"error: --data-dir {other} holds world {world_fingerprint(other)}, but {root / 'moved'} was trained on "
            f"world {recorded['fingerprint']}; pass --data-dir DIR holding the run's world"]
    # the world moved away: from another directory the message names --data-dir and the world
    hidden = root / "data_hidden"
    (root / "data").rename(hidden)
    try:
        missing = _lfo(root, "transfer-eval", str(root / "moved"), "--max-tasks", "1", cwd=tmp_path)
    finally:
        hidden.rename(root / "data")
    (line,) = missing.stderr.strip().splitlines()
    assert missing.returncode == 2 and f"was trained on world {recorded['fingerprint']}" in line
    assert "pass --data-dir DIR holding that world" in line

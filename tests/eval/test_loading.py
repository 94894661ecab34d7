"""Reading run dirs: a damaged one is one `error:` line and exit 2, never a traceback; what a run records is read."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml
from typer.testing import CliRunner

from lfo_cli.report.load import read_run

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "train"))
from tiny import tiny_model, tiny_tokenizer  # noqa: E402


def _run_with_adapter(tmp_path: Path) -> Path:
    from peft import LoraConfig, get_peft_model

    from lfo_cli.env.generate import generate_world
    from lfo_cli.env.world_files import write_world

    write_world(generate_world(num_companies=10, num_train_tasks=10, num_val_tasks=10, heldout_fraction=0.3, seed=5),
                tmp_path / "data")
    tok = tiny_tokenizer()
    tiny_model(tok).save_pretrained(tmp_path / "base")
    tok.save_pretrained(tmp_path / "base")
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tmp_path / "base")  # the adapter records this path as its base
    run = tmp_path / "run"
    peft = get_peft_model(model, LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"]))
    peft.save_pretrained(run)
    (run / "recipe.yaml").write_text(yaml.safe_dump({"kind": "grpo", "data": {"dir": str(tmp_path / "data")}}))
    return run


def test_truncated_adapter_weights_are_one_error_line(tmp_path):
    from lfo_cli.cli import app
    from lfo_cli.eval.loading import load_run_model

    run = _run_with_adapter(tmp_path)
    model, _ = load_run_model(run)  # intact: loads
    assert "policy" in model.peft_config
    weights = run / "adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    result = CliRunner().invoke(app, ["transfer-eval", str(run), "--split", "val", "--max-tasks", "2"])
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and "adapter_model.safetensors" in lines[0]
    assert "Traceback" not in result.output


def test_a_wmil_run_reports_the_commit_it_trained_with(tmp_path, make_wmil):
    run = make_wmil(tmp_path, "wmil_s0", seed=0, wm_coef=1.0, rise=0.2)
    assert read_run(run).commit is None  # nothing recorded: nothing claimed
    # `lfo wmil train` records its code in run_metadata.json (training runs: run.json)
    (run / "run_metadata.json").write_text(json.dumps({"git_commit": "cf7e8594e245e3ba4fdb5594e4f8789af7dc5eb7"}))
    assert read_run(run).commit == "cf7e8594e245e3ba4fdb5594e4f8789af7dc5eb7"

"""The examples run as a new user would run them: `examples/wm_tool_env.py` trains a few GRPO steps with lfo's
`stacked` world-model loss through TRL's own tool loop, on a tiny model built here (nothing downloaded)."""

from __future__ import annotations

import copy
import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "train"))
from tiny import logged_values, tiny_model, tiny_tokenizer  # noqa: E402


def _example(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tool_calling_model(example, tokenizer, steps: int = 100):
    """The tiny random model, taught (a few seconds of SFT on the assistant's turns) to call `probe` twice and
    answer: a random model never writes a tool call, and a world model with no tool reply has nothing to learn."""
    torch.manual_seed(0)
    model, env = tiny_model(tokenizer), example.HiddenRule()
    env.reset(seed=0)
    texts, starts = [], []
    for x in range(1, 7):
        messages = [{"role": "user", "content": example.TASK}]
        for arg in (x, x + 1):
            messages += [{"role": "assistant", "content": "", "tool_calls": [
                {"type": "function", "function": {"name": "probe", "arguments": {"x": arg}}}]},
                {"role": "tool", "name": "probe", "content": env.probe(arg)}]
        messages.append({"role": "assistant", "content": f"f(10) = {10 * x + 3}"})
        texts.append(tokenizer.apply_chat_template(messages, tools=[env.probe], tokenize=False))
        prompt = tokenizer.apply_chat_template(messages[:1], tools=[env.probe], tokenize=False, add_generation_prompt=True)
        starts.append(len(tokenizer(prompt).input_ids))
    batch = tokenizer(texts, return_tensors="pt", padding=True, padding_side="right")
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    for row, start in enumerate(starts):  # the system prompt with its tool schema and the task are not learned
        labels[row, :start] = -100
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(steps):
        loss = model(**batch, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return model


@pytest.fixture(scope="module")
def taught():
    example, tokenizer = _example("wm_tool_env"), tiny_tokenizer()
    return example, tokenizer, tool_calling_model(example, tokenizer)


# A few GRPO steps of the example on the taught tiny model (its own defaults are a real run's).
TINY = {"use_cpu": True, "per_device_train_batch_size": 8, "num_generations": 4, "max_completion_length": 400,
        "max_tool_calling_iterations": 3, "warmup_steps": 0, "learning_rate": 1e-3}


def _rows(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_wm_tool_env_trains_with_a_world_model_loss_and_its_gradient_reaches_the_policy(taught, tmp_path):
    from lfo_cli.api import TrainerRun
    from lfo_cli.errors import LfoError

    example, tokenizer, model = taught
    run = tmp_path / "run"
    trainer = example.train(copy.deepcopy(model), tokenizer, steps=3, output_dir=str(run), save_strategy="no", **TINY)
    steps = {r["step"]: r for r in trainer.state.log_history if "train_runtime" not in r}
    assert sorted(steps) == [1, 2, 3]
    for step, row in steps.items():
        assert row["losses/wm"] > 0 and row["wm/target_tokens"] > 0, (step, row)
        assert row["tools/call_frequency"] > 0
        assert row["grad_norm/policy_from_wm"] > 0, (step, row)  # the world model's part of the policy gradient
    # against RL's part, on the steps where some group had reward variance (RL's part is not zero)
    ratios = [row["grad_norm/wm_over_rl"] for row in steps.values() if "grad_norm/wm_over_rl" in row]
    assert ratios and all(r > 0 for r in ratios)
    # the run dir TrainerRun made of output_dir: the config, a row per logged step, the adapters, the summary
    assert [r["step"] for r in _rows(run) if "losses/wm" in r] == [1, 2, 3]
    config = json.loads((run / "run.json").read_text())["config"]
    assert config["wm"]["coupling"] == "stacked" and config["max_steps"] == 3
    assert (run / "adapter_model.safetensors").is_file() and (run / "world_model" / "adapter_config.json").is_file()
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "complete" and summary["steps"] == 3 and summary["resumed_from"] is None
    with pytest.raises(LfoError, match="holds a complete run; a finished run is never modified"):
        TrainerRun(trainer.args)


@pytest.mark.slow
def test_the_example_run_again_after_a_kill_resumes_to_the_uninterrupted_values(taught, tmp_path):
    """A kill while checkpoint-3 was being written (no trainer_state.json, the Trainer writes it last): the same
    script run again resumes from checkpoint-2 and logs what the whole run logged; with a changed config it stops."""
    from lfo_cli.errors import LfoError

    example, tokenizer, model = taught
    whole = tmp_path / "whole"
    example.train(copy.deepcopy(model), tokenizer, steps=3, output_dir=str(whole), save_steps=1, **TINY)
    cut = tmp_path / "cut"
    shutil.copytree(whole, cut)
    for name in ("summary.json", "world_model", "adapter_model.safetensors", "adapter_config.json"):
        shutil.rmtree(cut / name) if (cut / name).is_dir() else (cut / name).unlink()
    (cut / "checkpoint-3" / "trainer_state.json").unlink()
    other = tmp_path / "other"
    shutil.copytree(cut, other)
    with pytest.raises(LfoError, match=r"holds a run with learning_rate=0.001, this config has 0.002"):
        example.train(copy.deepcopy(model), tokenizer, steps=3, output_dir=str(other), save_steps=1,
                      **{**TINY, "learning_rate": 2e-3})
    example.train(copy.deepcopy(model), tokenizer, steps=3, output_dir=str(cut), save_steps=1, **TINY)
    summary = json.loads((cut / "summary.json").read_text())
    assert summary["resumed_from"].endswith("checkpoint-2") and summary["steps"] == 3
    assert logged_values(cut) == logged_values(whole)

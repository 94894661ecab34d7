"""The examples run as a new user would run them: `examples/wm_tool_env.py` trains a few GRPO steps with lfo's
`stacked` world-model loss through TRL's own tool loop, on a tiny model built here (nothing downloaded)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "train"))
from tiny import tiny_model, tiny_tokenizer  # noqa: E402


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


@pytest.mark.slow
def test_wm_tool_env_trains_with_a_world_model_loss_and_its_gradient_reaches_the_policy(tmp_path):
    example = _example("wm_tool_env")
    tokenizer = tiny_tokenizer()
    model = tool_calling_model(example, tokenizer)
    trainer = example.train(model, tokenizer, steps=3, output_dir=str(tmp_path / "run"), use_cpu=True,
                            per_device_train_batch_size=8, num_generations=4, max_completion_length=400,
                            max_tool_calling_iterations=3, save_strategy="no", warmup_steps=0,
                            learning_rate=1e-3)
    steps = {r["step"]: r for r in trainer.state.log_history if "train_runtime" not in r}
    assert sorted(steps) == [1, 2, 3]
    for step, row in steps.items():
        assert row["losses/wm"] > 0 and row["wm/target_tokens"] > 0, (step, row)
        assert row["tools/call_frequency"] > 0
        assert row["grad_norm/policy_from_wm"] > 0, (step, row)  # the world model's part of the policy gradient
    # against RL's part, on the steps where some group had reward variance (RL's part is not zero)
    ratios = [row["grad_norm/wm_over_rl"] for row in steps.values() if "grad_norm/wm_over_rl" in row]
    assert ratios and all(r > 0 for r in ratios)

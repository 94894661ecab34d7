"""The chat template and prompts are the ones TRL's GRPO tool loop recognises and parses."""

from __future__ import annotations

import json

import pytest
from trl.chat_template_utils import (
    add_response_schema,
    get_training_chat_template,
    is_chat_template_prefix_preserving,
    parse_response,
    qwen2_5_chat_template,
    supports_tool_calling,
)

from lfo_cli.env.noise import NoiseConfig
from lfo_cli.env.plugin import CustomerServiceWorld
from lfo_cli.env.trl_env import CustomerServiceEnv, make_env_factory
from lfo_cli.env.world_files import load_world
from lfo_cli.models import prompts
from lfo_cli.models.trajectories import FINAL_REPLY, collect_trajectories
from lfo_cli.models.warmstart_config import world_sections


@pytest.fixture(scope="module")
def trajectories(small_world_dir):
    world = load_world(small_world_dir)
    noise = NoiseConfig(epsilon=0.2, field_dropout=0.2)
    return collect_trajectories(CustomerServiceWorld(world), world.tasks["train"], policy="prior", noise=noise, seed=1)


def test_template_is_trls_byte_for_byte_and_trl_accepts_it(tiny_tokenizer):
    assert tiny_tokenizer.chat_template == qwen2_5_chat_template
    assert tiny_tokenizer.padding_side == "left"
    assert supports_tool_calling(tiny_tokenizer)
    assert is_chat_template_prefix_preserving(tiny_tokenizer)
    add_response_schema(tiny_tokenizer)  # raises ValueError on an unrecognised template
    assert tiny_tokenizer.response_template is not None


def test_tools_in_trl_order_from_the_env_methods(small_world_dir):
    schemas = prompts.tool_schemas(CustomerServiceEnv)
    # an instance (TRL's bound methods) gives the same schemas as the class
    assert prompts.tool_schemas(make_env_factory(small_world_dir)()) == schemas
    names = [s["function"]["name"] for s in schemas]
    assert names == sorted(names) == ["auth_info_form", "make_phone_call", "search_company"]
    for s in schemas:
        assert "self" not in s["function"]["parameters"]["properties"]


def test_rendering_with_bound_methods_equals_rendering_with_schemas(tiny_tokenizer, small_world_dir):
    """GRPOTrainer passes the env's bound methods as tools; the warm start passes their schemas."""
    env = make_env_factory(small_world_dir)()
    task_id = load_world(small_world_dir).tasks["train"][0].task_id
    row = prompts.dataset_row(task_id)
    observation = env.reset(**row)
    trl_prompt = row["prompt"][:-1] + [{**row["prompt"][-1], "content": row["prompt"][-1]["content"] + observation}]
    assert trl_prompt == prompts.build_messages(observation)
    by_methods = prompts.render(tiny_tokenizer, trl_prompt, prompts.tool_methods(env), add_generation_prompt=True)
    by_schemas = prompts.render(tiny_tokenizer, trl_prompt, prompts.tool_schemas(CustomerServiceEnv),
                                add_generation_prompt=True)
    assert by_methods == by_schemas
    assert by_methods.startswith("<|im_start|>system\n" + prompts.SYSTEM_PROMPT)
    assert "You are Qwen" not in by_methods


def test_trl_parses_every_assistant_turn_of_sample_trajectories(tiny_tokenizer, trajectories):
    """Render each assistant turn as the model would emit it; TRL's parser recovers the exact call."""
    add_response_schema(tiny_tokenizer)
    tools = prompts.tool_schemas(CustomerServiceEnv)
    checked = 0
    for traj in trajectories[:30]:
        msgs = traj["messages"]
        for k, msg in enumerate(msgs):
            if msg["role"] != "assistant":
                continue
            prefix = tiny_tokenizer.apply_chat_template(msgs[:k], tools=tools, add_generation_prompt=True,
                                                        tokenize=True, return_dict=False)
            full = tiny_tokenizer.apply_chat_template(msgs[: k + 1], tools=tools, tokenize=True, return_dict=False)
            assert full[: len(prefix)] == prefix  # prefix-preserving on real trajectories
            completion = full[len(prefix):]
            end = completion.index(tiny_tokenizer.eos_token_id) + 1  # what generation stops on
            parsed = parse_response(tiny_tokenizer, completion[:end], prefix=prefix, tools=tools)
            if msg.get("tool_calls"):
                assert parsed["tool_calls"] == msg["tool_calls"]
                assert prompts.valid_tool_call(parsed, {t["function"]["name"] for t in tools})
            else:
                assert parsed["content"] == FINAL_REPLY and not parsed.get("tool_calls")
            checked += 1
    assert checked > 60


def test_parse_assistant_rejects_malformed_calls(tiny_tokenizer):
    good = '<tool_call>\n{"name": "search_company", "arguments": {"company_name": "Acme"}}\n</tool_call><|im_end|>'
    bad = '<tool_call>\n{"name": "search_company", "arguments": {"company_name": "Acme"\n</tool_call><|im_end|>'
    assert prompts.valid_tool_call(prompts.parse_assistant(tiny_tokenizer, good), {"search_company"})
    assert not prompts.valid_tool_call(prompts.parse_assistant(tiny_tokenizer, bad), {"search_company"})
    assert not prompts.valid_tool_call(prompts.parse_assistant(tiny_tokenizer, good), {"make_phone_call"})


def test_training_template_renders_the_same_text_and_masks_assistant_turns(tiny_tokenizer, trajectories):
    tools = prompts.tool_schemas(CustomerServiceEnv)
    training = get_training_chat_template(tiny_tokenizer)
    msgs = trajectories[0]["messages"]
    plain = tiny_tokenizer.apply_chat_template(msgs, tools=tools, tokenize=False)
    tagged = tiny_tokenizer.apply_chat_template(msgs, tools=tools, tokenize=False, chat_template=training)
    assert plain == tagged
    out = tiny_tokenizer.apply_chat_template(msgs, tools=tools, chat_template=training, tokenize=True,
                                             return_dict=True, return_assistant_tokens_mask=True)
    masked = tiny_tokenizer.decode([i for i, m in zip(out["input_ids"], out["assistant_masks"], strict=True) if m])
    assert "<tool_call>" in masked and FINAL_REPLY in masked
    assert prompts.SYSTEM_PROMPT not in masked and "<tool_response>" not in masked


def test_chat_template_is_trls_without_importing_its_module():
    import subprocess
    import sys

    code = ("import sys; from lfo_cli.models.prompts import chat_template; t = chat_template(); "
            "print('trl.chat_template_utils' in sys.modules, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]  # `lfo models list` computes this (the micro cache key) and must stay fast
    from lfo_cli.models.prompts import chat_template

    assert chat_template() == qwen2_5_chat_template


def test_tool_schemas_are_memoised_so_the_micro_cache_key_needs_no_torch(tmp_path):
    import subprocess
    import sys

    env = {**__import__("os").environ, "LFO_HOME": str(tmp_path)}
    code = ("import sys, json; from lfo_cli.models import micro; k = micro.cache_key(); "
            "print(json.dumps([k, 'torch' in sys.modules]))")
    first = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    second = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    (k1, torch_first), (k2, torch_second) = (json.loads(r.stdout.splitlines()[-1]) for r in (first, second))
    assert k1 == k2 and torch_first and not torch_second  # the memo gives the same key without importing torch
    [memo] = (tmp_path / "models").glob(".tool_schemas-*.json")
    from lfo_cli.env.trl_env import CustomerServiceEnv
    from lfo_cli.models.prompts import tool_schemas

    # equal in key order too: the rendered tool lines, and so the boilerplate tokens, follow it
    assert json.dumps(json.loads(memo.read_text())) == json.dumps(tool_schemas(CustomerServiceEnv))


def test_collecting_with_progress_plays_the_same_rollouts_in_chunks(small_world_dir, trajectories):
    """The warm start's data phase reports progress by playing the tasks in chunks; the rollouts (and so a
    warm start's bytes) are those of one call, probe mix included, and the last report is the total."""
    world = load_world(small_world_dir)
    noise = NoiseConfig(epsilon=0.2, field_dropout=0.2)
    calls: list[tuple[int, int]] = []
    chunked = collect_trajectories(CustomerServiceWorld(world), world.tasks["train"], policy="prior", noise=noise,
                                   seed=1, progress=lambda done, total: calls.append((done, total)))
    assert chunked == trajectories
    total = len(world.tasks["train"])
    assert len(calls) > 1 and calls[-1] == (total, total) and [d for d, _ in calls] == sorted({d for d, _ in calls})
    probing = world_sections("customer_service")["data"](noise=noise, probe_rate=0.4)  # a warm start's data section
    kw = dict(policy="prior", noise=noise, seed=3, rollouts_per_task=2, settings=probing)
    mixed = [r["policy"] for r in collect_trajectories(CustomerServiceWorld(world), world.tasks["train"], **kw,
                                                         progress=lambda *_: None)]
    assert mixed == [r["policy"] for r in collect_trajectories(CustomerServiceWorld(world), world.tasks["train"], **kw)]
    assert {"prior+noise", "probe+noise"} <= set(mixed)

"""The micro tokenizer: byte-level BPE trained on environment text, with the prompt boilerplate as tokens."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from lfo_cli.env.formatting import world_model_example
from lfo_cli.env.policies import NoiseConfig
from lfo_cli.env.trl_env import CustomerServiceEnv
from lfo_cli.env.world import generate_world
from lfo_cli.models import micro, prompts
from lfo_cli.models.trajectories import collect_trajectories


def _texts_of_unseen_world():
    """Every kind of environment text from a world (seed 11) the tokenizer never saw."""
    world = generate_world(num_companies=10, num_train_tasks=15, num_val_tasks=5, heldout_fraction=0.2, seed=11)
    tasks = [t for ts in world.tasks.values() for t in ts]
    out = []
    for policy, noise in (("prior", NoiseConfig(epsilon=0.3, field_dropout=0.3)), ("random", None), ("oracle", None)):
        for traj in collect_trajectories(world, tasks, policy=policy, noise=noise, seed=5):
            out.append(traj["messages"])
            for tr in traj["transitions"]:
                out.append(world_model_example(tr)[0])
    return out


def test_round_trips_all_environment_text(tiny_tokenizer):
    tools = prompts.tool_schemas(CustomerServiceEnv)
    n = 0
    for item in _texts_of_unseen_world():
        if isinstance(item, list):  # a full rollout chat, rendered as GRPO will tokenize it
            text = prompts.render(tiny_tokenizer, item, tools)
            pieces = [text] + [m["content"] for m in item if isinstance(m.get("content"), str)]
        else:
            pieces = [item]
        for text in pieces:
            ids = tiny_tokenizer(text, add_special_tokens=False)["input_ids"]
            assert tiny_tokenizer.decode(ids) == text
            n += 1
    assert n > 500


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=0, max_size=200))
def test_round_trips_arbitrary_unicode(tiny_tokenizer, text):
    ids = tiny_tokenizer(text, add_special_tokens=False)["input_ids"]
    assert tiny_tokenizer.decode(ids) == text


def test_digits_are_single_tokens(tiny_tokenizer):
    ids = tiny_tokenizer("call 844-256-6988 now", add_special_tokens=False)["input_ids"]
    pieces = [tiny_tokenizer.decode([i]) for i in ids]
    assert [p for p in pieces if any(c.isdigit() for c in p)] == list("8442566988")


def test_prompt_is_compact_and_boilerplate_is_one_token_each(tiny_tokenizer):
    tools = prompts.tool_schemas(CustomerServiceEnv)
    boiler = micro.boilerplate_tokens(tools)
    # preamble + one line per tool + postamble + two call openings per tool (name; name + first argument)
    assert len(boiler) == 2 + 3 * len(tools)
    messages = prompts.build_messages("Dispute a charge at Acme Bank. You are acting for the customer, Ann Lee.")
    ids = tiny_tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=True,
                                             return_dict=False)
    text = prompts.render(tiny_tokenizer, messages, tools, add_generation_prompt=True)
    assert tiny_tokenizer.decode(ids) == text
    decoded = [tiny_tokenizer.decode([i]) for i in ids]
    for piece in boiler[: 2 + len(tools)]:
        assert piece in decoded  # the whole tool block is a handful of tokens
    assert len(ids) < 120 < len(text) // 4
    # the schema a tool line carries is the environment's own (get_json_schema), in TRL's order
    lines = [json.loads(p) for p in boiler if p.startswith('\n{"type"')]
    assert [t["function"]["name"] for t in lines] == sorted(t["function"]["name"] for t in tools)


def test_tool_call_is_short(tiny_tokenizer):
    msg = prompts.tool_call_message("search_company", {"company_name": "Acme Bank"})
    text = prompts.render(tiny_tokenizer, [{"role": "system", "content": "s"}, msg], None)
    call = text.split("<|im_start|>assistant", 1)[1]
    # ~10 tokens with the real micro vocabulary; the 600-entry test vocabulary splits the name more
    assert len(tiny_tokenizer(call, add_special_tokens=False)["input_ids"]) <= 24

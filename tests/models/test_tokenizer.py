"""The micro tokenizer: byte-level BPE trained on environment text, with the prompt boilerplate as tokens."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from lfo_cli.env.formatting import world_model_example
from lfo_cli.env.generate import generate_world
from lfo_cli.env.noise import NoiseConfig
from lfo_cli.env.plugin import CustomerServiceWorld
from lfo_cli.env.trl_env import CustomerServiceEnv
from lfo_cli.models import micro, prompts
from lfo_cli.models.trajectories import collect_trajectories


def _texts_of_unseen_world():
    """Every kind of environment text from a world (seed 11) the tokenizer never saw."""
    world = generate_world(num_companies=10, num_train_tasks=15, num_val_tasks=5, heldout_fraction=0.2, seed=11)
    tasks = [t for ts in world.tasks.values() for t in ts]
    out = []
    for policy, noise in (("prior", NoiseConfig(epsilon=0.3, field_dropout=0.3)), ("random", None), ("oracle", None)):
        for traj in collect_trajectories(CustomerServiceWorld(world), tasks, policy=policy, noise=noise, seed=5):
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


def test_numbers_are_hyphen_led_groups_of_up_to_three_digits(tiny_tokenizer):
    ids = tiny_tokenizer("call 844-256-6988 now", add_special_tokens=False)["input_ids"]
    pieces = [tiny_tokenizer.decode([i]) for i in ids]
    assert [p for p in pieces if any(c.isdigit() for c in p)] == ["844", "-256", "-698", "8"]
    # every group the pre-tokenizer can produce has its own token, even in the small test vocabulary
    missing = [c for c in micro.number_chunks() if len(tiny_tokenizer.tokenize(c)) != 1]
    assert missing == []


def _subsequence_at(haystack: list[int], needle: list[int]) -> bool:
    n = len(needle)
    return any(haystack[i:i + n] == needle for i in range(len(haystack) - n + 1))


def test_copied_values_are_the_same_tokens_in_source_and_call(tiny_tokenizer):
    """What a call copies (company name, phone number, identity value with its key) is the same token
    sequence where the agent read it: one induction step per token, not a re-spelling."""
    world = generate_world(num_companies=10, num_train_tasks=15, num_val_tasks=5, heldout_fraction=0.2, seed=13)
    tasks = [t for ts in world.tasks.values() for t in ts]
    tools = prompts.tool_schemas(CustomerServiceEnv)
    enc = lambda s: tiny_tokenizer(s, add_special_tokens=False)["input_ids"]  # noqa: E731
    checked = {"company": 0, "phone": 0, "value": 0}
    for traj in collect_trajectories(CustomerServiceWorld(world), tasks, policy="oracle", seed=2):
        msgs = traj["messages"]
        full = enc(prompts.render(tiny_tokenizer, msgs, tools))
        for i, m in enumerate(msgs):
            for call in m.get("tool_calls") or []:
                fn, args = call["function"]["name"], call["function"]["arguments"]
                before = enc(prompts.render(tiny_tokenizer, msgs[:i], tools))
                assert full[: len(before)] == before  # the template is prefix-preserving
                if fn == "search_company":
                    name = enc(json.dumps(args["company_name"])[1:-1])
                    assert _subsequence_at(before, name), args["company_name"]
                    checked["company"] += 1
                if fn == "make_phone_call":
                    assert _subsequence_at(before, enc(args["phone_number"])), args["phone_number"]
                    checked["phone"] += 1
                    for key, value in args["auth_info"].items():
                        # the key token with its value opener, then the value (its closing quote merges
                        # with whatever follows): as in the form's reply
                        pair = enc(json.dumps({key: value})[1:-2])
                        if key == "reference_code":  # read from the rep's prose, where no JSON key precedes it
                            pair = enc(value)
                        assert _subsequence_at(before, pair), (key, value)
                        checked["value"] += 1
    assert min(checked.values()) > 10, checked


def test_prompt_is_compact_and_boilerplate_is_one_token_each(tiny_tokenizer):
    tools = prompts.tool_schemas(CustomerServiceEnv)
    boiler = micro.boilerplate_tokens(tools)
    # preamble + one line per tool + postamble + two call openings per tool (name; name + first argument)
    # + the separator into make_phone_call's auth_info + one '"field": "' key per identity field
    from lfo_cli.env import catalogue as cat

    assert len(boiler) == 2 + 3 * len(tools) + 1 + len(cat.FIELDS) + 1
    assert '", "auth_info": {' in boiler and '"zip_code": "' in boiler
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

"""benchmarks/copy_fidelity.py: token classes of a phone call, and scores that add up."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "copy_fidelity.py"
_spec = importlib.util.spec_from_file_location("copy_fidelity", _PATH)
cf = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cf)


@pytest.mark.parametrize("auth", [{"date_of_birth": "1952-02-28", "policy_number": "PN00076811"}, {"pin": "0042"}, {}])
def test_phone_call_tokens_fall_into_the_right_classes(tiny_tokenizer, auth):
    import json

    call = {"name": "make_phone_call", "arguments": {"phone_number": "844-301-9395", "auth_info": auth}}
    text = f"<tool_call>\n{json.dumps(call)}\n</tool_call><|im_end|>"
    ids = tiny_tokenizer(text, add_special_tokens=False)["input_ids"]
    pieces = [tiny_tokenizer.decode([i]) for i in ids]
    assert "".join(pieces) == text
    kind, classes = cf.token_classes(pieces)
    assert kind == "phone" and len(classes) == len(pieces)

    def joined(*names):
        return "".join(p for p, c in zip(pieces, classes, strict=True) if c in names)

    assert joined("number_first", "number_rest") == "844-301-9395"
    assert classes.count("number_first") == 1 and classes[pieces.index("844")] == "number_first"
    assert joined("auth/value_first", "auth/value_rest") == "".join(auth.values())
    assert classes.count("auth/value_first") == len(auth)
    for key in auth:  # every field name is inside a key token, and key tokens hold nothing else
        assert key in joined("auth/key")
    assert all(v not in joined("auth/key") for v in auth.values())
    assert "</tool_call>" in joined("call/structure")


def test_other_turns_are_one_class(tiny_tokenizer):
    for name, kind in (("search_company", "search"), ("auth_info_form", "form")):
        pieces = ["<tool_call>", f'\n{{"name": "{name}", "arguments": {{}}}}\n', "</tool_call>"]
        assert cf.token_classes(pieces) == (kind, [kind] * 3)
    assert cf.token_classes(["Done.", "<|im_end|>"]) == ("final", ["final", "final"])


def test_score_counts_every_assistant_token_once(tiny_model_dir, small_world_dir):
    from trl.chat_template_utils import get_training_chat_template

    from lfo_cli.env import load_world
    from lfo_cli.env.plugin import CustomerServiceWorld
    from lfo_cli.env.trl_env import CustomerServiceEnv
    from lfo_cli.models import prompts
    from lfo_cli.models.registry import load_model
    from lfo_cli.models.trajectories import collect_trajectories

    model, tokenizer = load_model(tiny_model_dir)
    world = load_world(small_world_dir)
    tools = prompts.tool_schemas(CustomerServiceEnv)
    trajs = collect_trajectories(CustomerServiceWorld(world), world.tasks["val"][:4], policy="prior", seed=0)
    row = cf.score(model, tokenizer, trajs, tools)
    template = get_training_chat_template(tokenizer)
    n_assistant = sum(
        sum(tokenizer.apply_chat_template(t["messages"], tools=tools, chat_template=template, tokenize=True,
                                          return_dict=True, return_assistant_tokens_mask=True)["assistant_masks"])
        for t in trajs
    )
    assert sum(v for k, v in row.items() if k.endswith("/tokens")) == n_assistant
    assert row["phone_turns"] == sum(m.get("tool_calls", [{}])[0].get("function", {}).get("name") == "make_phone_call"
                                     for t in trajs for m in t["messages"] if m["role"] == "assistant")
    # a random tiny model is no better than uniform over its vocabulary, give or take
    assert all(math.isfinite(v) and v > 1.0 for k, v in row.items() if k.endswith("/nll"))
    assert 0 <= row["phone_turn_exact_p"] < 1e-3

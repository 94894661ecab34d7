"""World-model targets: from an lfo World's transition log (`wm.targets: world`) or from the tool replies TRL
itself inserted into the completions (`wm.targets: tool_responses`); and no silent zero when there are none."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
import golden_runs  # noqa: E402
from test_trainer import make_inputs, make_trainer  # noqa: E402
from tiny import tiny_tokenizer  # noqa: E402

from lfo_cli.errors import LfoError  # noqa: E402
from lfo_cli.train.objectives import Separate, Shared, Stacked  # noqa: E402
from lfo_cli.train.rollout_record import EXAMPLES, REPLY_MASK  # noqa: E402
from lfo_cli.train.wm_settings import WorldModelSettings  # noqa: E402
from lfo_cli.worlds import world_class  # noqa: E402

PHONE = "make_phone_call"  # the customer-service world's wm.predict=phone


@pytest.fixture(scope="module")
def tokenizer():
    return tiny_tokenizer()


def test_no_world_and_no_target_mode_is_one_error_naming_the_setting():
    with pytest.raises(LfoError, match=r"pass world= .* or set wm.targets=tool_responses"):
        Separate(WorldModelSettings(coef=0.5), tokenizer=None, total=torch.as_tensor)
    Separate(WorldModelSettings(coef=0.0), tokenizer=None, total=torch.as_tensor)  # no term: nothing to learn from
    Stacked(WorldModelSettings(coupling="stacked", targets="tool_responses"), tokenizer=None, total=torch.as_tensor)


def test_bad_target_settings_are_one_error_naming_the_fix():
    with pytest.raises(LfoError, match="drop wm.tools, or set wm.targets=tool_responses"):
        WorldModelSettings(tools=[PHONE])
    with pytest.raises(LfoError, match="non-empty list of tool names"):
        WorldModelSettings(targets="tool_responses", tools=PHONE)
    with pytest.raises(LfoError, match="wm.targets must be one of world, tool_responses"):
        WorldModelSettings(targets="tools")
    with pytest.raises(LfoError, match="needs wm.targets=world"):
        WorldModelSettings(targets="tool_responses", intrinsic="surprise")
    objective = Stacked(WorldModelSettings(coupling="stacked", targets="tool_responses", tools=[PHONE, "dial"]),
                        tokenizer=None, total=torch.as_tensor)
    with pytest.raises(LfoError, match=r"wm.tools names dial, which this trainer has no tool of \(its tools: "
                                        r"search, make_phone_call\): .* wm.tools=null"):
        objective.check_tools(["search", PHONE])
    with pytest.raises(LfoError, match="pass environment_factory= or tools="):
        objective.check_tools([])
    objective.check_tools([PHONE, "dial"])


def test_steps_without_targets_log_zero_and_five_in_a_row_stop_the_run(tokenizer, tmp_path):
    trainer = make_trainer(tokenizer, tmp_path, wm_coupling="stacked", wm_coef=1.0, wm_grad_probe_every=0)
    trainer.model.train()

    def step(with_wm):
        trainer.compute_loss(trainer.model, make_inputs(tokenizer, with_wm=with_wm)).backward()
        trainer.on_optimizer_step()
        trainer.model.zero_grad()
        trainer.state.global_step += 1

    for _ in range(4):
        step(False)
    step(True)  # a step with targets starts the count again
    assert trainer._metrics["train"]["wm/target_tokens"][:4] == [0.0] * 4
    assert trainer._metrics["train"]["wm/target_tokens"][4] > 0
    for _ in range(4):
        step(False)
    with pytest.raises(LfoError, match=r"no world-model target token in 5 optimizer steps in a row: .*"
                                       r"Set wm.predict to tools the agent calls"):
        step(False)


@pytest.mark.slow
def test_tool_responses_give_the_world_modes_loss_and_gradients_on_customer_service_rollouts(tmp_path):
    """Golden-style: `shared` learns the reply tokens inside the completion. Its targets from the environment's
    transition log (world) and from TRL's tool messages (tool_responses, restricted to the phone tool as
    wm.predict=phone is) are the same tokens, so three steps log the same values and leave the same adapters."""
    world = golden_runs.run_case("shared", "joint", tmp_path / "world")
    tools = golden_runs.run_case("shared", "joint", tmp_path / "tools", targets="tool_responses", tools=[PHONE])
    assert world == tools
    every = golden_runs.run_case("shared", "joint", tmp_path / "every", targets="tool_responses")
    assert all(e["wm/target_tokens"] > w["wm/target_tokens"] for e, w in zip(every, world, strict=True))


def test_tool_responses_examples_target_the_replies_inside_the_completion_after_the_conversation(tokenizer):
    """`separate`/`stacked` with tool_responses: one example per phone reply that TRL kept in the completion (the
    world's examples also hold the calls of a rollout cut at max_completion_length); the target is the reply as
    TRL inserted it, the input the rollout's prompt and conversation before it (not the world's template)."""
    output, envs = golden_runs.rollouts(tokenizer)
    by_tools = Stacked(WorldModelSettings(coupling="stacked", targets="tool_responses", tools=[PHONE]), tokenizer,
                       total=torch.as_tensor)
    by_tools.conversations = [env.messages for env in envs]
    record = dict(output)
    by_tools.collect(record, [])
    kept = []
    for i, env in enumerate(envs):
        text, cursor = tokenizer.decode(output["completion_ids"][i]), 0
        for t in env.transitions:
            found = text.find(t["observation"], cursor)
            if found >= 0:
                cursor = found + len(t["observation"])
                kept += [t["observation"].strip()] if t["action"]["tool"] == PHONE else []
    targets = [text[lo:hi].strip() for row in record[EXAMPLES] for text, (lo, hi) in row]
    assert len(targets) == float(record["lfo_wm_units"]) == len(kept) > 4
    assert sorted(targets) == sorted(kept)
    world = Stacked(WorldModelSettings(coupling="stacked"), tokenizer, total=torch.as_tensor,
                    world=world_class("customer_service"))
    assert sum(len(world.examples(env)) for env in envs) > len(kept)  # the cut calls, learned from the log
    prompt = tokenizer.decode(output["prompt_ids"][0][output["prompt_mask"][0].bool()])
    first = next(row for row in record[EXAMPLES] if row)[0]
    assert first[0].startswith(prompt) and first[0][: first[1][0]].endswith("<tool_response>\n")


def test_shared_masks_match_on_textworld_shaped_rollouts(tokenizer):
    """TextWorld's one tool, `act`, and multi-line replies: the masks from the transition log and from TRL's
    messages are the same tokens."""
    from types import SimpleNamespace

    replies = ["You are in a kitchen.\nThere is a fridge here.", "You can't go that way.", "Taken: apple."]
    ids, mask, messages = [], [], []
    for i, reply in enumerate(replies):
        call = tokenizer(f'[{{"name": "act", "arguments": {{"command": "go {i}"}}}}]<|im_end|>\n',
                         add_special_tokens=False)["input_ids"]
        tool = tokenizer(f"<|im_start|>user\n<tool_response>\n{reply}\n</tool_response><|im_end|>\n",
                         add_special_tokens=False)["input_ids"]
        ids, mask = ids + call + tool, mask + [1] * len(call) + [0] * len(tool)
        messages += [{"role": "assistant", "content": ""}, {"role": "tool", "name": "act", "content": reply}]
    output = {"completion_ids": torch.tensor([ids]), "completion_mask": torch.ones(1, len(ids), dtype=torch.long),
              "tool_mask": torch.tensor([mask])}
    env = SimpleNamespace(transitions=[{"action": {"tool": "act"}, "observation": r} for r in replies])
    by_world = Shared(WorldModelSettings(coupling="shared", predict="act"), tokenizer, total=torch.as_tensor,
                      world=world_class("textworld"))
    by_tools = Shared(WorldModelSettings(coupling="shared", targets="tool_responses"), tokenizer, total=torch.as_tensor)
    by_tools.conversations = [messages]
    a, b = by_world.reply_masks(output, [env]), by_tools.reply_masks(output, [])
    assert torch.equal(a, b) and int(a.sum()) >= sum(len(tokenizer(r)["input_ids"]) for r in replies)
    record = dict(output)
    by_tools.collect(record, [])
    assert torch.equal(record[REPLY_MASK], b)

"""World-model text: exactly the design's layout; the span covers exactly the target."""

from __future__ import annotations

import json
import textwrap

from lfo_cli.env import (
    Episode,
    StateSummary,
    format_world_model_input,
    format_world_model_target,
    formatting,
    run_episode,
    world_model_example,
)
from lfo_cli.env.formatting import strip_target_markers


def _docstring_example() -> str:
    """The design's template as lfo_cli/env/formatting.py's docstring shows it (the block after "Input ...::")."""
    block = formatting.__doc__.split("::\n\n", 1)[1].split("\nTarget:", 1)[0]
    return textwrap.dedent(block).rstrip("\n") + "\n"


SEED_EXAMPLE = _docstring_example()  # the docs' example is what the formatter writes, to the character
SEED_TARGET = ("<|csr|>For security purposes, I need your account number and the last 4 digits of your Social "
               "Security Number.<|/csr|>")


def _seed_state_action():
    state = StateSummary(
        task="Check account balance at Acme Bank",
        step=3,
        previous=('search_company("Acme Bank"): Found Customer Service at 800-555-0100',
                  'auth_info_form(["account_number"]): {"account_number": "123456", "unavailable": []}'),
        collected_auth={"account_number": "123456"},
    )
    action = {"tool": "make_phone_call", "args": {"phone_number": "800-555-0100", "auth_info": {"account_number": "123456"}}}
    return state, action


def test_input_matches_the_seed_example_exactly():
    state, action = _seed_state_action()
    assert format_world_model_input(state, action) == SEED_EXAMPLE
    assert format_world_model_input(state.to_dict(), action) == SEED_EXAMPLE  # from JSONL too
    reply = SEED_TARGET[len("<|csr|>"):-len("<|/csr|>")]
    assert format_world_model_target(reply) == SEED_TARGET


def test_span_covers_exactly_the_target_on_real_transitions(world):
    ep = Episode(world)
    n = 0
    for i, task in enumerate(world.tasks["val"][:40]):
        for policy in ("probe", "random"):
            for t in run_episode(ep, policy, task, rollout_seed=i).transitions:
                text, (a, b) = world_model_example(t)
                assert b == len(text)
                assert text[a:b] == f"<|csr|>{t.observation}<|/csr|>"
                assert text[:a] == format_world_model_input(t.state, t.action)
                assert text[:a].endswith("<|predict_csr|>\n") and text[:a].startswith("<|state|>\nTask: ")
                assert strip_target_markers(text[a:b]) == t.observation.strip()
                # the same example from the JSONL form of the transition
                assert world_model_example(json.loads(json.dumps(t.to_dict()))) == (text, (a, b))
                n += 1
    assert n > 300


def test_state_tracks_previous_actions_and_collected_auth(world):
    task = next(t for t in world.tasks["val"] if t.difficulty == 3)
    traj = run_episode(Episode(world), "oracle", task)
    first, form, call1, call2 = traj.transitions
    assert first.state.previous == () and first.state.collected_auth == {}
    assert "- (none)" in format_world_model_input(first.state, first.action)
    assert call1.state.step == 3 and len(call1.state.previous) == 2
    assert call1.state.previous[0].startswith(f'search_company("{task.company_name}"): Directory for ')
    assert call1.state.previous[1].startswith("auth_info_form([")
    assert call1.state.collected_auth and set(call1.state.collected_auth) <= set(task.user_values)
    assert "REF-" in call2.state.previous[-1]  # the previous reply (with its code) is in the state
    garbage = {"tool": "make_phone_call", "args": {"phone_number": "x" * 5000, "auth_info": [1, {"a": None}]}}
    assert format_world_model_input(call2.state, garbage).endswith("<|predict_csr|>\n")

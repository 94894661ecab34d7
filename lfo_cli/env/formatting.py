"""World-model text format, exactly the design's template (markers are plain text, no new tokens).

Input (everything up to and including ``<|predict_csr|>`` and its newline)::

    <|state|>
    Task: Check account balance at Acme Bank
    Step: 3
    Previous Actions:
    - search_company("Acme Bank"): Found Customer Service at 800-555-0100
    - auth_info_form(["account_number"]): {"account_number": "123456", "unavailable": []}
    Collected Auth: {"account_number": "123456"}
    <|/state|>

    <|action|>
    <|tool|>make_phone_call<|args|>{"phone_number": "800-555-0100", "auth_info": {"account_number": "123456"}}<|/tool|>
    <|/action|>

    <|predict_csr|>

Target: ``<|csr|>{observation}<|/csr|>``. :func:`world_model_example` returns input + target and the
character span of the target **including both csr markers** (the design's loss mask is 1 on
``<|csr|>``, the reply and ``<|/csr|>``), so a trainer masks everything before ``span[0]``.
With no earlier action the list reads ``- (none)``. The same format serves every tool (the
trainer's ``wm.predict`` chooses which transitions become examples).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from lfo_cli.env.catalogue import sort_fields
from lfo_cli.env.episode import StateSummary, Transition
from lfo_cli.env.tool_calls import TOOL_PARAMS

CSR_OPEN, CSR_CLOSE = "<|csr|>", "<|/csr|>"
PREDICT_MARKER = "<|predict_csr|>"


def _state_fields(state: StateSummary | Mapping) -> tuple[str, int, list[str], dict]:
    if isinstance(state, StateSummary):
        return state.task, state.step, list(state.previous), state.collected_auth
    return state["task"], int(state["step"]), list(state["previous"]), dict(state["collected_auth"])


def _canon(obj: Any) -> Any:
    """Dicts in canonical field order (so text is identical whether a transition comes from memory or
    from sorted-key JSONL)."""
    if isinstance(obj, Mapping):
        return {k: _canon(obj[k]) for k in sort_fields(obj)}
    if isinstance(obj, list | tuple):
        return [_canon(v) for v in obj]
    return obj


def _canon_args(tool: str, args: Any) -> Any:
    params = TOOL_PARAMS.get(tool) if isinstance(tool, str) else None
    if params and isinstance(args, Mapping) and set(args) == set(params):
        return {p: _canon(args[p]) for p in params}
    return _canon(args)


def format_state(state: StateSummary | Mapping) -> str:
    task, step, previous, collected = _state_fields(state)
    collected = _canon(collected)
    prev = "\n".join(f"- {p}" for p in previous) if previous else "- (none)"
    return (
        "<|state|>\n"
        f"Task: {task}\n"
        f"Step: {step}\n"
        "Previous Actions:\n"
        f"{prev}\n"
        f"Collected Auth: {json.dumps(collected, ensure_ascii=False)}\n"
        "<|/state|>"
    )


def format_action(action: Mapping[str, Any]) -> str:
    return (
        "<|action|>\n"
        f"<|tool|>{action['tool']}<|args|>{json.dumps(_canon_args(action['tool'], action['args']), ensure_ascii=False)}<|/tool|>\n"
        "<|/action|>"
    )


def format_world_model_input(state: StateSummary | Mapping, action: Mapping[str, Any]) -> str:
    return f"{format_state(state)}\n\n{format_action(action)}\n\n{PREDICT_MARKER}\n"


def format_world_model_target(observation: str) -> str:
    return f"{CSR_OPEN}{observation}{CSR_CLOSE}"


def world_model_example(transition: Transition | Mapping) -> tuple[str, tuple[int, int]]:
    """(input + target text, (start, end) character span of the target incl. its markers)."""
    if isinstance(transition, Transition):
        state, action, obs = transition.state, transition.action, transition.observation
    else:
        state, action, obs = transition["state"], transition["action"], transition["observation"]
    prompt = format_world_model_input(state, action)
    text = prompt + format_world_model_target(obs)
    return text, (len(prompt), len(text))


def strip_target_markers(text: str) -> str:
    """The reply inside ``<|csr|>...<|/csr|>`` (tolerates a missing closing marker in generations)."""
    s = text
    i = s.find(CSR_OPEN)
    if i >= 0:
        s = s[i + len(CSR_OPEN):]
    j = s.find(CSR_CLOSE)
    if j >= 0:
        s = s[:j]
    return s.strip()

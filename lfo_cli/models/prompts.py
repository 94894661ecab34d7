"""The chat template, system prompt, tool schema and dataset rows shared by warm start and GRPO.

What TRL's multi-turn tool loop (``GRPOTrainer(environment_factory=...)``) needs from a tokenizer,
learned the hard way (issue #4):

* a chat template TRL recognises **byte for byte**, so ``add_response_schema`` can attach the
  tool-call parser. We use TRL's own copy of the Qwen2.5 template
  (``trl.chat_template_utils.qwen2_5_chat_template``): ChatML turns, ``<tool_call>{json}</tool_call>``
  calls, tool results folded into a user turn as ``<tool_response>``. It is prefix-preserving, and
  SFTTrainer swaps in TRL's generation-tagged twin (``qwen2_5_training.jinja``) for
  assistant-only loss, which renders the same text;
* **always a system message** (without one this template injects "You are Qwen, ...");
* **left padding** for batched generation;
* **tools in TRL's order**: TRL lists an environment's public methods with
  ``inspect.getmembers`` (alphabetical) and lets transformers turn each into a JSON schema with
  ``get_json_schema``. :func:`tool_schemas` does exactly that, so the warm start trains on the same
  prompt bytes that GRPO will generate from.

Prompt length is the main CPU cost, so the system prompt is one short sentence and the tool schema
is whatever the environment's docstrings say (kept terse there).
"""

from __future__ import annotations

import inspect
import json
import types
from typing import Any

# The system prompt of a world that sets none (`World.system_prompt`). One short sentence: every token here is
# paid for in every rollout and every training forward.
SYSTEM_PROMPT = "You are an agent. Use the tools to do the user's task, one call per turn; reply Done when finished."

# Tool methods are listed like TRL does; these two are the environment protocol, not tools.
_NOT_TOOLS = frozenset({"reset", "get_reward"})


def chat_template() -> str:
    """TRL's stored Qwen2.5 template, byte for byte (what ``add_response_schema`` compares against).

    Read from the file ``trl.chat_template_utils.qwen2_5_chat_template`` is read from: importing that
    module pulls in transformers, datasets and torch (~4 s), and the template is part of the micro
    model's cache key, which `lfo models list` and `--dry-run` compute.
    """
    from importlib.resources import files

    return (files("trl") / "chat_templates" / "qwen2_5.jinja").read_text(encoding="utf-8")


def configure_tokenizer(tokenizer: Any) -> Any:
    """Give a tokenizer the TRL-recognised chat template, left padding and a pad token."""
    tokenizer.chat_template = chat_template()
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def tool_methods(env: Any) -> list[Any]:
    """The environment's tools as TRL sees them: public methods except reset/get_reward, sorted by name.

    ``env`` may be an instance or the class; class functions are bound to a placeholder object so
    that, like TRL's bound methods, ``self`` does not appear in the signature.
    """
    cls = env if isinstance(env, type) else type(env)
    owner = object() if isinstance(env, type) else env
    out = []
    for name, fn in inspect.getmembers(cls, predicate=inspect.isfunction):
        if name.startswith("_") or name in _NOT_TOOLS:
            continue
        out.append(types.MethodType(fn, owner))
    return out


def tool_schemas(env: Any) -> list[dict]:
    """JSON schemas of the environment's tools, via transformers' ``get_json_schema`` (TRL's path)."""
    from transformers.utils import get_json_schema

    return [get_json_schema(m) for m in tool_methods(env)]


def build_messages(task_prompt: str, system_prompt: str = SYSTEM_PROMPT) -> list[dict[str, str]]:
    """The conversation a rollout starts from: the system prompt and the task as the user turn."""
    return [{"role": "system", "content": system_prompt}, {"role": "user", "content": task_prompt}]


def dataset_row(task_id: str, system_prompt: str = SYSTEM_PROMPT, **extra: Any) -> dict[str, Any]:
    """One GRPO training row. TRL calls ``env.reset(**row)`` and appends the returned task prompt to
    the last (user) message, whose content is therefore empty here; ``task_id`` tells the
    environment which task to load. Extra columns (difficulty, split, ...) pass through to reset.
    """
    return {"prompt": build_messages("", system_prompt), "task_id": task_id, **extra}


def render(
    tokenizer: Any,
    messages: list[dict[str, Any]],
    tools: list[Any] | None,
    *,
    add_generation_prompt: bool = False,
) -> str:
    """The exact text the template produces (what TRL tokenizes)."""
    return tokenizer.apply_chat_template(
        messages, tools=tools or None, add_generation_prompt=add_generation_prompt, tokenize=False
    )


def tool_call_message(name: str, arguments: dict[str, Any], content: str = "") -> dict[str, Any]:
    """An assistant turn calling one tool, in the transformers/TRL message format."""
    return {
        "role": "assistant",
        "content": content,
        "tool_calls": [{"type": "function", "function": {"name": name, "arguments": arguments}}],
    }


def tool_result_message(name: str, content: Any) -> dict[str, Any]:
    """A tool result as TRL appends it: ``{"role": "tool", "name": ..., "content": str(result)}``."""
    return {"role": "tool", "name": name, "content": content if isinstance(content, str) else str(content)}


def parse_assistant(tokenizer: Any, text: str, prefix: list[int] | None = None, tools: list | None = None) -> dict:
    """Parse one generated assistant turn the way GRPOTrainer does (``add_response_schema`` +
    ``parse_response``). ``prefix`` is the prompt's token ids (default: just the assistant header,
    which the response template anchors on). A malformed call comes back without ``tool_calls``."""
    from trl.chat_template_utils import add_response_schema, parse_response

    if getattr(tokenizer, "response_template", None) is None and getattr(tokenizer, "response_schema", None) is None:
        add_response_schema(tokenizer)
    if prefix is None:
        prefix = tokenizer("<|im_start|>assistant\n", add_special_tokens=False)["input_ids"]
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    return parse_response(tokenizer, ids, prefix=prefix, tools=tools)


def valid_tool_call(message: dict[str, Any], tool_names: set[str] | None = None) -> bool:
    """Exactly one call, to a known tool, with a JSON-object argument dict."""
    calls = message.get("tool_calls") or []
    if len(calls) != 1:
        return False
    fn = calls[0].get("function", {})
    if not isinstance(fn.get("arguments"), dict):
        return False
    return tool_names is None or fn.get("name") in tool_names


def dumps_tools(schemas: list[dict]) -> str:
    """Tool schemas as a JSON string (datasets columns cannot hold heterogeneous dicts)."""
    return json.dumps(schemas, ensure_ascii=False)

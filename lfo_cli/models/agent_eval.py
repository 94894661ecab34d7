"""A model plays the environment's tasks, each turn parsed exactly like GRPO's tool loop.

:func:`evaluate_agent` samples every assistant turn from the chat-templated conversation and parses it
with TRL's ``parse_response``; :func:`summarize_eval` turns its result into ``eval/...`` metrics (valid
tool-call rate, success overall and by difficulty). Used by the warm start, by validation during
training and by ``lfo transfer-eval``.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from lfo_cli import run_record as rr
from lfo_cli.models import prompts as P
from lfo_cli.models.sampler import sample_turn_cached
from lfo_cli.models.trajectories import FINAL_REPLY
from lfo_cli.worlds import World, stratified_tasks, sub_seed

__all__ = ["episode_outcomes", "evaluate_agent", "stratified_tasks", "summarize_eval"]


def evaluate_agent(
    model, tokenizer, world: World, tasks: list, *, temperature: float = 1.0, max_turns: int = 16,
    max_new_tokens: int = 128, batch_size: int = 50, seed: int = 0, progress=None, generate_fn=None,
    sampler: str = "lfo",
) -> dict[str, Any]:
    """Play ``tasks`` with the model; returns per-turn validity and per-episode outcomes.

    ``generate_fn(prompt_ids, temperature, max_new_tokens, seed) -> list[list[int]]`` replaces
    ``model.generate`` (e.g. vLLM with a ``LoRARequest``, ``lfo_cli.eval.vllm_backend``); ``model``
    may then be None. ``world`` is a :class:`lfo_cli.worlds.World`: its episodes are played, and each
    episode record carries the world's ``episode_fields``.

    Each assistant turn is sampled at ``temperature`` from the chat-templated conversation
    (:func:`~lfo_cli.models.sampler.sample_turn_cached`, which reads only what the conversation added since the
    episode's last turn; 0 is greedy; ``sampler="generate"``: ``model.generate``) and
    parsed with TRL's ``parse_response`` (the GRPO tool loop's parser). ``progress(done, total)`` is called
    after every generation round with the episodes finished so far out of all of ``tasks``. A turn is a *valid tool
    call* when it holds exactly one call to a known tool with an argument object. A turn without a
    tool call ends the episode, as in TRL.
    """
    import torch
    from trl.chat_template_utils import add_response_schema, parse_response

    tools = P.tool_schemas(world.tools)
    tool_names = {t["function"]["name"] for t in tools}
    if getattr(tokenizer, "response_template", None) is None and getattr(tokenizer, "response_schema", None) is None:
        add_response_schema(tokenizer)
    tokenizer.padding_side = "left"
    if model is not None:
        model.eval()
    generator = torch.Generator().manual_seed(seed)  # one stream for the whole call: the same draws every time
    torch.manual_seed(seed)  # generate's draws (sampler="generate") come from the global stream
    episodes, turns, samples = [], [], []
    for start in range(0, len(tasks), batch_size):
        chunk = tasks[start:start + batch_size]
        envs = [world.episode(max_turns) for _ in chunk]
        convs = []
        for env, task in zip(envs, chunk, strict=True):
            convs.append(P.build_messages(env.reset(task, sub_seed("warmstart-eval", seed, task.task_id) % 2**31),
                                          world.system_prompt or P.SYSTEM_PROMPT))
        active = list(range(len(chunk)))
        ended_by = ["max_turns"] * len(chunk)
        prompt_kv: list = [None] * len(chunk)  # each episode's last prompt with its keys and values
        while active:
            prompt_ids = [
                tokenizer.apply_chat_template(convs[i], tools=tools, add_generation_prompt=True, tokenize=True,
                                              return_dict=False)
                for i in active
            ]
            if generate_fn is not None:
                generated = generate_fn(prompt_ids, temperature, max_new_tokens, seed + start)
            elif sampler == "generate":  # transformers' generate, the reference lfo's loop is measured against
                batch = tokenizer.pad({"input_ids": prompt_ids}, return_tensors="pt", padding_side="left").to(model.device)
                with torch.no_grad():
                    out = model.generate(**batch, do_sample=True, temperature=temperature, top_k=0, top_p=1.0,
                                         max_new_tokens=max_new_tokens, pad_token_id=tokenizer.pad_token_id,
                                         eos_token_id=tokenizer.eos_token_id)
                generated = [row[batch["input_ids"].shape[1]:].tolist() for row in out]
            else:  # each turn reads only what its conversation added since the last one
                generated, kept = sample_turn_cached(
                    model, prompt_ids, [prompt_kv[i] for i in active], max_new_tokens=max_new_tokens,
                    temperature=temperature, eos_ids=[tokenizer.eos_token_id], pad_id=tokenizer.pad_token_id,
                    generator=generator)
                for i, kv in zip(active, kept, strict=True):
                    prompt_kv[i] = kv
            still = []
            for row, i in enumerate(active):
                ids = generated[row]
                if tokenizer.eos_token_id in ids:
                    ids = ids[: ids.index(tokenizer.eos_token_id) + 1]
                else:
                    ids = [t for t in ids if t != tokenizer.pad_token_id]
                msg = parse_response(tokenizer, ids, prefix=prompt_ids[row], tools=tools)
                valid = P.valid_tool_call(msg, tool_names)
                is_final = not msg.get("tool_calls") and (msg.get("content") or "").strip() == FINAL_REPLY
                turns.append({"valid_tool_call": valid, "final_reply": is_final, "task_id": chunk[i].task_id})
                # the first 40 turns, and every malformed one (up to 200 in all): what to look at first
                if len(samples) < 40 or (not valid and not is_final and len(samples) < 200):
                    samples.append({"task_id": chunk[i].task_id, "text": tokenizer.decode(ids), "valid": valid})
                calls = msg.get("tool_calls") or []
                if not calls:
                    ended_by[i] = "final_reply" if is_final else "no_tool_call"
                    continue
                convs[i].append({"role": "assistant", "content": msg.get("content") or "", "tool_calls": calls})
                for call in calls:
                    fn = call.get("function", {})
                    args = fn.get("arguments")
                    obs = envs[i].step(fn.get("name"), args if isinstance(args, dict) else {})
                    convs[i].append(P.tool_result_message(str(fn.get("name")), obs))
                if envs[i].done:
                    ended_by[i] = "success" if envs[i].success else "max_turns"
                else:
                    still.append(i)
            active = still
            if progress is not None:
                progress(start + len(chunk) - len(active), len(tasks))
        for env, task, how in zip(envs, chunk, ended_by, strict=True):
            info = env.info()
            episodes.append({"task_id": task.task_id, "difficulty": task.difficulty, "success": bool(info["success"]),
                             "turns": info["turns"], "ended_by": how,
                             **{k: info[k] for k in world.episode_fields if k in info}})
    return {"turns": turns, "episodes": episodes, "samples": samples}


def episode_outcomes(result: dict[str, Any]) -> list[list]:
    """``[[task_id, 0 | 1], ...]`` per episode of an ``evaluate_agent`` result, in evaluation order: what a
    paired comparison of two evaluations of the same episodes lines up."""
    return [[e["task_id"], int(bool(e["success"]))] for e in result["episodes"]]


def valid_call_rate(turns: list[dict[str, Any]]) -> float:
    """The share of call turns (every assistant turn but a final reply) that hold one well-formed tool call."""
    calls = [t for t in turns if not t.get("final_reply")]
    return sum(t["valid_tool_call"] for t in calls) / max(1, len(calls))


def summarize_eval(result: dict[str, Any], teacher: list[dict] | None = None,
                   categories: dict[str, tuple] | None = None) -> dict[str, Any]:
    """``eval/...`` metrics of an :func:`evaluate_agent` result: valid-call and well-formed-turn rates, success
    overall and by difficulty, the share of episodes by each value of the world's ``categories``
    (``World.episode_categories``: ``eval/FIELD/VALUE``), the teacher's success."""
    turns, eps = result["turns"], result["episodes"]
    call_turns = [t for t in turns if not t["final_reply"]]
    out: dict[str, Any] = {
        "eval/assistant_turns": len(turns),
        "eval/call_turns": len(call_turns),  # the valid-call rate's denominator (turns other than the final reply)
        rr.EVAL_VALID_TOOL_CALL_RATE: valid_call_rate(turns),
        rr.EVAL_WELLFORMED_TURN_RATE: sum(t["valid_tool_call"] or t["final_reply"] for t in turns) / max(1, len(turns)),
        rr.EVAL_SUCCESS_RATE: sum(e["success"] for e in eps) / max(1, len(eps)),
        rr.EVAL_EPISODES: len(eps),
    }
    by = defaultdict(list)
    for e in eps:
        by[e["difficulty"]].append(e["success"])
    for d, v in sorted(by.items()):
        out[f"{rr.EVAL_SUCCESS_AT}{d}"] = sum(v) / len(v)
        out[f"{rr.EVAL_EPISODES_AT}{d}"] = len(v)
    for name, values in (categories or {}).items():  # e.g. the share of episodes by where the first call went
        if eps and any(name in e for e in eps):
            for value in values:
                out[rr.eval_category(name, value)] = sum(e.get(name) == value for e in eps) / len(eps)
    lo = [e["success"] for e in eps if e["difficulty"] <= 2]
    hi = [e["success"] for e in eps if e["difficulty"] >= 3]
    out["eval/success_d1_2"] = sum(lo) / len(lo) if lo else None
    out["eval/success_d3_5"] = sum(hi) / len(hi) if hi else None
    if teacher:
        tb = defaultdict(list)
        for t in teacher:
            tb[t["difficulty"]].append(t["reward"] >= 1.0)
        for d, v in sorted(tb.items()):
            out[f"{rr.TEACHER_SUCCESS_AT}{d}"] = sum(v) / len(v)
    return out


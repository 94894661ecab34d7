"""Does the world model name the right fields? A small in-training probe of semantic accuracy.

At each validation, the world model greedily predicts the rep's reply to a fixed set of phone calls
and the prediction is parsed with the environment's own ``parse_reply``: it is right when it has the
actual reply's category and names the same fields. For the observation study the calls are the
industry prior's call to a company-exception department (difficulty 2): the rep answers with an
auth_failure naming the exception's field, which is exactly what the policy has to learn. The probe
is what the design's research question 4 (does world-model accuracy go with policy learning?) is
measured with (`val/wm_semantic_acc`).
"""

from __future__ import annotations

from lfo_cli.env import Episode, format_world_model_input, parse_reply, run_episode, strip_target_markers
from lfo_cli.env.formatting import CSR_CLOSE
from lfo_cli.train.adapters import active

PHONE = "make_phone_call"


def exception_calls(world, tasks: list, limit: int = 32, seed: int = 0) -> list:
    """The ``prior`` policy's first auth-failed phone call on each difficulty-2 task (at most ``limit``)."""
    out, episode = [], Episode(world)
    for i, task in enumerate(t for t in tasks if t.difficulty == 2):
        if len(out) >= limit:
            break
        run_episode(episode, "prior", task, rollout_seed=seed + i)
        call = next((t for t in episode.transitions if t.action.get("tool") == PHONE and t.category == "auth_failure"), None)
        if call is not None:
            out.append(call)
    return out


def generate_replies(model, tokenizer, prompts: list[str], max_length: int = 512, max_new_tokens: int = 96,
                     batch_size: int = 16) -> list[str]:
    """Greedy continuation of each world-model input (left-padded batches), cut after ``<|/csr|>``."""
    import torch

    texts: list[str] = []
    side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    try:
        for start in range(0, len(prompts), batch_size):
            enc = tokenizer(prompts[start:start + batch_size], return_tensors="pt", padding=True, truncation=True,
                            max_length=max_length, add_special_tokens=False).to(model.device)
            with torch.no_grad():
                out = model.generate(**enc, do_sample=False, max_new_tokens=max_new_tokens,
                                     pad_token_id=tokenizer.pad_token_id)
            texts += tokenizer.batch_decode(out[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
    finally:
        tokenizer.padding_side = side
    return [t.split(CSR_CLOSE)[0] + (CSR_CLOSE if CSR_CLOSE in t else "") for t in texts]


def semantic_accuracy(model, tokenizer, transitions: list, adapters: list[str], max_length: int = 512) -> float | None:
    """Share of ``transitions`` whose predicted reply has the actual category and fields (None: no transitions)."""
    if not transitions:
        return None
    was_training = model.training
    model.eval()
    with active(model, adapters):
        predicted = generate_replies(model, tokenizer, [format_world_model_input(t.state, t.action) for t in transitions],
                                     max_length)
    if was_training:
        model.train()
    ok = 0
    for t, text in zip(transitions, predicted, strict=True):
        actual, guess = parse_reply(t.observation), parse_reply(strip_target_markers(text))
        ok += guess.category == actual.category and guess.fields == actual.fields
    return ok / len(transitions)

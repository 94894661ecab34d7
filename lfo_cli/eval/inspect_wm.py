"""What the world-model adapter learned: predicted vs actual rep replies on recorded phone calls.

Metrics (overall and per reply category):

* token accuracy — teacher-forced argmax equals the target token, over the ``<|csr|>…<|/csr|>`` tokens;
* perplexity — exp of the mean target-token cross-entropy;
* BLEU — sacrebleu corpus BLEU of the greedy-generated reply against the actual reply;
* semantic accuracy — the generated reply, parsed with the environment's own ``parse_reply``, has the
  same category and the same requested-field set as the actual reply.

``probe`` builds the design's synthetic probes from the environment itself: a call without any
identity data (the rep must ask for authentication) and a call with exactly the required data (the
rep must serve), over many companies of the training and held-out splits.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from lfo_cli.env import (
    Episode,
    format_world_model_input,
    parse_reply,
    run_episode,
    strip_target_markers,
)
from lfo_cli.env.formatting import CSR_CLOSE
from lfo_cli.env.plugin import CustomerServiceWorld
from lfo_cli.train.wm_batches import build_batch
from lfo_cli.train.wm_loss import masked_lm_loss
from lfo_cli.train.wm_probe import generate_replies
from lfo_cli.worlds import World

PHONE = "make_phone_call"


def recorded_phone_calls(world, split: str, episodes: int, seed: int = 0, policy: str = "probe") -> list:
    """Phone-call transitions from reference-policy episodes (noisy, so replies cover every category)."""
    return CustomerServiceWorld(world).inspection_calls(split, episodes, seed, policy=policy)


def probe_transitions(world, splits: Sequence[str] = ("val", "transfer"), companies: int = 50, seed: int = 0):
    """(transition, expected category, split) for no-auth and full-auth calls on the first department."""
    out = []
    for split in splits:
        seen = set()
        for i, task in enumerate(world.tasks[split]):
            if task.difficulty != 1 or task.company_id in seen or len(seen) >= companies:
                continue
            seen.add(task.company_id)
            episode = Episode(world)
            # no auth: search, then call the right department with nothing
            episode.reset(task, rollout_seed=seed + i)
            company = world.companies[task.company_id]
            episode.step("search_company", {"company_name": company.name})
            phone = next(d.phone for d in company.departments if d.name == task.steps[0].department)
            episode.step(PHONE, {"phone_number": phone, "auth_info": {}})
            out.append((episode.transitions[-1], "auth_failure", split))
            # full auth: the oracle's successful call
            run_episode(episode, "oracle", task, rollout_seed=seed + i)
            calls = [t for t in episode.transitions if t.action.get("tool") == PHONE and t.category == "success"]
            if calls:
                out.append((calls[-1], "success", split))
    return out


def evaluate_world_model(model, tokenizer, transitions: list, world: type[World] = CustomerServiceWorld, *,
                         max_length: int = 512, max_new_tokens: int = 96, batch_size: int = 16,
                         generate: bool = True) -> dict[str, Any]:
    """Per-example rows and aggregate metrics for a world-model adapter on logged calls of ``world`` (its
    example format, reply categories and judge of a predicted reply: :class:`lfo_cli.worlds.World`)."""
    import sacrebleu
    import torch

    model.eval()
    rows = []
    for start in range(0, len(transitions), batch_size):
        chunk = transitions[start : start + batch_size]
        examples = [world.world_model_example(t) for t in chunk]
        batch = build_batch(tokenizer, examples, max_length).to(model.device)
        with torch.no_grad():
            logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
            loss, correct, count = masked_lm_loss(logits, batch.labels)
        predictions = generate_replies(model, tokenizer, [text[:a] for text, (a, _) in examples], max_length,
                                       max_new_tokens, batch_size=len(chunk), stop=world.reply_stop) \
            if generate else [""] * len(chunk)
        for t, l_, c, n, pred_text in zip(chunk, loss.tolist(), correct.tolist(), count.tolist(), predictions,
                                          strict=True):
            observation = t["observation"] if isinstance(t, Mapping) else t.observation
            pred_reply = world.reply_text(pred_text)
            rows.append({
                "category": world.transition_category(t), "actual": observation, "predicted": pred_reply,
                "loss": l_, "correct": c, "count": n,
                "semantic_ok": world.same_reply(pred_text, observation),
                "predicted_category": world.reply_category(pred_reply),
            })
    def summarise(sub: list[dict]) -> dict[str, Any]:
        tokens = sum(r["count"] for r in sub)
        nll = sum(r["loss"] * r["count"] for r in sub) / max(tokens, 1)
        out = {
            "n": len(sub),
            "token_accuracy": sum(r["correct"] for r in sub) / max(tokens, 1),
            "perplexity": math.exp(min(nll, 50.0)),
            "semantic_accuracy": sum(r["semantic_ok"] for r in sub) / max(len(sub), 1),
        }
        if generate:
            out["bleu"] = sacrebleu.corpus_bleu([r["predicted"] for r in sub], [[r["actual"] for r in sub]]).score
        return out

    by_category = defaultdict(list)
    for r in rows:
        by_category[r["category"]].append(r)
    return {
        "overall": summarise(rows) if rows else {"n": 0},
        "by_category": {k: summarise(v) for k, v in sorted(by_category.items())},
        "examples": rows,
    }


def _generate(model, tokenizer, prompts: list[str], max_length: int, max_new_tokens: int) -> list[str]:
    """Greedy continuation of each world-model input, cut at ``<|/csr|>`` (the trainer's probe does the same)."""
    return generate_replies(model, tokenizer, prompts, max_length, max_new_tokens, batch_size=max(1, len(prompts)),
                            stop=CSR_CLOSE)


def probe_scores(model, tokenizer, world, companies: int = 50, seed: int = 0, max_length: int = 512,
                 max_new_tokens: int = 96) -> dict[str, Any]:
    """Share of probes whose generated reply has the expected category, per split and probe kind."""
    probes = probe_transitions(world, companies=companies, seed=seed)
    prompts = [format_world_model_input(t.state, t.action) for t, _, _ in probes]
    preds = []
    for start in range(0, len(prompts), 16):
        preds += _generate(model, tokenizer, prompts[start : start + 16], max_length, max_new_tokens)
    table: dict[str, dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
    for (_t, expected, split), pred in zip(probes, preds, strict=True):
        ok = parse_reply(strip_target_markers(pred)).category == expected
        table[split][expected].append(ok)
    return {split: {kind: {"n": len(v), "correct": sum(v) / len(v)} for kind, v in kinds.items()}
            for split, kinds in sorted(table.items())}

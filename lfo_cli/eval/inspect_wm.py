"""What the world-model adapter learned: predicted vs actual replies on a world's logged calls.

Metrics (overall and per reply category):

* token accuracy — teacher-forced argmax equals the target token, over the target's tokens;
* perplexity — exp of the mean target-token cross-entropy;
* BLEU — sacrebleu corpus BLEU of the greedy-generated reply against the actual reply;
* semantic accuracy — the world's judge (:meth:`lfo_cli.worlds.World.same_reply`) says the generated reply
  means the actual one.

``probe_scores`` runs the world's synthetic probes (:meth:`lfo_cli.worlds.World.inspection_probes`: calls whose
right reply is of a known category) and scores the share whose generated reply has the expected category. Everything here reaches the world through :class:`lfo_cli.worlds.World`.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from lfo_cli.train.wm_batches import build_batch
from lfo_cli.train.wm_loss import masked_lm_loss
from lfo_cli.train.wm_probe import generate_replies
from lfo_cli.worlds import World


def evaluate_world_model(model, tokenizer, transitions: list, world: type[World], *,
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


def probe_scores(model, tokenizer, world: type[World], probes: list[tuple[Any, str, str]], max_length: int = 512,
                 max_new_tokens: int = 96) -> dict[str, Any]:
    """Share of ``probes`` (a world's :meth:`~lfo_cli.worlds.World.inspection_probes`) whose generated reply has
    the expected category, per split and probe kind."""
    prompts = []
    for t, _, _ in probes:
        text, (start, _) = world.world_model_example(t)
        prompts.append(text[:start])
    preds = []
    for start in range(0, len(prompts), 16):  # greedy, cut after the target's closing marker (as the trainer's probe)
        chunk = prompts[start : start + 16]
        preds += generate_replies(model, tokenizer, chunk, max_length, max_new_tokens, batch_size=len(chunk),
                                  stop=world.reply_stop)
    table: dict[str, dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
    for (_t, expected, split), pred in zip(probes, preds, strict=True):
        table[split][expected].append(world.reply_category(world.reply_text(pred)) == expected)
    return {split: {kind: {"n": len(v), "correct": sum(v) / len(v)} for kind, v in kinds.items()}
            for split, kinds in sorted(table.items())}

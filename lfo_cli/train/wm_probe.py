"""Does the world model mean what the world said? A small in-training probe of semantic accuracy.

At each validation, the world model greedily predicts the replies to a fixed set of calls (the world's
:class:`~lfo_cli.worlds.SemanticProbe`) and the world judges each prediction against the actual reply.
Each world chooses its calls (:meth:`lfo_cli.worlds.World.semantic_probe`): replies that carry what the
policy has to learn, judged by meaning rather than by token (docs/environment.md names each world's).
The probe is what the design's research question 4 (does world-model accuracy go with policy learning?)
is measured with (`val/wm_semantic_acc`).
"""

from __future__ import annotations

from lfo_cli.train.adapters import active
from lfo_cli.worlds import SemanticProbe


def generate_replies(model, tokenizer, prompts: list[str], max_length: int = 512, max_new_tokens: int = 96,
                     batch_size: int = 16, *, stop: str) -> list[str]:
    """Greedy continuation of each world-model input (left-padded batches), cut after ``stop``."""
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
    return [t.split(stop)[0] + (stop if stop in t else "") for t in texts]


def semantic_accuracy(model, tokenizer, probe: SemanticProbe | None, adapters: list[str],
                      max_length: int = 512) -> float | None:
    """Share of the probe's calls whose predicted reply the world judges the same as the actual one
    (None: no probe, or an empty one)."""
    if not probe:
        return None
    was_training = model.training
    model.eval()
    with active(model, adapters):
        predicted = generate_replies(model, tokenizer, probe.inputs, max_length, stop=probe.stop)
    if was_training:
        model.train()
    return sum(probe.judge(guess, actual) for guess, actual in zip(predicted, probe.replies, strict=True)) / len(probe)

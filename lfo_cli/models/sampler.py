"""Batched sampling of one assistant turn on CPU: a KV-cache loop that drops finished rows.

`model.generate` runs every row of a batch until the longest is done and pays its general machinery
(logits processors, stopping criteria, `torch.multinomial`) on every token; for a 3M-parameter model on
one thread that bookkeeping costs as much as the forward. This loop does only what a plain sampling turn
needs: one prefill that keeps the last position's logits, then one forward per new token over the rows
still running (a row leaves the batch, and the KV cache, at its end-of-sequence token), and a draw from
softmax(logits / temperature) by the exponential race, argmax(p / E) with E ~ Exp(1), which is an exact
draw from p. Temperature 0 is greedy decoding. Attention masks and position ids are the ones `generate`
builds for left-padded prompts, so greedy decoding gives `generate`'s tokens (tested).

Only plain sampling: no top-k/top-p/min-p, repetition penalty or other processors (callers fall back to
`generate` for those).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

# torch is imported inside the functions: `lfo transfer-eval --help` reaches this module and imports no torch.


def left_pad(prompts: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids and attention mask of ``prompts``, padded on the left."""
    import torch

    width = max(map(len, prompts))
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, p in enumerate(prompts):
        if p:
            ids[row, width - len(p):] = torch.as_tensor(list(p), dtype=torch.long)
            mask[row, width - len(p):] = 1
    return ids, mask


def draw(logits: torch.Tensor, temperature: float, generator: torch.Generator | None = None) -> torch.Tensor:
    """One token per row: greedy at temperature 0, else an exact draw from softmax(logits / temperature)."""
    import torch

    if temperature == 0:
        return logits.argmax(-1)
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    race = torch.empty_like(probs).exponential_(1.0, generator=generator)
    return (probs / race).argmax(-1)


def sample_turn(
    model, prompts: Sequence[Sequence[int]], *, max_new_tokens: int, eos_ids: Sequence[int], pad_id: int,
    temperature: float = 1.0, generator: torch.Generator | None = None,
) -> list[list[int]]:
    """Sample up to ``max_new_tokens`` after each prompt; each row's tokens end with its first EOS id
    (kept) or at the budget. The model runs in whatever mode it is in (TRL samples rollouts in train mode)."""
    import torch

    if not prompts:
        return []
    with torch.no_grad():
        return _sample(model, prompts, max_new_tokens, list(eos_ids), pad_id, temperature, generator)


def _sample(model, prompts, max_new_tokens, eos_ids, pad_id, temperature, generator) -> list[list[int]]:
    import torch

    device = next(model.parameters()).device
    ids, mask = (t.to(device) for t in left_pad(prompts, pad_id))
    position = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 1)  # as `generate` builds them
    out = model(input_ids=ids, attention_mask=mask, position_ids=position, use_cache=True, logits_to_keep=1)
    cache, logits = out.past_key_values, out.logits[:, -1]
    eos = torch.as_tensor(eos_ids, device=device)
    rows = torch.arange(len(prompts), device=device)  # the original row of each running row
    last = position[:, -1]
    new: list[list[int]] = [[] for _ in prompts]
    for step in range(max_new_tokens):
        token = draw(logits, temperature, generator)
        for row, t in zip(rows.tolist(), token.tolist(), strict=True):
            new[row].append(t)
        running = ~torch.isin(token, eos)
        if step == max_new_tokens - 1 or not bool(running.any()):
            break
        if not bool(running.all()):  # finished rows leave the batch and the cache
            keep = running.nonzero().squeeze(-1)
            cache.batch_select_indices(keep)
            rows, mask, token, last = rows[keep], mask[keep], token[keep], last[keep]
        mask = torch.cat([mask, mask.new_ones((mask.shape[0], 1))], dim=1)
        last = last + 1
        out = model(input_ids=token[:, None], attention_mask=mask, position_ids=last[:, None], past_key_values=cache,
                    use_cache=True)
        cache, logits = out.past_key_values, out.logits[:, -1]
    return new

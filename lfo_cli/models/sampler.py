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
`generate` for those). A multi-turn episode can keep each row's keys and values (`sample_turn_cached`,
`PromptKV`): the next turn reads only what the conversation added. That is exact only in eval mode
(dropout would have drawn other masks for the kept part), so the trainer reuses them only when rollouts
are sampled without dropout (`trainer.rollout_dropout: false`).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

# torch is imported inside the functions: `lfo transfer-eval --help` reaches this module and imports no torch.


@contextmanager
def eval_mode(model):
    """``model`` in eval mode (no dropout) inside the block; every module that was training is again after."""
    training = [m for m in model.modules() if m.training]
    model.eval()
    try:
        yield model
    finally:
        for m in training:
            m.train()


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
    # The race is drawn where the generator lives (a CPU generator keeps a GPU run's draws reproducible).
    where = probs.device if generator is None else generator.device
    race = torch.empty(probs.shape, dtype=probs.dtype, device=where).exponential_(1.0, generator=generator)
    return (probs / race.to(probs.device)).argmax(-1)


@dataclass
class PromptKV:
    """A row's prompt and its keys and values in every layer (``[heads, len(ids), head_dim]`` each): the next
    turn's prompt starts with it, so only the new part has to be read."""

    ids: tuple[int, ...]
    kv: list[tuple[torch.Tensor, torch.Tensor]]

    def prefix_of(self, prompt: Sequence[int]) -> bool:
        return len(self.ids) < len(prompt) and tuple(prompt[: len(self.ids)]) == self.ids


def sample_turn(
    model, prompts: Sequence[Sequence[int]], *, max_new_tokens: int, eos_ids: Sequence[int], pad_id: int,
    temperature: float = 1.0, generator: torch.Generator | None = None,
) -> list[list[int]]:
    """Sample up to ``max_new_tokens`` after each prompt; each row's tokens end with its first EOS id
    (kept) or at the budget. The model runs in whatever mode it is in (TRL samples rollouts in train mode)."""
    import torch

    if not prompts:
        return []
    with torch.no_grad():  # nothing to keep for a next turn: no per-row copies of the keys and values
        return _sample(model, prompts, [None] * len(prompts), max_new_tokens, list(eos_ids), pad_id, temperature,
                       generator, keep=False)[0]


def sample_turn_cached(
    model, prompts: Sequence[Sequence[int]], prior: Sequence[PromptKV | None], *, max_new_tokens: int,
    eos_ids: Sequence[int], pad_id: int, temperature: float = 1.0, generator: torch.Generator | None = None,
) -> tuple[list[list[int]], list[PromptKV]]:
    """:func:`sample_turn` that reads only what each prompt adds to its row's ``prior`` (the last turn's
    :class:`PromptKV`, used when it is a prefix of the new prompt) and returns every row's new one."""
    import torch

    if not prompts:
        return [], []
    with torch.no_grad():
        return _sample(model, prompts, list(prior), max_new_tokens, list(eos_ids), pad_id, temperature, generator,
                       keep=True)


def _prefill(model, prompts, prior, pad_id, device, keep: bool):
    """One forward over each row's new tokens on top of its reused keys and values. The cached part is
    left-padded to the longest and the new part too, so a row may have masked holes between them; position
    ids count the real tokens only, as the previous turn did."""
    import torch
    from transformers import DynamicCache

    reused = [p if p is not None and p.prefix_of(x) else None for p, x in zip(prior, prompts, strict=True)]
    cached = [len(p.ids) if p is not None else 0 for p in reused]
    width = max(cached)
    suffix_ids, suffix_mask = left_pad([x[c:] for x, c in zip(prompts, cached, strict=True)], pad_id)
    cache_mask = torch.zeros((len(prompts), width), dtype=torch.long)
    cache = None
    if width:
        ref = next(p for p in reused if p is not None)
        layers = []
        for layer, (k0, _) in enumerate(ref.kv):
            heads, dim = k0.shape[0], k0.shape[-1]
            stacked = []
            for which in (0, 1):  # keys, values
                stacked.append(torch.stack([
                    torch.cat([k0.new_zeros((heads, width - c, dim)), p.kv[layer][which]], 1) if p is not None
                    else k0.new_zeros((heads, width, dim)) for p, c in zip(reused, cached, strict=True)]).to(device))
            layers.append(tuple(stacked))
        cache = DynamicCache(ddp_cache_data=layers)
        for row, c in enumerate(cached):
            cache_mask[row, width - c:] = 1
    mask = torch.cat([cache_mask, suffix_mask], dim=1).to(device)
    position = ((mask.cumsum(-1) - 1).masked_fill(mask == 0, 1))[:, width:]  # as `generate` builds them
    out = model(input_ids=suffix_ids.to(device), attention_mask=mask, position_ids=position, past_key_values=cache,
                use_cache=True, logits_to_keep=1)
    cache = out.past_key_values
    kept = []
    for row, prompt in enumerate(prompts if keep else ()):  # each row's real positions: its prompt, for the next turn
        real = mask[row].nonzero().squeeze(-1)
        kept.append(PromptKV(tuple(prompt), [(layer.keys[row][:, real].clone(), layer.values[row][:, real].clone())
                                             for layer in cache.layers]))
    return out, mask, position, kept


def _sample(model, prompts, prior, max_new_tokens, eos_ids, pad_id, temperature, generator, keep: bool):
    import torch

    device = next(model.parameters()).device
    out, mask, position, kept = _prefill(model, prompts, prior, pad_id, device, keep)
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
    return new, kept

"""World-model examples -> one padded batch -> masked cross-entropy on the reply tokens only.

An example is ``(text, (start, end))``: the seed's template (state, action, ``<|predict_csr|>``) followed
by the target ``<|csr|>…<|/csr|>``, and the character span of the target. The prefix and the target are
tokenised separately and concatenated, so the loss mask covers exactly the target's tokens (no token
straddles the boundary). Over budget, the prefix keeps at least a quarter of it and is truncated from the
left (the oldest history goes first); the reply keeps the rest.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

IGNORE_INDEX = -100


@dataclass
class WMBatch:
    input_ids: torch.Tensor  # (N, L), right-padded
    attention_mask: torch.Tensor  # (N, L)
    labels: torch.Tensor  # (N, L): target token ids on reply tokens, IGNORE_INDEX elsewhere

    @property
    def num_target_tokens(self) -> int:
        return int((self.labels != IGNORE_INDEX).sum())

    def to(self, device) -> WMBatch:
        return WMBatch(self.input_ids.to(device), self.attention_mask.to(device), self.labels.to(device))


def tokenize_example(tokenizer, text: str, span: tuple[int, int], max_length: int) -> tuple[list[int], list[int]]:
    start, end = span
    if not (0 <= start <= end <= len(text)):
        raise ValueError(f"target span {span} outside text of length {len(text)}")
    prefix = tokenizer(text[:start], add_special_tokens=False)["input_ids"]
    target = tokenizer(text[start:end], add_special_tokens=False)["input_ids"]
    if len(prefix) + len(target) > max_length:
        # The prefix keeps at least a quarter of the budget (context to predict from); the reply gets the
        # rest; the prefix loses its oldest tokens first.
        target = target[: max_length - min(len(prefix), max_length // 4)]
        keep = max_length - len(target)
        prefix = prefix[len(prefix) - keep :] if keep else []
    ids = prefix + target
    labels = [IGNORE_INDEX] * len(prefix) + list(target)
    return ids, labels


def build_batch(tokenizer, examples: Sequence[tuple[str, tuple[int, int]]], max_length: int) -> WMBatch:
    return _pad([tokenize_example(tokenizer, text, span, max_length) for text, span in examples], tokenizer)


def build_length_batches(tokenizer, examples: Sequence[tuple[str, tuple[int, int]]], max_length: int,
                         batch_tokens: int) -> tuple[list[WMBatch], list[int]]:
    """The examples as padded batches of similar length, each of at most ``batch_tokens`` padded tokens.

    One padded batch pads every example to the longest; world-model examples vary from a first call's
    short state to a long history (on the default world ~37% of such a batch was padding). Sorted by
    length, consecutive examples are grouped while ``rows x longest <= batch_tokens`` (a longer example
    still gets a batch of its own). ``batch_tokens <= 0`` gives one batch. Returns the batches and
    ``order``: the example index of each row, batch after batch.
    """
    rows = [tokenize_example(tokenizer, text, span, max_length) for text, span in examples]
    if batch_tokens <= 0:
        return [_pad(rows, tokenizer)], list(range(len(rows)))
    order = sorted(range(len(rows)), key=lambda i: len(rows[i][0]))
    groups: list[list[int]] = [[]]
    for i in order:  # ascending: the newest row is the group's longest
        if groups[-1] and (len(groups[-1]) + 1) * len(rows[i][0]) > batch_tokens:
            groups.append([])
        groups[-1].append(i)
    return [_pad([rows[i] for i in g], tokenizer) for g in groups], order


def _pad(rows: list[tuple[list[int], list[int]]], tokenizer) -> WMBatch:
    width = max(len(ids) for ids, _ in rows)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(rows), width), dtype=torch.long)
    labels = torch.full((len(rows), width), IGNORE_INDEX, dtype=torch.long)
    for i, (ids, lab) in enumerate(rows):
        input_ids[i, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        attention[i, : len(ids)] = 1
        labels[i, : len(lab)] = torch.tensor(lab, dtype=torch.long)
    return WMBatch(input_ids, attention, labels)


def masked_lm_loss(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-example mean cross-entropy over target tokens, plus per-example (correct, count) for token accuracy.

    Returns ``(loss_per_example (N,), correct (N,), count (N,))``; logits at position t predict token t+1.
    """
    mask = labels[:, 1:] != IGNORE_INDEX
    return _target_loss(logits[:, :-1][mask], labels[:, 1:], mask)


def _target_loss(target_logits: torch.Tensor, shift_labels: torch.Tensor, mask: torch.Tensor):
    """``(loss_per_example, correct, count)`` from the logits of the target positions only.

    ``target_logits`` (T, V) are the logits at the ``mask``-ed positions of ``shift_labels`` (N, L),
    in row-major order; each example's loss is the mean over its targets (0 when it has none).
    """
    target_logits = target_logits.float()
    targets = shift_labels[mask]
    ce = F.cross_entropy(target_logits, targets, reduction="none")
    rows = mask.nonzero()[:, 0]
    count = mask.sum(-1)
    per_example = torch.zeros(mask.size(0), dtype=ce.dtype, device=ce.device).index_add(0, rows, ce)
    with torch.no_grad():
        correct = torch.zeros_like(count).index_add(0, rows, (target_logits.argmax(-1) == targets).long())
    return per_example / count.clamp(min=1), correct, count


def world_model_forward(model, batch: WMBatch | Sequence[WMBatch]) -> tuple[torch.Tensor, torch.Tensor, dict[str, float]]:
    """Mean loss over examples (each example's loss is its token-mean), per-example losses, and metrics.

    ``batch`` may be a list of batches (:func:`build_length_batches`): one forward each, per-example
    results concatenated in batch order; the mean is over all examples, as for one batch.
    """
    parts = [_forward(model, b) for b in ([batch] if isinstance(batch, WMBatch) else batch)]
    per_example, correct, count = (torch.cat(xs) for xs in zip(*parts, strict=True))
    loss = per_example.mean()
    metrics = {
        "wm/token_acc": float(correct.sum()) / max(int(count.sum()), 1),
        "wm/examples": float(len(per_example)),
        "wm/target_tokens": float(count.sum()),
    }
    return loss, per_example.detach(), metrics


def _forward(model, batch: WMBatch):
    """One forward; the LM head runs on the target tokens only.

    A reply is ~1/6 of its example's tokens (state and action are the rest), and on `micro` the
    ~6k-word head plus its cross-entropy cost about as much as the 4 transformer layers, so projecting
    every position was most of the waste. The decoder runs as usual (the active LoRA adapters live
    inside its layers), then ``get_output_embeddings()`` is applied to the gathered positions that
    predict a target token. Same loss, same gradients as the full logits (tested); a model whose
    forward post-processes logits (soft-capping, scaling), or one wrapped for distributed training,
    takes its own forward with transformers' ``logits_to_keep`` from the earliest target on.
    """
    inner = getattr(model, "module", model)  # DistributedDataParallel / DeepSpeed wrap the PeftModel
    base = inner.get_base_model() if hasattr(inner, "get_base_model") else inner
    # Calling the decoder directly would bypass a wrapper's forward (DDP's gradient bookkeeping), so a
    # wrapped model goes through its own forward with `logits_to_keep`.
    if model is inner and _plain_head(base):
        hidden = base.get_decoder()(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                                    use_cache=False).last_hidden_state
        mask = batch.labels[:, 1:] != IGNORE_INDEX
        return _target_loss(base.get_output_embeddings()(hidden[:, :-1][mask]), batch.labels[:, 1:], mask)
    keep = _logits_to_keep(batch.labels)
    kwargs = {"logits_to_keep": keep} if keep and _accepts_logits_to_keep(type(base)) else {}
    out = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, use_cache=False, **kwargs)
    return masked_lm_loss(out.logits, batch.labels[:, batch.labels.size(1) - out.logits.size(1) :])


def _plain_head(base) -> bool:
    """True when logits are exactly ``lm_head(decoder(...).last_hidden_state)`` (Llama, Qwen, Mistral ...)."""
    cfg = getattr(base, "config", None)
    if cfg is None or getattr(cfg, "final_logit_softcapping", None) or getattr(cfg, "logit_scale", None):
        return False
    try:
        decoder, head = base.get_decoder(), base.get_output_embeddings()
    except (AttributeError, NotImplementedError):
        return False
    return decoder is not None and decoder is not base and isinstance(head, torch.nn.Linear)


def _logits_to_keep(labels: torch.Tensor) -> int:
    """Positions from the one before the earliest target token to the end (0 when there is no target)."""
    targets = (labels != IGNORE_INDEX).any(0).nonzero()
    if targets.numel() == 0:
        return 0
    return labels.size(1) - max(int(targets[0]) - 1, 0)


@functools.cache
def _accepts_logits_to_keep(model_cls: type) -> bool:
    """Whether a model class's forward takes ``logits_to_keep`` (inspected once per class, not per loss call)."""
    return "logits_to_keep" in inspect.signature(model_cls.forward).parameters


def reply_token_mask(tokenizer, completion_ids: Sequence[int], tool_mask: Sequence[int],
                     replies: Sequence[tuple[str, bool]]) -> list[int]:
    """Mark the tokens of tool replies inside a TRL multi-turn completion (for the `shared` coupling).

    TRL's ``tool_mask`` is 0 on every token the environment (not the model) produced: the tool
    messages plus the chat-template tokens around them. ``replies`` lists every tool reply of the
    rollout in order as ``(text, keep)``; each is searched for, in order, inside the decoded
    tool-message runs, and the tokens overlapping a kept reply are marked 1. A reply that cannot be
    found (e.g. TRL dropped an over-long tool result) is skipped, never guessed.
    """
    mask = [0] * len(completion_ids)
    runs, start = [], None
    for i, m in enumerate(list(tool_mask) + [1]):
        if m == 0 and start is None:
            start = i
        elif m != 0 and start is not None:
            runs.append((start, i))
            start = None
    r = 0
    for a, b in runs:
        ids = list(completion_ids[a:b])
        pieces = [tokenizer.decode([t]) for t in ids]
        text = "".join(pieces)
        if text != tokenizer.decode(ids):  # token pieces don't concatenate (multi-byte chars): skip run
            continue
        ends, pos = [], 0
        for p in pieces:
            pos += len(p)
            ends.append(pos)
        cursor = 0
        while r < len(replies):
            reply, keep = replies[r]
            found = text.find(reply, cursor) if reply else -1
            if found < 0:
                break
            lo, hi = found, found + len(reply)
            if keep:
                for k, end in enumerate(ends):
                    begin = end - len(pieces[k])
                    if begin < hi and end > lo:  # any overlap with the reply's characters
                        mask[a + k] = 1
            cursor, r = hi, r + 1
    return mask

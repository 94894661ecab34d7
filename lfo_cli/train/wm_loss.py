"""The world-model loss: masked cross-entropy on the reply tokens of :mod:`lfo_cli.train.wm_batches`' batches.

The LM head runs on the target positions only; a :class:`~lfo_cli.train.wm_batches.SharedPrefixBatch`
runs each shared start once and its examples' remaining tokens through the KV cache. Same loss and
gradients as one padded batch through the model's own forward (tested).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from lfo_cli import run_record as rr
from lfo_cli.train.wm_batches import IGNORE_INDEX, SharedPrefixBatch, WMBatch


def can_share_prefix(model) -> bool:
    """Whether :class:`SharedPrefixBatch` forwards apply: an unwrapped model whose logits are the plain
    head over the decoder and whose attention is full (a sliding window would need its own cache)."""
    inner = getattr(model, "module", model)
    if inner is not model:
        return False
    base = inner.get_base_model() if hasattr(inner, "get_base_model") else inner
    if not _plain_head(base):
        return False
    cfg = base.config
    layer_types = getattr(cfg, "layer_types", None)
    if layer_types is not None:
        return all(t == "full_attention" for t in layer_types)
    return getattr(cfg, "sliding_window", None) is None


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
    sums, correct, count = _target_sums(target_logits, shift_labels, mask)
    return sums / count.clamp(min=1), correct, count


def _target_sums(target_logits: torch.Tensor, shift_labels: torch.Tensor, mask: torch.Tensor):
    """``(ce_sum_per_example, correct, count)``: as :func:`_target_loss`, the cross-entropy summed."""
    target_logits = target_logits.float()
    targets = shift_labels[mask]
    ce = F.cross_entropy(target_logits, targets, reduction="none")
    rows = mask.nonzero()[:, 0]
    count = mask.sum(-1)
    per_example = torch.zeros(mask.size(0), dtype=ce.dtype, device=ce.device).index_add(0, rows, ce)
    with torch.no_grad():  # a target is right when no logit beats it (amax: ~10x cheaper than argmax on CPU)
        hit = target_logits.gather(1, targets[:, None]).squeeze(1) >= target_logits.amax(-1)
        correct = torch.zeros_like(count).index_add(0, rows, hit.long())
    return per_example, correct, count


def world_model_sums(model, batch: WMBatch | Sequence[WMBatch]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(ce_sum, correct, count)`` per example (with its graph), concatenated in batch order: what a
    normaliser (:mod:`lfo_cli.train.normalise`) turns into the world-model loss."""
    batches = [batch] if isinstance(batch, WMBatch | SharedPrefixBatch) else batch
    parts = [_forward_shared(model, b) if isinstance(b, SharedPrefixBatch) else _forward(model, b) for b in batches]
    sums, correct, count = (torch.cat(xs) for xs in zip(*parts, strict=True))
    return sums, correct, count


def world_model_forward(model, batch: WMBatch | Sequence[WMBatch]) -> tuple[torch.Tensor, torch.Tensor, dict[str, float]]:
    """Mean loss over examples (each example's loss is its token-mean), per-example losses, and metrics.

    ``batch`` may be a list of batches (:func:`build_length_batches`): one forward each, per-example
    results concatenated in batch order; the mean is over all examples, as for one batch.
    """
    sums, correct, count = world_model_sums(model, batch)
    per_example = sums / count.clamp(min=1)
    loss = per_example.mean()
    metrics = {
        rr.WM_TOKEN_ACC: float(correct.sum()) / max(int(count.sum()), 1),
        rr.WM_EXAMPLES: float(len(per_example)),
        rr.WM_TARGET_TOKENS: float(count.sum()),
        rr.WM_CORRECT_TOKENS: float(correct.sum()),
    }
    return loss, per_example.detach(), metrics


def _forward(model, batch: WMBatch):
    """One forward, per-example ``(ce_sum, correct, count)``; the LM head runs on the target tokens only.

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
        hidden = base.get_decoder()(input_ids=batch.input_ids, attention_mask=causal_only(batch.attention_mask),
                                    use_cache=False).last_hidden_state
        mask = batch.labels[:, 1:] != IGNORE_INDEX
        return _target_sums(base.get_output_embeddings()(hidden[:, :-1][mask]), batch.labels[:, 1:], mask)
    keep = _logits_to_keep(batch.labels)
    kwargs = {"logits_to_keep": keep} if keep and _accepts_logits_to_keep(type(base)) else {}
    out = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, use_cache=False, **kwargs)
    labels = batch.labels[:, batch.labels.size(1) - out.logits.size(1) :]
    mask = labels[:, 1:] != IGNORE_INDEX
    return _target_sums(out.logits[:, :-1][mask], labels[:, 1:], mask)


def _forward_shared(model, batch: SharedPrefixBatch):
    """Prefixes once (their keys and values kept with their graph), then each suffix batch attending to
    its rows' prefixes: the per-row results of :func:`_forward` (sums), in suffix-batch order."""
    if not can_share_prefix(model):
        raise ValueError("shared-prefix batches need an unwrapped model with a plain LM head and full attention")
    from transformers import DynamicCache

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    decoder, head = base.get_decoder(), base.get_output_embeddings()
    caches = [decoder(input_ids=ids, attention_mask=causal_only(mask), use_cache=True).past_key_values
              for ids, mask in batch.prefixes]
    width = max(ids.size(1) for ids, _ in batch.prefixes)

    def stacked(kind: str, layer: int) -> torch.Tensor:  # (U, heads, width, dim): every prefix, right-padded
        return torch.cat([F.pad(getattr(c.layers[layer], kind), (0, 0, 0, width - ids.size(1)))
                          for c, (ids, _) in zip(caches, batch.prefixes, strict=True)])

    layers = range(len(caches[0].layers))
    keys, values = [stacked("keys", i) for i in layers], [stacked("values", i) for i in layers]
    prefix_mask = torch.cat([F.pad(mask, (0, width - mask.size(1))) for _, mask in batch.prefixes])
    parts = []
    for suffix, unit in zip(batch.suffixes, batch.units, strict=True):
        # Prefixes are right-padded: the rows' own longest prefix is all this batch attends to (not
        # the widest prefix of the whole plan), which cuts both attention and the gathered cache.
        w = int(batch.prefix_lengths[unit].max())
        past = DynamicCache(ddp_cache_data=[(k[unit, :, :w], v[unit, :, :w]) for k, v in zip(keys, values, strict=True)])
        positions = batch.prefix_lengths[unit, None] + torch.arange(suffix.input_ids.size(1), device=unit.device)
        hidden = decoder(input_ids=suffix.input_ids, attention_mask=causal_only(torch.cat([prefix_mask[unit, :w], suffix.attention_mask], 1)),
                         position_ids=positions, past_key_values=past, use_cache=True).last_hidden_state
        mask = suffix.labels[:, 1:] != IGNORE_INDEX
        parts.append(_target_sums(head(hidden[:, :-1][mask]), suffix.labels[:, 1:], mask))
    return tuple(torch.cat(xs) for xs in zip(*parts, strict=True))


def causal_only(attention_mask: torch.Tensor) -> torch.Tensor | None:
    """None when every row is real tokens followed only by padding (right-padded), else the mask itself.

    With right padding a causal model's outputs at real positions cannot depend on the padding (every
    key a real query sees is at or before it), and the world-model loss reads real positions only
    (a prefix's padded keys are masked when its suffixes attend to them). Without a mask, SDPA runs its
    causal path, which skips the blocks above the diagonal and builds no (N, 1, L, L) mask.
    """
    if attention_mask.size(1) < 2 or bool((attention_mask[:, 1:] <= attention_mask[:, :-1]).all()):
        return None
    return attention_mask


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

"""The world-model warm start's loss terms on hand-made logits and masks (lfo_cli.models.reply_loss)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from lfo_cli.models.reply_loss import reply_loss_terms


def _batch():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 7, 11, generator=g)
    ids = torch.randint(0, 11, (3, 7), generator=g)
    labels = torch.full_like(ids, -100)
    labels[0, 4:] = ids[0, 4:]  # the assistant's tokens: the labels TRL builds from assistant_masks
    labels[1, 2:4] = ids[1, 2:4]
    labels[2, 5:] = ids[2, 5:]
    reply = torch.zeros_like(ids)
    reply[0, 1:3] = 1  # a reply of two tokens in sequence 0, one of three in sequence 2, none in sequence 1
    reply[2, 2:5] = 1
    return logits, ids, labels, reply


def test_the_assistant_term_is_trl_s_token_sum_over_the_label_tokens():
    logits, ids, labels, reply = _batch()
    loss, _, metrics = reply_loss_terms(logits, labels, ids, reply)
    ce = F.cross_entropy(logits[:, :-1].reshape(-1, 11), labels[:, 1:].reshape(-1), ignore_index=-100, reduction="sum")
    n = int((labels[:, 1:] != -100).sum())
    assert loss.item() == pytest.approx(ce.item() / n, rel=1e-6) and int(metrics["valid"]) == n
    loss_items, _, _ = reply_loss_terms(logits, labels, ids, reply, num_items_in_batch=20)  # gradient accumulation
    assert loss_items.item() == pytest.approx(ce.item() / 20, rel=1e-6)
    probs = logits[:, :-1].softmax(-1)
    valid = labels[:, 1:] != -100
    entropy = (-(probs * probs.log()).sum(-1) * valid).sum()
    assert metrics["entropy"].item() == pytest.approx(entropy.item(), rel=1e-5)
    assert int(metrics["mean_token_accuracy"]) == int(((logits[:, :-1].argmax(-1) == labels[:, 1:]) & valid).sum())


def test_the_reply_term_is_each_sequence_s_mean_then_the_mean_over_sequences_with_a_reply():
    logits, ids, labels, reply = _batch()
    _, reply_loss, _ = reply_loss_terms(logits, labels, ids, reply)
    per_seq = []
    for b in (0, 2):  # sequence 1 has no reply: it does not count
        positions = [t for t in range(1, 7) if reply[b, t]]
        per_seq.append(sum(F.cross_entropy(logits[b, t - 1:t], ids[b, t:t + 1]).item() for t in positions) / len(positions))
    assert reply_loss.item() == pytest.approx(sum(per_seq) / 2, rel=1e-6)
    _, none, _ = reply_loss_terms(logits, labels, ids, torch.zeros_like(reply))
    assert none is None


def test_the_terms_carry_gradient_to_the_logits():
    logits, ids, labels, reply = _batch()
    logits.requires_grad_(True)
    loss, reply_loss, _ = reply_loss_terms(logits, labels, ids, reply)
    (loss + 0.5 * reply_loss).backward()
    assert logits.grad is not None and logits.grad[1].abs().sum() > 0 and logits.grad[0, 0].abs().sum() > 0

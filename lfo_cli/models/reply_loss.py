"""A world-model warm start: the SFT's assistant-token loss plus a weight of loss on the tools' replies.

Early Experience's *implicit world modelling* trains the policy, before RL, to predict what its actions
bring back, on the same trajectories it imitates. Here the warm start's SFT keeps its steps, data and
assistant-token loss, and adds ``train.reply_loss_weight`` x the cross-entropy over the reply tokens of
the chosen tools (``train.reply_loss_tools``),
averaged per sequence and then over the batch, as the RL world-model term (``obs_tokens``) is.

TRL's SFT builds its labels from ``assistant_masks`` while it prepares the data, and its collator keeps
only the columns it knows; the trainer keeps a ``reply_masks`` column next to them
(:class:`ReplyMaskCollator`) and computes both terms from one forward. TRL methods overridden:
``compute_loss`` (replaced, not extended: TRL's own builds no logits, so it keeps TRL's metrics itself:
``entropy``, ``mean_token_accuracy``, ``num_tokens``; upgrade risk: the private ``_metrics``,
``_total_train_tokens`` and ``_tp_size`` it updates) and the private ``_set_signature_columns_if_needed``
(so the column survives TRL's column pruning).
"""

from __future__ import annotations

from typing import Any

from lfo_cli.models.reply_mask import reply_token_mask

REPLY_MASKS = "reply_masks"


def reply_masks(tokenizer, input_ids: list[int], assistant_mask: list[int], messages: list[dict],
                tools: tuple[str, ...]) -> list[int]:
    """1 on the tokens of the replies of ``tools`` inside a rendered trajectory (found in order in the runs of
    non-assistant tokens; a reply that is not found is skipped, never guessed)."""
    replies = [(str(m["content"]), m.get("name") in tools) for m in messages if m["role"] == "tool"]
    return reply_token_mask(tokenizer, input_ids, assistant_mask, replies)


class ReplyMaskCollator:
    """Wraps TRL's SFT collator: pads ``reply_masks`` like the input ids (right), beside its output."""

    def __init__(self, inner):
        self.inner = inner

    def __call__(self, examples: list[dict[str, Any]]) -> dict[str, Any]:
        import torch

        masks = [list(ex.pop(REPLY_MASKS)) for ex in examples]
        out = self.inner(examples)
        width = out["input_ids"].size(1)
        out[REPLY_MASKS] = torch.tensor([m[:width] + [0] * (width - len(m)) for m in masks], dtype=torch.long)
        return out


def reply_loss_trainer(weight: float):
    """An ``SFTTrainer`` subclass that adds ``weight`` x the per-sequence reply-token cross-entropy.

    Its ``compute_loss`` (TRL's advice in place of the deprecated ``compute_loss_func``, which costs an extra
    forward pass) runs one forward with the full logits and takes both terms and TRL's metrics from it: the
    assistant term as TRL's own (token sum over the step's label tokens / ``num_items_in_batch``), and the
    entropy, top-1 accuracy and token count TRL logs, on the label tokens as TRL computes them."""
    import torch
    from trl import SFTTrainer

    class ReplyLossSFTTrainer(SFTTrainer):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.data_collator = ReplyMaskCollator(self.data_collator)

        def _set_signature_columns_if_needed(self):
            super()._set_signature_columns_if_needed()
            if REPLY_MASKS not in self._signature_columns:
                self._signature_columns = [*self._signature_columns, REPLY_MASKS]

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            mode = "train" if self.model.training else "eval"
            masks = inputs.pop(REPLY_MASKS)
            labels = inputs["labels"]
            outputs = model(**{k: v for k, v in inputs.items() if k != "labels"}, use_cache=False)
            loss, reply_loss, metrics = reply_loss_terms(outputs.logits, labels, inputs["input_ids"], masks,
                                                         num_items_in_batch)
            if self.args.average_tokens_across_devices and num_items_in_batch is not None:  # as TRL's
                loss = loss * (self.accelerator.num_processes // self.get_tp_size())
            if reply_loss is not None:
                self._metrics[mode]["reply_loss"].append(float(reply_loss.detach()))
                loss = loss + weight * reply_loss
            gather = self.accelerator.gather_for_metrics
            valid = gather(metrics["valid"]).sum()
            for name in ("entropy", "mean_token_accuracy"):
                total = gather(metrics[name]).sum()
                self._metrics[mode][name].append((total / valid).item() if valid > 0 else 0.0)
            if mode == "train":
                if "attention_mask" in inputs:
                    tokens = gather(inputs["attention_mask"].sum()).sum().item()
                else:  # padding-free batches carry position_ids instead
                    tokens = gather(torch.tensor(inputs["position_ids"].size(1), device=loss.device)).sum().item()
                self._total_train_tokens += tokens // self._tp_size
            self._metrics[mode]["num_tokens"] = [self._total_train_tokens]
            return (loss, outputs) if return_outputs else loss

    return ReplyLossSFTTrainer


def reply_loss_terms(logits, labels, input_ids, reply_masks_, num_items_in_batch=None):
    """(assistant loss, reply loss or None, metric sums) from one forward's logits.

    Assistant loss: the cross-entropy summed over the label tokens (``labels != -100``), over
    ``num_items_in_batch`` (else their count). Reply loss: each sequence's mean cross-entropy over its reply
    tokens (``reply_masks_`` == 1, predicted from the position before), then the mean over the sequences that
    have any; None when none has. Metric sums over the label tokens: ``entropy``, ``mean_token_accuracy``
    (top-1 equals the label) and ``valid`` (their count)."""
    import torch

    logp = logits[:, :-1].float().log_softmax(-1)  # the logits at t predict token t + 1
    targets = labels[:, 1:]
    valid = targets != -100
    token_logp = logp.gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    n = num_items_in_batch if num_items_in_batch is not None else valid.sum()
    loss = -(token_logp * valid).sum() / torch.as_tensor(n, device=logp.device).clamp(min=1)
    with torch.no_grad():  # on the label tokens only, as TRL's metrics
        on_labels = logp[valid]
        metrics = {"entropy": -(on_labels.exp() * on_labels).sum(), "valid": valid.sum(),
                   "mean_token_accuracy": (on_labels.argmax(-1) == targets[valid]).sum()}
    reply = reply_masks_[:, 1:].to(logp.device)
    counts = reply.sum(-1)
    if int(counts.sum()) == 0:
        return loss, None, metrics
    reply_logp = logp.gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    keep = counts > 0
    reply_loss = (-(reply_logp * reply).sum(-1)[keep] / counts[keep]).mean()
    return loss, reply_loss, metrics

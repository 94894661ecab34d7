"""A world-model warm start: the SFT's assistant-token loss plus a weight of loss on the tools' replies.

Early Experience's *implicit world modelling* trains the policy, before RL, to predict what its actions
bring back, on the same trajectories it imitates. Here the warm start's SFT keeps its steps, data and
assistant-token loss, and adds ``train.reply_loss_weight`` x the cross-entropy over the reply tokens of
the chosen tools (``train.reply_loss_tools``; the rep's replies to ``make_phone_call`` by default),
averaged per sequence and then over the batch, as the RL world-model term (``obs_tokens``) is.

TRL's SFT builds its labels from ``assistant_masks`` while it prepares the data, and its collator keeps
only the columns it knows; the trainer keeps a ``reply_masks`` column next to them
(:class:`ReplyMaskCollator`) and computes both terms from one forward through TRL's ``compute_loss_func``
hook. TRL methods overridden: ``compute_loss`` (it calls ``super()``) and the private
``_set_signature_columns_if_needed`` (so the column survives TRL's column pruning).
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

    It hands TRL a ``compute_loss_func``: TRL then runs the model's own forward with the full logits (one
    graph for both terms) and its fused head without gradient for its entropy and accuracy metrics, which
    stay the assistant tokens'. The assistant term is TRL's default (token sum over the step's label
    tokens, ``num_items_in_batch``)."""
    import torch
    import torch.nn.functional as F
    from trl import SFTTrainer

    class ReplyLossSFTTrainer(SFTTrainer):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, compute_loss_func=self._loss, **kwargs)
            self.data_collator = ReplyMaskCollator(self.data_collator)
            self._batch: tuple | None = None  # (input_ids, reply_masks) of the micro-batch in compute_loss

        def _set_signature_columns_if_needed(self):
            super()._set_signature_columns_if_needed()
            if REPLY_MASKS not in self._signature_columns:
                self._signature_columns = [*self._signature_columns, REPLY_MASKS]

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            self._batch = (inputs["input_ids"], inputs.pop(REPLY_MASKS))
            try:
                return super().compute_loss(model, inputs, return_outputs=return_outputs,
                                            num_items_in_batch=num_items_in_batch)
            finally:
                self._batch = None

        def _loss(self, outputs, labels, num_items_in_batch=None):
            input_ids, masks = self._batch
            logits = outputs.logits[:, :-1].float()  # logits at t predict token t + 1
            targets = labels[:, 1:]
            ce = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100, reduction="sum")
            n = num_items_in_batch if num_items_in_batch is not None else (targets != -100).sum()
            loss = ce / torch.as_tensor(n, device=ce.device).clamp(min=1)
            reply = masks[:, 1:].to(logits.device)
            counts = reply.sum(-1)
            mode = "train" if self.model.training else "eval"
            if int(counts.sum()) > 0:
                per_token = F.cross_entropy(logits.flatten(0, 1), input_ids[:, 1:].flatten(),
                                            reduction="none").view_as(reply)
                keep = counts > 0
                reply_loss = ((per_token * reply).sum(-1)[keep] / counts[keep]).mean()
                self._metrics[mode]["reply_loss"].append(float(reply_loss.detach()))
                loss = loss + weight * reply_loss
            return loss

    return ReplyLossSFTTrainer

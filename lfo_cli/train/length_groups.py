"""The policy loss's forward in groups of similar length, so that a batch is not padded to its longest row.

TRL's loss forward runs the micro-batch as one tensor: prompts left-padded, completions right-padded to
the longest of the batch. Multi-turn completions vary a lot (the observation study: mean 69 tokens, the
step's longest 159 on average), so a third or more of that forward and its backward is padding.
:func:`forward_in_length_groups` sorts the rows by their real length, splits them into groups, cuts the
padding every row of a group shares on either side, runs the forward per group and puts the per-token
results back in the batch's order and width (zeros on the cut positions, which the loss masks).

Cutting shared left padding moves a row's tokens to lower position ids. With rotary position embeddings
attention depends only on the distance between positions, so the log-probs are the same up to float
rounding (tested within 1e-5, gradients too).
"""

from __future__ import annotations

from collections.abc import Callable

import torch


def forward_in_length_groups(
    forward: Callable[[torch.Tensor, torch.Tensor, int], tuple[torch.Tensor, torch.Tensor | None]],
    input_ids: torch.Tensor, attention_mask: torch.Tensor, logits_to_keep: int, groups: int,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``forward(ids, mask, keep) -> (logps [B, keep], entropies [B, keep] or None)`` run over ``groups``
    groups of rows of similar length; the results have the batch's shape ``[B, logits_to_keep]``."""
    rows, width = input_ids.shape
    groups = max(1, min(groups, rows))
    real = attention_mask.bool()
    left = real.int().argmax(dim=1)  # leading padding of each row (the prompt's)
    right = real.flip(1).int().argmax(dim=1)  # trailing padding (the completion's)
    order = torch.argsort(width - left - right, stable=True)
    logps, entropies = [], []
    for chunk in torch.tensor_split(order, groups):
        if chunk.numel() == 0:
            continue
        cut_left = int(left[chunk].min())
        cut_right = min(int(right[chunk].min()), logits_to_keep - 1)  # keep at least one completion position
        end = width - cut_right
        lp, ent = forward(input_ids[chunk, cut_left:end], attention_mask[chunk, cut_left:end], logits_to_keep - cut_right)
        logps.append(torch.nn.functional.pad(lp, (0, cut_right)))
        if ent is not None:
            entropies.append(torch.nn.functional.pad(ent, (0, cut_right)))
    inverse = torch.argsort(order)
    logps_out = torch.cat(logps)[inverse]
    entropies_out = torch.cat(entropies)[inverse] if entropies else None
    return logps_out, entropies_out


class LengthGroupedForward:
    """Mixin for a ``GRPOTrainer`` subclass (listed before it in the bases): TRL's loss forward
    (``_get_per_token_logps_and_entropies``, private: an upgrade can rename or change it) on text-only batches
    in ``trainer.loss_length_groups`` groups of similar length, through :func:`forward_in_length_groups`."""

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, batch_size=None,
                                           compute_entropy=False, compute_aux_loss=False, **inputs):
        groups = self.args.loss_length_groups
        if groups > 1 and not compute_aux_loss and input_ids.size(0) > 1 and all(v is None for v in inputs.values()):
            def forward(ids, mask, keep):
                logps, entropies, _ = super(LengthGroupedForward, self)._get_per_token_logps_and_entropies(
                    model, ids, mask, keep, batch_size=batch_size, compute_entropy=compute_entropy)
                return logps, entropies

            return (*forward_in_length_groups(forward, input_ids, attention_mask, logits_to_keep, groups), None)
        return super()._get_per_token_logps_and_entropies(
            model, input_ids, attention_mask, logits_to_keep, batch_size=batch_size, compute_entropy=compute_entropy,
            compute_aux_loss=compute_aux_loss, **inputs)

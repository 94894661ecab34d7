"""How the world-model cross-entropy of a batch becomes one loss: the normaliser, apart from the coupling.

An objective hands its normaliser groups of target tokens (one per world-model example, or all of a
micro-batch's reply tokens) as ``sums`` (cross-entropy summed over a group's target tokens, with its
graph) and ``counts`` (the group's target tokens). The normaliser returns the micro-batch's mean loss and
says what it is a mean over (:attr:`Normaliser.unit`), which is what the generation's total counts, so
that the micro-batches of one generation add up to the mean over all of it (``DualLoRAGRPOTrainer._wm_share``).
One object, shared by every coupling: lambda means the same thing wherever the term's gradient goes.

``reply_mean`` (the world model's examples): each reply's token-mean, then the mean over replies.
``token_mean`` (reply tokens inside the rollouts): the mean over every reply token of the micro-batch.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

import torch


class Normaliser(ABC):
    name: ClassVar[str]
    unit: ClassVar[str]  # what the mean is over: "reply" (a world-model example) or "token"

    @abstractmethod
    def reduce(self, sums: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        """The micro-batch's loss from per-group cross-entropy sums and target-token counts."""

    @abstractmethod
    def units(self, counts: torch.Tensor) -> float:
        """How many of :attr:`unit` the groups hold (the count the generation's total adds up)."""


class ReplyMean(Normaliser):
    """Mean over replies of each reply's token-mean: every phone call weighs the same, long or short."""

    name, unit = "reply_mean", "reply"

    def reduce(self, sums: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        return (sums / counts.clamp(min=1)).mean()

    def units(self, counts: torch.Tensor) -> float:
        return float(counts.numel())


class TokenMean(Normaliser):
    """Mean over every target token: a long reply weighs more than a short one."""

    name, unit = "token_mean", "token"

    def reduce(self, sums: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        return sums.sum() / counts.sum()

    def units(self, counts: torch.Tensor) -> float:
        return float(counts.sum())


NORMALISERS: dict[str, type[Normaliser]] = {cls.name: cls for cls in (ReplyMean, TokenMean)}

"""How the world-model cross-entropy of a batch becomes one loss: the normaliser, apart from the coupling.

An objective hands its normaliser *sequences*, each the target tokens of one thing the model read: a
world-model example (one call's reply, ``separate``/``stacked``) or one rollout (its reply tokens inside
the policy's forward, ``shared``), as ``sums`` (cross-entropy summed over the sequence's target tokens,
with its graph) and ``counts`` (its target tokens). The normaliser returns the micro-batch's loss and
how many of its units that loss is a mean over; the generation's total of those units makes the
micro-batches of one generation add up to the mean over all of it (``DualLoRAGRPOTrainer._wm_share``).

``obs_tokens`` (ECHO's; the default): each sequence's cross-entropy divided by its own target-token
count, then the mean over sequences (those with at least one target token)::

    L = 1/|S| * sum_{s in S} ( sum_{t in s} CE_t / |s| )

``token_mean``: the mean over every target token of the micro-batch, so a long reply weighs more::

    L = sum_s sum_{t in s} CE_t / sum_s |s|

``wm.normalize: legacy`` is what the observation study ran: ``obs_tokens`` for ``separate`` and
``stacked`` (one sequence per call) and ``token_mean`` for ``shared``, each coupling's own default.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

import torch


class Normaliser(ABC):
    name: ClassVar[str]
    unit: ClassVar[str]  # what the mean is over: "sequence" or "token"

    @abstractmethod
    def reduce(self, sums: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        """The micro-batch's loss from per-sequence cross-entropy sums and target-token counts."""

    @abstractmethod
    def units(self, counts: torch.Tensor) -> float:
        """How many of :attr:`unit` the sequences hold (what the generation's total adds up)."""


class ObsTokens(Normaliser):
    """Each sequence's token-mean, then the mean over sequences: every reply (or rollout) weighs the same."""

    name, unit = "obs_tokens", "sequence"

    def reduce(self, sums: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        keep = counts > 0
        return (sums[keep] / counts[keep]).mean()

    def units(self, counts: torch.Tensor) -> float:
        return float((counts > 0).sum())


class TokenMean(Normaliser):
    """The mean over every target token."""

    name, unit = "token_mean", "token"

    def reduce(self, sums: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        return sums.sum() / counts.sum()

    def units(self, counts: torch.Tensor) -> float:
        return float(counts.sum())


NORMALISERS: dict[str, type[Normaliser]] = {cls.name: cls for cls in (ObsTokens, TokenMean)}
LEGACY = "legacy"  # each coupling's own default, as the observation study ran
NORMALIZE_CHOICES = (*NORMALISERS, LEGACY)

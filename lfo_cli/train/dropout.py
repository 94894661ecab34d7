"""Dropout whose mask is drawn from the gaps between dropped elements: fewer random numbers on CPU.

``nn.Dropout`` draws one Bernoulli number per element. On CPU that draw is serial (torch's
``bernoulli_`` runs one mt19937 stream): for a 600 x 192 activation it costs ~3x the 192 x 192 matmul
beside it, so on `micro` the LoRA adapters' dropouts took more time than their matmuls — 15% of the
stacked world-model term, 6% of the policy loss (torch.profiler). With drop probability p the
dropped positions are a Bernoulli process, whose gaps are i.i.d. Geometric(p): drawing the gaps takes
~p x n uniforms (n / 20 at the design's p 0.05) instead of n, by inversion, vectorised. The mask has
exactly nn.Dropout's distribution (i.i.d. drops with probability p, kept values scaled by 1 / (1 - p));
only the random stream differs. ``benchmarks/lora_dropout.py`` measures both.

Small tensors (a decode step's activations) and non-CPU devices keep ``nn.Dropout``: there the fixed
cost of a few extra kernels outweighs the draw, and CUDA's dropout is a fused kernel.
"""

from __future__ import annotations

import math

import torch

MIN_ELEMENTS = 16_384  # below this F.dropout is as fast (measured crossover ~10k elements, 2 threads)


def dropped_positions(n: int, p: float, generator: torch.Generator | None = None) -> torch.Tensor:
    """Sorted indices in ``[0, n)`` of a Bernoulli(p) process: each index independently with probability p.

    Gaps between consecutive positions (and the first position + 1) are Geometric(p) on {1, 2, ...},
    drawn by inversion: ``floor(log(1 - u) / log(1 - p)) + 1`` for u uniform on [0, 1), in float64.
    """
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be in (0, 1), got {p}")
    if n <= 0:
        return torch.zeros(0, dtype=torch.long)
    log_keep = math.log1p(-p)
    mean = n * p
    chunk = int(mean + 6.0 * math.sqrt(mean * (1.0 - p))) + 16  # one draw covers [0, n) almost always

    def gaps() -> torch.Tensor:
        u = torch.rand(chunk, dtype=torch.float64, generator=generator)
        return u.neg_().log1p_().div_(log_keep).floor_().add_(1.0).long()

    positions = gaps().cumsum(0) - 1
    while int(positions[-1]) < n:  # not yet past the end: continue the process from the last position
        positions = torch.cat([positions, gaps().cumsum(0) + positions[-1]])
    return positions[: int(torch.searchsorted(positions, n))]


def sparse_dropout(x: torch.Tensor, p: float, generator: torch.Generator | None = None) -> torch.Tensor:
    """``F.dropout(x, p, training=True)`` in distribution: drop with probability p, scale the rest by 1/(1-p)."""
    return _DropAt.apply(x, dropped_positions(x.numel(), p, generator).to(x.device), 1.0 / (1.0 - p))


class _DropAt(torch.autograd.Function):
    """``x * scale`` with the elements at flat ``positions`` (row-major) zeroed; the gradient likewise.

    No mask tensor: forward and backward are one scaled copy plus a sparse write each, and only the
    positions (~p x numel indices) are kept for the backward, where a mask would cost a full-size
    tensor written, kept until the backward and read twice.
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor, positions: torch.Tensor, scale: float) -> torch.Tensor:
        ctx.save_for_backward(positions)
        ctx.scale = scale
        return _scaled_with_zeros(x, positions, scale)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (positions,) = ctx.saved_tensors
        return _scaled_with_zeros(grad, positions, ctx.scale), None, None


def _scaled_with_zeros(x: torch.Tensor, positions: torch.Tensor, scale: float) -> torch.Tensor:
    out = torch.mul(x, scale).contiguous()  # a new tensor in row-major order, so positions index it as flat
    out.view(-1).index_fill_(0, positions, 0.0)
    return out


class SparseDropout(torch.nn.Dropout):
    """``nn.Dropout`` that uses :func:`sparse_dropout` for large CPU inputs while training."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if (not self.training or self.inplace or not 0.0 < self.p < 1.0 or x.device.type != "cpu"
                or x.numel() < MIN_ELEMENTS):
            return super().forward(x)
        return sparse_dropout(x, self.p)

"""Gradient diagnostics for :class:`~lfo_cli.train.trainer.DualLoRAGRPOTrainer`: each adapter's gradient norm
before the global clip, the clip's coefficient, the design's imbalance warnings and, on probed steps, the
split of the policy's gradient into its RL and world-model parts.

transformers method overridden here (private: an upgrade can rename or change it; ``tests/train`` exercises
it against the pinned version):

* ``_clip_grad_norm`` — each adapter's gradient norm before transformers' global clip (``grad_norm/policy``,
  ``grad_norm/wm``), the RL side of the policy's gradient (:meth:`GradientDiagnostics._split_policy_gradient`),
  then the clip itself, and its coefficient (``grad_norm/clip_coef``, 1 = not clipped).

Not the norms under DeepSpeed: ZeRO keeps the gradients in its own partitioned buffers and accelerate's
backward already steps the engine, so ``.grad`` is empty here and the norms would read a false 0 (seen on a
GPU with ZeRO-2). Such runs log DeepSpeed's global ``grad_norm`` and the autograd probe
``grad_norm/policy_from_wm``, not the per-adapter norms.
"""

from __future__ import annotations

import math

import torch

from lfo_cli import run_record as rr
from lfo_cli.train.adapters import POLICY, WORLD_MODEL, adapter_params, grad_norm


class GradientDiagnostics:
    """Mixin for a ``GRPOTrainer`` subclass (listed before it in the bases). The subclass provides
    :meth:`_policy_probe` (the step's world-model part of the policy gradient, or None) and calls
    :meth:`log_gradient_norms` once per optimizer step, before the optimizer steps."""

    RATIO_LIMIT = 10.0  # the design: "policy_grad_norm >> wm_grad_norm (>10x)" and the converse
    # The RL part counts as zero below this share of the policy's whole gradient: float round-off of
    # (whole - world-model part) when every group had zero reward variance.
    RL_ZERO = 1e-5

    _preclip: tuple[float, float] | None = None
    _rl_split: tuple[float, float] | None = None
    _clip_coef: float = 1.0

    def _policy_probe(self) -> list[torch.Tensor] | None:
        return None

    def _clip_grad_norm(self, model):
        self._preclip = (grad_norm(adapter_params(self.model, POLICY)), grad_norm(adapter_params(self.model, WORLD_MODEL)))
        self._rl_split = self._split_policy_gradient()
        total = super()._clip_grad_norm(model)
        t = float(total.item() if hasattr(total, "item") else total)
        self._clip_coef = min(1.0, self.args.max_grad_norm / (t + 1e-6)) if math.isfinite(t) else 0.0
        return total

    def gradient_norms(self) -> tuple[float, float, float, tuple[float, float] | None]:
        """``(policy, world model, clip coefficient, RL split)`` of this step: as ``_clip_grad_norm`` saw them
        before the clip, or (no clipping configured) as the backward left them."""
        if self._preclip is not None:  # set by _clip_grad_norm (max_grad_norm > 0)
            (policy, wm), coef, split = self._preclip, self._clip_coef, self._rl_split
            self._preclip = self._rl_split = None
            return policy, wm, coef, split
        policy, wm = grad_norm(adapter_params(self.model, POLICY)), grad_norm(adapter_params(self.model, WORLD_MODEL))
        return policy, wm, 1.0, self._split_policy_gradient()

    def log_gradient_norms(self, norms: tuple[float, float, float, tuple[float, float] | None], wm_enabled: bool) -> None:
        """The step's norms into the train metrics, with the design's imbalance warnings where both adapters
        got a gradient from a world-model term."""
        policy, wm, coef, split = norms
        metrics = self._metrics["train"]
        if split is not None:
            metrics[rr.GRAD_POLICY_FROM_RL].append(split[0])
            metrics[rr.GRAD_WM_OVER_RL].append(split[1])
        metrics[rr.GRAD_POLICY].append(policy)
        metrics[rr.GRAD_WM].append(wm)
        metrics[rr.GRAD_CLIP_COEF].append(coef)
        if wm_enabled and policy > 0 and wm > 0:
            ratio = policy / wm
            metrics[rr.GRAD_POLICY_OVER_WM].append(ratio)
            metrics[rr.WARN_POLICY_DOMINATES].append(float(ratio > self.RATIO_LIMIT))
            metrics[rr.WARN_WM_DOMINATES].append(float(ratio < 1.0 / self.RATIO_LIMIT))

    def _split_policy_gradient(self) -> tuple[float, float] | None:
        """On a probed step: ``(|RL part|, |world-model part| / |RL part|)`` of the policy adapter's gradient,
        where the RL part is the whole (pre-clip) gradient minus the probed world-model part, as vectors (no
        second backward). None on other steps and where the RL part is zero (no group with reward variance)."""
        probe = self._policy_probe()
        if probe is None:
            return None
        params = [p for p in adapter_params(self.model, POLICY) if p.requires_grad]
        whole = [torch.zeros_like(p) if p.grad is None else p.grad.detach() for p in params]
        rl = [g - w for g, w in zip(whole, probe, strict=True)]
        rl_norm = float(torch.nn.utils.get_total_norm(rl))
        if rl_norm <= self.RL_ZERO * float(torch.nn.utils.get_total_norm(whole)) or rl_norm == 0.0:
            return None
        return rl_norm, float(torch.nn.utils.get_total_norm(probe)) / rl_norm

    def _probe_policy_from_wm(self, term: torch.Tensor) -> list[torch.Tensor]:
        """d(this micro-batch's lambda * wm term) / d(policy adapter), zeros where no graph path exists
        (so the step's norm is exactly 0 for `separate`); the step's probe is their sum."""
        params = [p for p in adapter_params(self.model, POLICY) if p.requires_grad]
        grads = torch.autograd.grad(term, params, retain_graph=True, allow_unused=True)
        return [torch.zeros_like(p) if g is None else g.detach() for p, g in zip(params, grads, strict=True)]

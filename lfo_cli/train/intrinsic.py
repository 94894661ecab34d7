"""``wm.intrinsic: surprise``: the design's discarded first version, kept as an ablation arm. A reward bonus of
``wm.intrinsic_coef`` times the world model's mean per-token loss on the rollout's replies, predicted with the
objective's adapters."""

from __future__ import annotations

import torch

from lfo_cli.train.adapters import active
from lfo_cli.train.wm_loss import world_model_forward


class SurpriseReward:
    """Mixin for :class:`~lfo_cli.train.trainer.DualLoRAGRPOTrainer`, whose ``__init__`` adds
    :meth:`_surprise_reward` to TRL's reward functions when ``wm.intrinsic=surprise``; reads ``self.objective``."""

    def _surprise_reward(self, environments=None, **kwargs):
        """wm.intrinsic_coef x the world model's mean per-token loss on the rollout's predicted replies."""
        if not environments:
            return [None] * len(kwargs.get("prompts", []))
        per_env = [self.objective.examples(env) for env in environments]
        flat = [ex for exs in per_env for ex in exs]
        losses = [0.0] * len(flat)
        was_training = self.model.training
        self.model.eval()
        # Chunks of wm.max_examples bound memory when wm.batch_tokens = 0 (one forward per chunk).
        chunk = self.args.wm.max_examples  # >= 1, checked by DualLoRAConfig
        for start in range(0, len(flat), chunk):
            batches, order = self.objective.batches(self.model, flat[start : start + chunk])
            with torch.no_grad(), active(self.model, list(self.objective.predict_adapters)):
                per_example = world_model_forward(self.model, [b.to(self.accelerator.device) for b in batches])[1]
            for index, value in zip(order, per_example.tolist(), strict=True):
                losses[start + index] = value
        self.model.train(was_training)
        out, k = [], 0
        for exs in per_env:
            vals = losses[k : k + len(exs)]
            k += len(exs)
            out.append(self.args.wm.intrinsic_coef * sum(vals) / len(vals) if vals else 0.0)
        return out

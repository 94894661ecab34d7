"""Each optimizer step's world-model metrics and gradient norms: a mixin of
:class:`~lfo_cli.train.trainer.DualLoRAGRPOTrainer`, called from TRL's ``on_pre_optimizer_step``.

The world model's training metrics (``losses/wm``, ``wm/token_acc``, ``wm/examples``, ``wm/target_tokens``,
``grad_norm/policy_from_wm``) describe the optimizer step, not a micro-batch: each micro-batch of
``compute_loss`` adds its sums to ``self._wm_step`` (a :class:`~lfo_cli.train.rollout_record.StepWMMetrics`),
logged here once per step. It overrides no TRL method.
"""

from __future__ import annotations

import torch
from transformers import TrainerCallback

from lfo_cli import run_record as rr
from lfo_cli.errors import LfoError
from lfo_cli.train.rollout_record import StepWMMetrics


class WorldModelStepLog:
    """Reads the trainer's ``_wm_step``, ``_step_probe``, ``_step_targets``, ``_steps_without_targets``,
    ``_wm_enabled``, ``objective`` and ``_total`` (set in its ``__init__``)."""

    def log_wm_step(self) -> None:
        """Log the optimizer step's world-model metrics (summed over its micro-batches) and start the next
        step's; a step without world-model work logs nothing. Called at every optimizer step
        (:meth:`on_optimizer_step`), and at once without gradient accumulation."""
        self._step_probe = self._wm_step.probe  # the RL/world-model split still reads it at the clip
        self._wm_step.emit(self._metrics["train"])
        self._wm_step = StepWMMetrics()

    def _policy_probe(self) -> list[torch.Tensor] | None:
        """This step's world-model part of the policy gradient (for :class:`GradientDiagnostics`' split)."""
        return self._wm_step.probe if self._wm_step.probe is not None else self._step_probe

    def on_optimizer_step(self) -> None:
        """Before each optimizer step (all micro-batches have run): the step's world-model metrics, each
        adapter's gradient norm before the global clip with the clip's coefficient, the design's imbalance
        warnings and, on probed steps, the policy gradient's RL part and the world-model part's size against it
        (``grad_norm/policy_from_rl``, ``grad_norm/wm_over_rl``); under DeepSpeed the world model's metrics only
        (:mod:`lfo_cli.train.grad_diagnostics` says why)."""
        self._count_targets()
        if self.is_deepspeed_enabled:
            self.log_wm_step()
            return
        norms = self.gradient_norms()
        self.log_wm_step()
        self._step_probe = None  # consumed: a later step without a probe must not read this one's
        self.log_gradient_norms(norms, self._wm_enabled)

    def _count_targets(self) -> None:
        """A step whose batch (over all processes) held no world-model target token logs ``wm/target_tokens`` 0;
        ``wm.stop_without_targets`` such steps in a row stop the run with one line naming the setting to change."""
        targets, self._step_targets = self._step_targets, None
        if targets is None:  # no world-model term this step (baseline, or the schedule skipped it)
            return
        if float(self._total(targets)) > 0:
            self._steps_without_targets = 0
            return
        self._metrics["train"][rr.WM_TARGET_TOKENS].append(0.0)
        self._steps_without_targets += 1
        limit = self.args.wm.stop_without_targets
        if limit and self._steps_without_targets >= limit:
            raise LfoError(self.objective.no_targets(limit))


class OptimizerStepHook(TrainerCallback):
    """TRL's hook before each optimizer step, handed to :meth:`WorldModelStepLog.on_optimizer_step`."""

    def __init__(self, trainer: WorldModelStepLog):
        self.trainer = trainer

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        self.trainer.on_optimizer_step()

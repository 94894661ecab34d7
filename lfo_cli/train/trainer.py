"""`DualLoRAGRPOTrainer`: TRL's GRPOTrainer (DAPO loss) + lambda * world-model loss.

Read the algorithm here: :meth:`DualLoRAGRPOTrainer.compute_loss` is GRPO's loss (TRL's, untouched) plus
``wm.coef x`` the world-model loss of the run's objective (:mod:`lfo_cli.train.objectives`: ``separate``,
``stacked``, ``shared``), normalised so that a step's term is the mean over the whole generation. What is not
the loss lives in small mixins the class composes, each listing the methods it overrides:

* :class:`~lfo_cli.train.adapters.DualAdapterOptimizer` — one optimizer over both adapters (``create_optimizer``,
  ``_load_from_checkpoint``);
* :class:`~lfo_cli.train.trainer_sampling.LfoSampling` — the rollouts sampled by lfo's loop where the settings are
  plain sampling (``_generate_single_turn``, ``_generate_and_score_completions``);
* :class:`~lfo_cli.train.length_groups.LengthGroupedForward` — the loss forward in groups of similar length
  (``_get_per_token_logps_and_entropies``);
* :class:`~lfo_cli.train.grad_diagnostics.GradientDiagnostics` — each adapter's gradient norm, the clip's
  coefficient and the RL/world-model split of the policy gradient (``_clip_grad_norm``);
* :class:`~lfo_cli.train.intrinsic.SurpriseReward` — ``wm.intrinsic=surprise``'s reward bonus;
* :class:`~lfo_cli.train.wm_step_log.WorldModelStepLog` — each optimizer step's world-model metrics and gradient
  norms, and the stop of a run whose batches hold no world-model target.

TRL methods this class overrides. The private ones (marked) are internals that an upgrade can rename or change;
``tests/train`` exercises each against the pinned TRL 1.16:

* ``__init__`` — builds the objective for the run's world (``world=``, a :class:`lfo_cli.worlds.World`;
  ``wm.targets: tool_responses`` needs none, and without either a world-model term is an error), checks
  ``wm.tools`` against the trainer's tools, adds the surprise bonus as a reward function
  (``wm.intrinsic=surprise``), checks the adapters and registers the optimizer-step callback.
* ``_generate`` (private) — TRL's, unchanged; keeps its completions as TRL's messages (the tool replies it
  inserted, read by ``wm.targets: tool_responses``) for the generation's rollout record.
* ``_generate_and_score_completions`` (private) — after TRL's multi-turn tool rollouts, the objective adds
  its rollout record (:mod:`lfo_cli.train.rollout_record`): world-model examples from each rollout's
  environment or its own tokens, or the reply-token masks, and the generation's total of its normaliser's
  units. TRL's shuffle and split into gradient-accumulation micro-batches carry the columns along.
* ``compute_loss`` — calls ``super()`` for the policy loss on every step that updates the policy; on a
  world-model-only step of a schedule (``alternating``, ``wm_first:N``) it does not, so the policy adapter
  gets no gradient. Then adds ``wm.coef x`` the objective's loss x its share of the generation (each
  micro-batch adds its units over the generation's total, as TRL normalises DAPO's token sum). One
  backward, one optimizer over both adapters.
* ``_get_per_token_logps_and_entropies`` (private) — the one hand-off from TRL's ``_compute_loss`` to the
  objective: the policy forward's per-token log-probs and entropies (the ``shared`` objective's loss reads
  the reply tokens' log-probs from that same forward).

The world model's training metrics (``losses/wm``, ``wm/token_acc``, ``wm/examples``, ``wm/target_tokens``,
``grad_norm/policy_from_wm``) describe the optimizer step, not a micro-batch: each micro-batch adds its sums to
a :class:`~lfo_cli.train.rollout_record.StepWMMetrics`, logged once per step
(:meth:`~lfo_cli.train.wm_step_log.WorldModelStepLog.on_optimizer_step`, from TRL's ``on_pre_optimizer_step``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from trl import GRPOTrainer

from lfo_cli import run_record as rr
from lfo_cli.errors import LfoError
from lfo_cli.train.adapters import POLICY, WORLD_MODEL, DualAdapterOptimizer, activate, adapter_params
from lfo_cli.train.grad_diagnostics import GradientDiagnostics
from lfo_cli.train.intrinsic import SurpriseReward
from lfo_cli.train.length_groups import LengthGroupedForward
from lfo_cli.train.objectives import WorldModelObjective
from lfo_cli.train.rollout_record import EXAMPLES, REPLY_MASK, UNITS, Example, RolloutRecord, StepWMMetrics
from lfo_cli.train.trainer_sampling import LfoSampling
from lfo_cli.train.wm_step_log import OptimizerStepHook, WorldModelStepLog
from lfo_cli.worlds import World

# The rollout record's columns (lfo_cli.train.rollout_record), under the names the tests and callers know.
WM_COLUMN, WM_TOTAL = EXAMPLES, UNITS
__all__ = ["REPLY_MASK", "WM_COLUMN", "WM_TOTAL", "DualLoRAGRPOTrainer", "Example"]


class DualLoRAGRPOTrainer(WorldModelStepLog, GradientDiagnostics, SurpriseReward, LengthGroupedForward, LfoSampling,
                          DualAdapterOptimizer, GRPOTrainer):
    """GRPOTrainer whose model is a PeftModel with `policy` (and, for objectives that have one,
    `world_model`) adapters; the world-model term is the run's :class:`WorldModelObjective`'s."""

    def __init__(self, *args, world: type[World] | None = None,
                 wm_examples_fn: Callable[[object, Sequence[str]], list[Example]] | None = None, **kwargs):
        given = kwargs.get("args")  # becomes self.args: its wm is the run's world-model settings
        if given is not None and given.wm.intrinsic == "surprise":
            funcs = kwargs.get("reward_funcs") or []
            kwargs["reward_funcs"] = [*(funcs if isinstance(funcs, list) else [funcs]), self._surprise_reward]
            if given.reward_weights is not None:
                raise LfoError("wm.intrinsic=surprise scales its bonus by wm.intrinsic_coef; drop trainer.reward_weights")
        self._policy_forward_sink: Callable | None = None  # set only inside compute_loss's policy forward
        super().__init__(*args, **kwargs)
        # The world whose rollouts these are: its tools' replies and their world-model format (the class is enough).
        world = world if world is None or isinstance(world, type) else type(world)
        self.objective: WorldModelObjective = self.args.wm.objective(
            self.args.wm, self.processing_class, world=world, total=self._total, device=self.accelerator.device)
        if wm_examples_fn is not None:
            self.objective.examples_fn = wm_examples_fn
        self._wm_enabled = self.args.wm.coef > 0
        if self._wm_enabled and self.objective.has_adapter and WORLD_MODEL not in getattr(self.model, "peft_config", {}):
            raise ValueError(f"wm.coef > 0 with wm.coupling={self.args.wm.coupling} needs a PeftModel with a "
                             f"'{WORLD_MODEL}' adapter")
        if self._wm_enabled:
            self.objective.check_tools([getattr(t, "__name__", str(t)) for t in self.tools or []])
        self._conversations: list | None = None  # the last generation's completions as TRL's messages, per row
        self._step_targets: float | None = None  # the optimizer step's world-model target tokens (None: no term)
        self._steps_without_targets = 0  # optimizer steps in a row whose batch held no target token
        self._wm_step = StepWMMetrics()  # the current optimizer step's, logged by log_wm_step
        self._step_probe: list[torch.Tensor] | None = None  # the last logged step's probe
        activate(self.model, POLICY)
        self.add_callback(OptimizerStepHook(self))

    # ---- rollouts: the objective keeps what its loss reads (the rollout record) ---------------------
    def _generate(self, prompts):
        """TRL's generation, keeping each rollout's completion as TRL's messages (the tool replies it inserted)."""
        result = super()._generate(prompts)
        self._conversations = result[3]
        return result

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        conversations, self._conversations = self._conversations, None
        if self._wm_enabled:
            self.objective.conversations = conversations if isinstance(conversations, list) else None
            try:
                self.objective.collect(output, getattr(self, "environments", None) or [])
            finally:
                self.objective.conversations = None
        return output

    def _total(self, local) -> torch.Tensor:
        """A per-process count summed over processes (every process generates in step, as TRL gathers there)."""
        local = torch.as_tensor(local, dtype=torch.float32, device=self.accelerator.device)
        return self.accelerator.reduce(local, reduction="sum")

    # ---- the policy forward, handed to objectives that read it (``shared``) ----------------------------
    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, batch_size=None,
                                           compute_entropy=False, compute_aux_loss=False, **inputs):
        result = super()._get_per_token_logps_and_entropies(
            model, input_ids, attention_mask, logits_to_keep, batch_size=batch_size, compute_entropy=compute_entropy,
            compute_aux_loss=compute_aux_loss, **inputs)
        if self._policy_forward_sink is not None:
            self._policy_forward_sink(result[0], result[1])
        return result

    # ---- loss: TRL's policy loss + lambda x the objective's world-model loss ------------------------
    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        record = RolloutRecord.pop(inputs)
        mode = "train" if self.model.training else "eval"
        step = self.state.global_step
        update_policy, update_wm = self.args.wm.plan.updates(step) if mode == "train" else (True, True)

        activate(self.model, POLICY)
        if update_policy or not self._wm_enabled:
            if self._wm_enabled and self.objective.reads_policy_forward:
                self._policy_forward_sink = self.objective.observe_policy_forward
            try:
                loss = super().compute_loss(model, inputs, return_outputs=return_outputs, num_items_in_batch=num_items_in_batch)
            finally:
                self._policy_forward_sink = None
            self._metrics[mode][rr.LOSS_POLICY].append(float(loss.detach()) * self._ga_factor(mode))
        else:  # a world-model-only step: no super() call, and the policy adapter receives no gradient at all
            loss = None

        part = StepWMMetrics()  # this micro-batch's share of the step's world-model metrics
        if self._wm_enabled and update_wm:
            wm_loss, units = self.objective.loss(model, record, part)
            if mode == "train":
                self._step_targets = (self._step_targets or 0.0) + part.targets
            if wm_loss is not None:
                term = self.args.wm.coef * wm_loss * self._wm_share(units, record.units, mode)
                if mode == "train" and self._should_probe(step):
                    part.probe = self._probe_policy_from_wm(term)
                loss = term if loss is None else loss + term
        if mode == "train":
            self._wm_step.add(part)
            if self.current_gradient_accumulation_steps == 1:  # the micro-batch is the step
                self.log_wm_step()
        else:  # an evaluation batch logs its own
            part.emit(self._metrics[mode])

        if loss is None:  # a world-model-only step without examples: a zero that keeps autograd happy
            params = adapter_params(self.model, WORLD_MODEL) or adapter_params(self.model, POLICY)
            loss = torch.stack([p.sum() for p in params]).sum() * 0.0
        self._metrics[mode][rr.LOSS_TOTAL].append(float(loss.detach()) * self._ga_factor(mode))
        activate(self.model, POLICY)  # only the policy adapter is ever active outside compute_loss
        return loss

    def _ga_factor(self, mode: str) -> float:
        return float(self.current_gradient_accumulation_steps) if mode == "train" else 1.0

    def _wm_share(self, count: float, total: torch.Tensor | None, mode: str) -> float:
        """What this micro-batch's mean world-model loss (over ``count`` of its normaliser's units) weighs in
        the step: ``count`` over the generation batch's ``total`` per process, rescaled to one
        accumulation window exactly as TRL rescales DAPO's ``num_items_in_batch``. The micro-batches of
        one generation then add up to the mean over all of it (DDP averages over processes). Without a
        total (inputs built by hand) the micro-batch's own mean, divided by the accumulation steps."""
        if total is None:
            return 1.0 / self._ga_factor(mode)
        per_process = max(float(total), 1.0) / self.accelerator.num_processes
        if mode == "train":  # in eval the batch is neither split nor accumulated
            per_process *= self.current_gradient_accumulation_steps / self.args.steps_per_generation
        return count / per_process

    def _should_probe(self, step: int) -> bool:
        every = self.args.wm.grad_probe_every
        return every > 0 and step % every == 0

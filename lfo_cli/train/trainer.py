"""`DualLoRAGRPOTrainer`: TRL's GRPOTrainer (DAPO loss) + lambda * world-model loss.

Read the algorithm here: :meth:`DualLoRAGRPOTrainer.compute_loss` is GRPO's loss (TRL's, untouched) plus
``wm.coef x`` the world-model loss of the run's objective (:mod:`lfo_cli.train.objectives`: ``separate``,
``stacked``, ``shared``), normalised so that a step's term is the mean over the whole generation.

TRL and transformers methods overridden. The private ones (marked) are internals that an upgrade can rename
or change; ``tests/train`` exercises each against the pinned TRL 1.16:

* ``__init__`` — builds the objective for the run's world (``world=``, a :class:`lfo_cli.worlds.World`;
  ``wm.targets: tool_responses`` needs none, and without either a world-model term is an error), checks
  ``wm.tools`` against the trainer's tools, adds the surprise bonus as a reward function
  (``wm.intrinsic=surprise``), checks the adapters and registers the optimizer-step callback.
* ``_generate_single_turn`` (private) — with ``trainer.sampler: lfo`` (the default) and plain sampling on
  one process (no vLLM, top-k/top-p/min-p or repetition penalty, no DeepSpeed/FSDP, text only), one
  turn of the rollouts is sampled by lfo's loop (:mod:`lfo_cli.models.sampler`) instead of
  ``model.generate``: the same distribution, finished rows leave the batch. With
  ``trainer.rollout_dropout: false`` the turn is sampled in eval mode and reads only what the
  conversation added since the row's last turn (its keys and values are kept between TRL's calls).
  Otherwise TRL's own.
* ``_generate`` (private) — TRL's, unchanged; keeps its completions as TRL's messages (the tool replies it
  inserted, read by ``wm.targets: tool_responses``) for the generation's rollout record.
* ``_generate_and_score_completions`` (private) — after TRL's multi-turn tool rollouts, the objective adds
  its rollout record (:mod:`lfo_cli.train.rollout_record`): world-model examples from each rollout's
  environment or its own tokens, or the reply-token masks, and the generation's total of its normaliser's units. TRL's
  shuffle and split into gradient-accumulation micro-batches carry the columns along. The kept keys and
  values are dropped here.
* ``compute_loss`` — calls ``super()`` for the policy loss on every step that updates the policy; on a
  world-model-only step of a schedule (``alternating``, ``wm_first:N``) it does not, so the policy adapter
  gets no gradient. Then adds ``wm.coef x`` the objective's loss x its share of the generation (each
  micro-batch adds its units over the generation's total, as TRL normalises DAPO's token sum). One
  backward, one optimizer over both adapters.
* ``_get_per_token_logps_and_entropies`` (private) — the one hand-off from TRL's ``_compute_loss`` to the
  objective: the policy forward's per-token log-probs and entropies (the ``shared`` objective's loss reads
  the reply tokens' log-probs from that same forward). It also runs text-only batches in groups of similar
  length (``trainer.loss_length_groups``, :mod:`lfo_cli.train.length_groups`): less padding, same values.
* ``create_optimizer`` — one AdamW over both adapters, with the world model's own learning rate as a
  second parameter group when ``wm.learning_rate`` is set.
* ``_clip_grad_norm`` (private, transformers' Trainer) — each adapter's gradient norm before the global
  clip, and the clip coefficient, for ``grad_norm/policy``, ``grad_norm/wm`` and ``grad_norm/clip_coef``.
* ``_load_from_checkpoint`` (private, transformers' Trainer) — transformers reloads non-active adapters
  as frozen; both are made trainable again before the optimizer is rebuilt.

The world model's training metrics (``losses/wm``, ``wm/token_acc``, ``wm/examples``,
``wm/target_tokens``, ``grad_norm/policy_from_wm``) describe the optimizer step, not a micro-batch:
each micro-batch adds its sums to a :class:`~lfo_cli.train.rollout_record.StepWMMetrics`, logged once per
step (:meth:`DualLoRAGRPOTrainer.on_optimizer_step`, from TRL's ``on_pre_optimizer_step``).

``wm.intrinsic="surprise"`` adds the design's discarded first version as an ablation arm: a reward bonus
equal to ``wm.intrinsic_coef`` times the world model's per-token loss on the rollout's replies, predicted
with the objective's adapters.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from transformers import TrainerCallback
from trl import GRPOTrainer

from lfo_cli import run_record as rr
from lfo_cli.errors import LfoError
from lfo_cli.models.sampler import PromptKV, eval_mode, sample_turn, sample_turn_cached
from lfo_cli.train.adapters import POLICY, WORLD_MODEL, activate, active, adapter_params, grad_norm
from lfo_cli.train.length_groups import forward_in_length_groups
from lfo_cli.train.objectives import WorldModelObjective
from lfo_cli.train.rollout_record import EXAMPLES, REPLY_MASK, UNITS, Example, RolloutRecord, StepWMMetrics
from lfo_cli.train.wm_loss import world_model_forward
from lfo_cli.worlds import World

# The rollout record's columns (lfo_cli.train.rollout_record), under the names the tests and callers know.
WM_COLUMN, WM_TOTAL = EXAMPLES, UNITS
__all__ = ["REPLY_MASK", "WM_COLUMN", "WM_TOTAL", "DualLoRAGRPOTrainer", "Example"]


class DualLoRAGRPOTrainer(GRPOTrainer):
    """GRPOTrainer whose model is a PeftModel with `policy` (and, for objectives that have one,
    `world_model`) adapters; the world-model term is the run's :class:`WorldModelObjective`'s."""

    def __init__(self, *args, world: type[World] | None = None,
                 wm_examples_fn: Callable[[object, Sequence[str]], list[Example]] | None = None, **kwargs):
        cfg = kwargs.get("args")
        if cfg is not None and cfg.wm.intrinsic == "surprise":
            funcs = kwargs.get("reward_funcs") or []
            kwargs["reward_funcs"] = [*(funcs if isinstance(funcs, list) else [funcs]), self._surprise_reward]
            if cfg.reward_weights is not None:
                raise LfoError("wm.intrinsic=surprise scales its bonus by wm.intrinsic_coef; drop trainer.reward_weights")
        self._policy_forward_sink: Callable | None = None  # set only inside compute_loss's policy forward
        self._rollout_kv: list[PromptKV] = []  # each rollout's last prompt's keys and values, within one generation
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
        self._preclip: tuple[float, float] | None = None
        self._rl_split: tuple[float, float] | None = None
        self._step_probe: list[torch.Tensor] | None = None  # the last logged step's probe
        self._clip_coef = 1.0
        activate(self.model, POLICY)
        self.add_callback(_OptimizerStepMetrics(self))

    # ---- resume: transformers reloads non-active adapters as frozen; both must stay trainable ---------
    def _load_from_checkpoint(self, resume_from_checkpoint, model=None):
        super()._load_from_checkpoint(resume_from_checkpoint, model=model)
        activate(self.model, POLICY)  # before the optimizer is built, so it covers both adapters again

    # ---- rollouts: one turn, sampled by lfo's loop where the settings are plain sampling -------------
    def _plain_sampling(self) -> bool:
        a = self.args
        return (a.sampler == "lfo" and not a.use_vllm and not a.use_transformers_continuous_batching
                and a.generation_kwargs is None and a.cache_implementation is None and a.top_k in (0, None)
                and a.top_p == 1.0 and a.min_p is None and a.repetition_penalty == 1.0 and not self._is_vlm
                and not self.is_deepspeed_enabled and not self.is_fsdp_enabled)

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        if not self._plain_sampling() or multimodal_fields or has_tool_images:
            return super()._generate_single_turn(prompt_ids, images, multimodal_fields, num_generations, has_tool_images)
        model = self.accelerator.unwrap_model(self.model)
        how = {"max_new_tokens": self.max_completion_length, "eos_ids": self.eos_token_ids,
               "pad_id": self._tokenizer.pad_token_id, "temperature": self.temperature}
        if self.args.rollout_dropout:  # in train mode, as TRL's transformers path samples (LoRA dropout on)
            return sample_turn(model, prompt_ids, **how), None  # no sampling log-probs, as TRL's own path
        # TRL calls this once per turn, each later turn with the rows that called a tool, their prompts now
        # prompt + completion + tool reply: a row's kept keys and values are those of its previous prompt.
        prior = [max((kv for kv in self._rollout_kv if kv.prefix_of(p)), key=lambda kv: len(kv.ids), default=None)
                 for p in prompt_ids]
        with eval_mode(model):
            completions, self._rollout_kv = sample_turn_cached(model, prompt_ids, prior, **how)
        return completions, None

    # ---- rollouts: the objective keeps what its loss reads (the rollout record) ---------------------
    def _generate(self, prompts):
        """TRL's generation, keeping each rollout's completion as TRL's messages (the tool replies it inserted)."""
        result = super()._generate(prompts)
        self._conversations = result[3]
        return result

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        self._rollout_kv = []
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

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, batch_size=None,
                                           compute_entropy=False, compute_aux_loss=False, **inputs):
        """The one hand-off from TRL's private ``_compute_loss`` to the objective: the policy forward's
        per-token log-probs and entropies, while compute_loss runs the policy loss (not during generation).
        Text-only batches run in ``trainer.loss_length_groups`` groups of similar length (length_groups.py)."""
        groups = self.args.loss_length_groups
        if groups > 1 and not compute_aux_loss and input_ids.size(0) > 1 and all(v is None for v in inputs.values()):
            def forward(ids, mask, keep):
                logps, entropies, _ = super(DualLoRAGRPOTrainer, self)._get_per_token_logps_and_entropies(
                    model, ids, mask, keep, batch_size=batch_size, compute_entropy=compute_entropy)
                return logps, entropies

            result = (*forward_in_length_groups(forward, input_ids, attention_mask, logits_to_keep, groups), None)
        else:
            result = super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, batch_size=batch_size, compute_entropy=compute_entropy,
                compute_aux_loss=compute_aux_loss, **inputs)
        if self._policy_forward_sink is not None:
            self._policy_forward_sink(result[0], result[1])
        return result

    # ---- intrinsic reward: the design's discarded first version, kept as an ablation arm --------------
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

    # ---- optimizer: one AdamW over both adapters, optional separate world-model lr --------------
    def create_optimizer(self, model=None):
        split = self.optimizer is None and self.args.wm.learning_rate is not None
        optimizer = super().create_optimizer(model)
        if split:
            wm_ids = {id(p) for p in adapter_params(self.model, WORLD_MODEL)}
            groups = []
            for group in optimizer.param_groups:
                for is_wm in (False, True):
                    params = [p for p in group["params"] if (id(p) in wm_ids) == is_wm]
                    if params:
                        lr = self.args.wm.learning_rate if is_wm else group["lr"]
                        groups.append({**group, "params": params, "lr": lr})
            optimizer.param_groups.clear()
            for group in groups:
                optimizer.add_param_group(group)
        return optimizer

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

    def _clip_grad_norm(self, model):
        """Each adapter's gradient norm before transformers' global clip (logged as ``grad_norm/policy`` and
        ``grad_norm/wm``), the RL side of the policy's gradient (:meth:`_split_policy_gradient`), then the clip
        itself, and its coefficient (``grad_norm/clip_coef``, 1 = not clipped)."""
        self._preclip = (grad_norm(adapter_params(self.model, POLICY)), grad_norm(adapter_params(self.model, WORLD_MODEL)))
        self._rl_split = self._split_policy_gradient()
        total = super()._clip_grad_norm(model)
        t = float(total.item() if hasattr(total, "item") else total)
        self._clip_coef = min(1.0, self.args.max_grad_norm / (t + 1e-6)) if math.isfinite(t) else 0.0
        return total

    def log_wm_step(self) -> None:
        """Log the optimizer step's world-model metrics (summed over its micro-batches) and start the next
        step's; a step without world-model work logs nothing. Called at every optimizer step
        (:meth:`on_optimizer_step`), and at once without gradient accumulation."""
        self._step_probe = self._wm_step.probe  # the RL/world-model split still reads it at the clip
        self._wm_step.emit(self._metrics["train"])
        self._wm_step = StepWMMetrics()

    RATIO_LIMIT = 10.0  # the design: "policy_grad_norm >> wm_grad_norm (>10x)" and the converse

    def on_optimizer_step(self) -> None:
        """Before each optimizer step (all micro-batches have run): the step's world-model metrics, each
        adapter's gradient norm before the global clip with the clip's coefficient, the design's imbalance
        warnings and, on probed steps, the policy gradient's RL part and the world-model part's size against it
        (``grad_norm/policy_from_rl``, ``grad_norm/wm_over_rl``).

        Not the norms under DeepSpeed: ZeRO keeps the gradients in its own partitioned buffers and
        accelerate's backward already steps the engine, so ``.grad`` is empty here and the norms would read
        a false 0 (seen on a GPU with ZeRO-2). Such runs log DeepSpeed's global ``grad_norm`` and the
        autograd probe ``grad_norm/policy_from_wm``, not the per-adapter norms."""
        self._count_targets()
        if self.is_deepspeed_enabled:
            self.log_wm_step()
            return
        if self._preclip is not None:  # set by _clip_grad_norm (max_grad_norm > 0)
            (policy, wm), coef, split = self._preclip, self._clip_coef, self._rl_split
            self._preclip = self._rl_split = None
        else:  # no clipping configured: the gradients are as the backward left them
            policy, wm, coef = grad_norm(adapter_params(self.model, POLICY)), grad_norm(adapter_params(self.model, WORLD_MODEL)), 1.0
            split = self._split_policy_gradient()
        self.log_wm_step()
        self._step_probe = None  # consumed: a later step without a probe must not read this one's
        metrics = self._metrics["train"]
        if split is not None:
            metrics[rr.GRAD_POLICY_FROM_RL].append(split[0])
            metrics[rr.GRAD_WM_OVER_RL].append(split[1])
        metrics[rr.GRAD_POLICY].append(policy)
        metrics[rr.GRAD_WM].append(wm)
        metrics[rr.GRAD_CLIP_COEF].append(coef)
        if self._wm_enabled and policy > 0 and wm > 0:
            ratio = policy / wm
            metrics[rr.GRAD_POLICY_OVER_WM].append(ratio)
            metrics[rr.WARN_POLICY_DOMINATES].append(float(ratio > self.RATIO_LIMIT))
            metrics[rr.WARN_WM_DOMINATES].append(float(ratio < 1.0 / self.RATIO_LIMIT))

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

    # The RL part counts as zero below this share of the policy's whole gradient: float round-off of
    # (whole - world-model part) when every group had zero reward variance.
    RL_ZERO = 1e-5

    def _split_policy_gradient(self) -> tuple[float, float] | None:
        """On a probed step: ``(|RL part|, |world-model part| / |RL part|)`` of the policy adapter's gradient,
        where the RL part is the whole (pre-clip) gradient minus the probed world-model part, as vectors (no
        second backward). None on other steps and where the RL part is zero (no group with reward variance)."""
        probe = self._wm_step.probe if self._wm_step.probe is not None else self._step_probe
        if probe is None:
            return None
        params = [p for p in adapter_params(self.model, POLICY) if p.requires_grad]
        whole = [torch.zeros_like(p) if p.grad is None else p.grad.detach() for p in params]
        rl = [g - w for g, w in zip(whole, probe, strict=True)]
        rl_norm = float(torch.nn.utils.get_total_norm(rl))
        if rl_norm <= self.RL_ZERO * float(torch.nn.utils.get_total_norm(whole)) or rl_norm == 0.0:
            return None
        return rl_norm, float(torch.nn.utils.get_total_norm(probe)) / rl_norm

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

    def _probe_policy_from_wm(self, term: torch.Tensor) -> list[torch.Tensor]:
        """d(this micro-batch's lambda * wm term) / d(policy adapter), zeros where no graph path exists
        (so the step's norm is exactly 0 for `separate`); the step's probe is their sum."""
        params = [p for p in adapter_params(self.model, POLICY) if p.requires_grad]
        grads = torch.autograd.grad(term, params, retain_graph=True, allow_unused=True)
        return [torch.zeros_like(p) if g is None else g.detach() for p, g in zip(params, grads, strict=True)]


class _OptimizerStepMetrics(TrainerCallback):
    """TRL's hook before each optimizer step, handed to :meth:`DualLoRAGRPOTrainer.on_optimizer_step`."""

    def __init__(self, trainer: DualLoRAGRPOTrainer):
        self.trainer = trainer

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        self.trainer.on_optimizer_step()

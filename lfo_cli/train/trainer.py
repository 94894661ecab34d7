"""`DualLoRAGRPOTrainer`: TRL's GRPOTrainer (DAPO loss) + lambda * world-model loss.

TRL methods overridden, each calling ``super()``. The private ones (marked) are TRL internals that a
TRL upgrade can rename or change; ``tests/train`` exercises each of them against the pinned TRL 1.16:

* ``__init__`` — adds the surprise bonus as a reward function (``wm.intrinsic=surprise``), checks the
  two adapters and registers the per-adapter gradient-norm callback.
* ``_generate_and_score_completions`` (private) — after TRL's multi-turn tool rollouts, build the
  world-model examples from each rollout's environment transition log and attach them as a list
  column, all of a prompt's examples on the first of its rows (TRL's own shuffling/splitting into
  gradient-accumulation micro-batches carries the column along; a prompt's rollouts share a long
  start, which the world-model forward then runs once: ``wm_batches.build_wm_batches``), plus the
  generation batch's total (``lfo_wm_total``).
* ``compute_loss`` — TRL's policy loss (untouched), plus ``wm_coef * wm_loss`` on the micro-batch's
  examples. Normalised as TRL normalises DAPO's token sum, by the whole generation batch: each
  micro-batch adds (its examples' loss sum) / (all examples of the generation, over processes), so
  the step's term is the mean over every phone call of the step however the rows were split. One
  backward, one optimizer over both adapters.
* ``_get_per_token_logps_and_entropies`` (private) — keeps the policy forward's per-token log-probs
  for the ``shared`` coupling, which reads the reply tokens' loss from that same forward.
* ``create_optimizer`` — one AdamW over both adapters, with the world model's own learning rate as a
  second parameter group when ``wm.learning_rate`` is set.
* ``_clip_grad_norm`` (private, transformers' Trainer) — each adapter's gradient norm before the global
  clip, and the clip coefficient, for ``grad_norm/policy``, ``grad_norm/wm`` and ``grad_norm/clip_coef``.
* ``_load_from_checkpoint`` (private, transformers' Trainer) — transformers reloads non-active adapters
  as frozen; both are made trainable again before the optimizer is rebuilt.

The world model's training metrics (``losses/wm``, ``wm/token_acc``, ``wm/examples``,
``wm/target_tokens``, ``grad_norm/policy_from_wm``) describe the optimizer step, not a micro-batch:
each micro-batch adds its sums to a :class:`StepWMMetrics`, logged once per step (``on_pre_optimizer_step``).

Coupling (``wm_coupling``):
* ``separate`` (the design): the world-model forward runs with only the `world_model` adapter active.
  With a frozen base, no gradient of the world-model loss can reach the policy adapter; the trainer
  measures this (``grad_norm/policy_from_wm``), it does not assume it.
* ``stacked``: the world-model forward runs with both adapters active, so its gradient also flows into
  the policy adapter.
* ``shared`` (ECHO-style): one adapter. The cross-entropy on the reply tokens that already sit inside
  the policy's rollout forward (TRL masks them out of the policy loss via ``tool_mask``) is the
  world-model loss: no extra forward at all.

``wm_intrinsic="surprise"`` adds the design's discarded first version as an ablation arm: a reward bonus
equal to ``wm_intrinsic_coef`` times the world model's per-token loss on the rollout's replies.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from transformers import TrainerCallback
from trl import GRPOTrainer

from lfo_cli.train.adapters import POLICY, WORLD_MODEL, activate, active, adapter_params, grad_norm
from lfo_cli.train.reply_mask import reply_token_mask
from lfo_cli.train.wm_batches import build_wm_batches
from lfo_cli.train.wm_loss import can_share_prefix, world_model_forward

WM_COLUMN = "lfo_wm_examples"
REPLY_MASK = "lfo_reply_mask"
# 0-d totals over the generation batch, summed over processes (TRL's split hands a 0-d tensor to every
# micro-batch whole, as it does `num_items_in_batch`): world-model examples; reply tokens (`shared`).
WM_TOTAL = "lfo_wm_total"
REPLY_TOTAL = "lfo_reply_total"
PREDICT_TOOLS = {
    "phone": ("make_phone_call",),
    "phone_form": ("make_phone_call", "auth_info_form"),
    "all": ("make_phone_call", "auth_info_form", "search_company"),
}

Example = tuple[str, tuple[int, int]]


def examples_from_environment(env, tools: Sequence[str]) -> list[Example]:
    """World-model examples (text, target span) for the transitions of one rollout's environment."""
    from lfo_cli.env.formatting import world_model_example

    transitions = getattr(env, "transitions", None) or []
    return [world_model_example(t) for t in transitions if _tool_of(t) in tools]


def gather_by_prompt(column: Sequence[list[Example]], keys: Sequence[object]) -> list[list[Example]]:
    """Every row's examples moved to the first row with the same key (its prompt); the other rows get none.

    TRL shuffles a generation batch's rows before splitting it into gradient-accumulation micro-batches,
    which scatters a prompt's group of rollouts. Their world-model examples share the task and usually
    the directory the search returned; on one row they stay in one micro-batch, where their common
    start runs once. The loss is normalised by the generation's total (``WM_TOTAL``), so which
    micro-batch computes an example does not change the step's loss.
    """
    first: dict[object, int] = {}
    out: list[list[Example]] = [[] for _ in column]
    for i, (key, examples) in enumerate(zip(keys, column, strict=True)):
        out[first.setdefault(key, i)].extend(examples)
    return out


@dataclass
class StepWMMetrics:
    """The world model's metrics of one optimizer step, summed over its micro-batches.

    With gradient accumulation a micro-batch holds whole prompt groups or none (``gather_by_prompt``),
    so per-micro-batch means would be lumpy: a mean of means, and a probe norm of one part of the
    step's gradient. Sums over the step give the step's own values: the loss and token accuracy over
    all of its phone calls (``shared``: reply tokens), and the norm of the whole step's
    d(lambda * wm_loss)/d(policy) (the micro-batches' terms add up to the step's, see ``_wm_share``).
    """

    loss_sum: float = 0.0  # sum of the loss over examples (shared: over reply tokens)
    examples: float = 0.0
    targets: float = 0.0  # target tokens (shared: reply tokens)
    correct: float = 0.0  # target tokens predicted right
    probe: list[torch.Tensor] | None = None  # summed d(term)/d(policy adapter), when the step is probed

    def add(self, other: StepWMMetrics) -> None:
        self.loss_sum += other.loss_sum
        self.examples += other.examples
        self.targets += other.targets
        self.correct += other.correct
        if other.probe is not None:
            self.probe = other.probe if self.probe is None else [a + b for a, b in zip(self.probe, other.probe, strict=True)]

    def emit(self, metrics: dict[str, list[float]], shared: bool) -> None:
        """Append the step's values to TRL's metric lists (nothing for a step without world-model loss)."""
        count = self.targets if shared else self.examples  # what the loss is a mean over
        if count:
            metrics["losses/wm"].append(self.loss_sum / count)
            metrics["wm/target_tokens"].append(self.targets)
            if not shared:
                metrics["wm/token_acc"].append(self.correct / max(self.targets, 1.0))
                metrics["wm/examples"].append(self.examples)
        if self.probe is not None:
            metrics["grad_norm/policy_from_wm"].append(float(torch.nn.utils.get_total_norm(self.probe)))


def _tool_of(transition) -> str | None:
    action = getattr(transition, "action", None)
    if action is None and isinstance(transition, dict):
        action = transition.get("action")
    if isinstance(action, dict):
        return action.get("tool")
    return getattr(action, "tool", None)


class DualLoRAGRPOTrainer(GRPOTrainer):
    """GRPOTrainer whose model is a PeftModel with `policy` and `world_model` adapters."""

    def __init__(self, *args, wm_examples_fn: Callable[[object, Sequence[str]], list[Example]] | None = None, **kwargs):
        from lfo_cli.errors import LfoError

        cfg = kwargs.get("args")
        if cfg is not None and getattr(cfg, "wm_intrinsic", "none") == "surprise":
            funcs = kwargs.get("reward_funcs") or []
            kwargs["reward_funcs"] = [*(funcs if isinstance(funcs, list) else [funcs]), self._surprise_reward]
            if cfg.reward_weights is not None:
                raise LfoError("wm.intrinsic=surprise scales its bonus by wm.intrinsic_coef; drop trainer.reward_weights")
        self._capture_logps = False
        self._captured_logps = None
        super().__init__(*args, **kwargs)
        self.wm_examples_fn = wm_examples_fn or examples_from_environment
        self._wm_tools = PREDICT_TOOLS[self.args.wm_predict]
        self._wm_enabled = self.args.wm_coef > 0
        self._shared = self.args.wm_coupling == "shared"
        if (self._wm_enabled and not self._shared) and WORLD_MODEL not in getattr(self.model, "peft_config", {}):
            raise ValueError(f"wm_coef > 0 needs a PeftModel with a '{WORLD_MODEL}' adapter")
        self._wm_step = StepWMMetrics()  # the current optimizer step's, logged by log_wm_step
        activate(self.model, POLICY)
        self.add_callback(_AdapterGradNorms(self))

    # ---- resume: transformers reloads non-active adapters as frozen; both must stay trainable ---------
    def _load_from_checkpoint(self, resume_from_checkpoint, model=None):
        super()._load_from_checkpoint(resume_from_checkpoint, model=model)
        activate(self.model, POLICY)  # before the optimizer is built, so it covers both adapters again

    # ---- rollouts -------------------------------------------------------------------------------
    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        if self._wm_enabled and self._shared:
            self._attach_reply_mask(output)
        elif self._wm_enabled:
            envs = getattr(self, "environments", None) or []
            n = output["completion_ids"].size(0)
            column = [self.wm_examples_fn(env, self._wm_tools) for env in envs] if envs else [[] for _ in range(n)]
            if len(column) != n:
                raise RuntimeError(f"{len(column)} environments for {n} rollouts")
            prompts = [tuple(t for t, m in zip(ids, mask, strict=True) if m)
                       for ids, mask in zip(output["prompt_ids"].tolist(), output["prompt_mask"].tolist(), strict=True)]
            output[WM_COLUMN] = gather_by_prompt(column, prompts)
            output[WM_TOTAL] = self._total(sum(len(c) for c in column))
        return output

    def _attach_reply_mask(self, output) -> None:
        """`shared`: the reply-token mask of every rollout and the generation's count of them."""
        output[REPLY_MASK] = masks = self._reply_masks(output)
        output[REPLY_TOTAL] = self._total(masks.sum())

    def _total(self, local) -> torch.Tensor:
        """A per-process count summed over processes (every process generates in step, as TRL gathers there)."""
        local = torch.as_tensor(local, dtype=torch.float32, device=self.accelerator.device)
        return self.accelerator.reduce(local, reduction="sum")

    def _reply_masks(self, output) -> torch.Tensor:
        """(B, C) mask of the predicted tools' reply tokens inside each rollout's completion."""
        completion_ids, width = output["completion_ids"], output["completion_ids"].size(1)
        tool_mask = output.get("tool_mask")
        masks = torch.zeros_like(completion_ids)
        envs = getattr(self, "environments", None) or []
        if tool_mask is None or not envs:
            return masks
        for i, env in enumerate(envs):
            replies = [(t.observation, _tool_of(t) in self._wm_tools) for t in getattr(env, "transitions", [])]
            row = reply_token_mask(self.processing_class, completion_ids[i].tolist(), tool_mask[i].tolist(), replies)
            masks[i, :width] = torch.tensor(row[:width], dtype=masks.dtype)
        return masks * output["completion_mask"]

    def _get_per_token_logps_and_entropies(self, *args, **kwargs):
        result = super()._get_per_token_logps_and_entropies(*args, **kwargs)
        if self._capture_logps:  # the policy forward inside compute_loss (shared coupling reuses it)
            self._captured_logps = result[0]
        return result

    # ---- intrinsic reward: the design's discarded first version, kept as an ablation arm --------------
    def _surprise_reward(self, environments=None, **kwargs):
        """wm.intrinsic_coef x the world model's mean per-token loss on the rollout's predicted replies."""
        if not environments:
            return [None] * len(kwargs.get("prompts", []))
        per_env = [self.wm_examples_fn(env, self._wm_tools) for env in environments]
        flat = [ex for exs in per_env for ex in exs]
        losses = [0.0] * len(flat)
        was_training = self.model.training
        self.model.eval()
        # Chunks of wm_max_examples bound memory when wm.batch_tokens = 0 (one forward per chunk).
        chunk = self.args.wm_max_examples  # >= 1, checked by DualLoRAConfig
        for start in range(0, len(flat), chunk):
            batches, order = self._wm_batches(self.model, flat[start : start + chunk])
            with torch.no_grad(), active(self.model, [WORLD_MODEL]):
                per_example = world_model_forward(self.model, [b.to(self.accelerator.device) for b in batches])[1]
            for index, value in zip(order, per_example.tolist(), strict=True):
                losses[start + index] = value
        self.model.train(was_training)
        out, k = [], 0
        for exs in per_env:
            vals = losses[k : k + len(exs)]
            k += len(exs)
            out.append(self.args.wm_intrinsic_coef * sum(vals) / len(vals) if vals else 0.0)
        return out

    # ---- optimizer: one AdamW over both adapters, optional separate world-model lr --------------
    def create_optimizer(self, model=None):
        split = self.optimizer is None and self.args.wm_learning_rate is not None
        optimizer = super().create_optimizer(model)
        if split:
            wm_ids = {id(p) for p in adapter_params(self.model, WORLD_MODEL)}
            groups = []
            for group in optimizer.param_groups:
                for is_wm in (False, True):
                    params = [p for p in group["params"] if (id(p) in wm_ids) == is_wm]
                    if params:
                        lr = self.args.wm_learning_rate if is_wm else group["lr"]
                        groups.append({**group, "params": params, "lr": lr})
            optimizer.param_groups.clear()
            for group in groups:
                optimizer.add_param_group(group)
        return optimizer

    # ---- loss -----------------------------------------------------------------------------------
    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        examples = inputs.pop(WM_COLUMN, None)
        reply_mask = inputs.pop(REPLY_MASK, None)
        totals = {key: inputs.pop(key, None) for key in (WM_TOTAL, REPLY_TOTAL)}
        mode = "train" if self.model.training else "eval"
        step = self.state.global_step
        update_policy, update_wm = self.args.schedule.updates(step) if mode == "train" else (True, True)

        activate(self.model, POLICY)
        if update_policy or not self._wm_enabled:
            self._capture_logps = self._shared and self._wm_enabled
            try:
                loss = super().compute_loss(model, inputs, return_outputs=return_outputs, num_items_in_batch=num_items_in_batch)
            finally:
                self._capture_logps = False
            self._metrics[mode]["losses/policy"].append(float(loss.detach()) * self._ga_factor(mode))
        else:  # a world-model-only step: the policy adapter receives no gradient at all
            loss = None

        part = StepWMMetrics()  # this micro-batch's share of the step's world-model metrics
        if self._wm_enabled and update_wm:
            if self._shared:
                wm_loss, count = self._shared_reply_loss(reply_mask, part)
            else:
                flat = [ex for row in (examples or []) for ex in row]
                wm_loss, count = self._world_model_loss(model, flat, part), float(len(flat))
            if wm_loss is not None:
                total = totals[REPLY_TOTAL if self._shared else WM_TOTAL]
                term = self.args.wm_coef * wm_loss * self._wm_share(count, total, mode)
                if mode == "train" and self._should_probe(step):
                    part.probe = self._probe_policy_from_wm(term)
                loss = term if loss is None else loss + term
        if mode == "train":
            self._wm_step.add(part)
            if self.current_gradient_accumulation_steps == 1:  # the micro-batch is the step
                self.log_wm_step()
        else:  # an evaluation batch logs its own
            part.emit(self._metrics[mode], shared=self._shared)

        if loss is None:  # a world-model-only step without examples: a zero that keeps autograd happy
            params = adapter_params(self.model, WORLD_MODEL) or adapter_params(self.model, POLICY)
            loss = torch.stack([p.sum() for p in params]).sum() * 0.0
        self._metrics[mode]["losses/total"].append(float(loss.detach()) * self._ga_factor(mode))
        activate(self.model, POLICY)  # only the policy adapter is ever active outside compute_loss
        return loss

    def _clip_grad_norm(self, model):
        """Each adapter's gradient norm before transformers' global clip (logged as ``grad_norm/policy`` and
        ``grad_norm/wm``), then the clip itself, and its coefficient (``grad_norm/clip_coef``, 1 = not clipped)."""
        self._preclip = (grad_norm(adapter_params(self.model, POLICY)), grad_norm(adapter_params(self.model, WORLD_MODEL)))
        total = super()._clip_grad_norm(model)
        t = float(total.item() if hasattr(total, "item") else total)
        self._clip_coef = min(1.0, self.args.max_grad_norm / (t + 1e-6)) if math.isfinite(t) else 0.0
        return total

    def log_wm_step(self) -> None:
        """Log the optimizer step's world-model metrics (summed over its micro-batches) and start the next
        step's; a step without world-model work logs nothing. Called at every optimizer step
        (``_AdapterGradNorms.on_pre_optimizer_step``), and at once without gradient accumulation."""
        self._wm_step.emit(self._metrics["train"], shared=self._shared)
        self._wm_step = StepWMMetrics()

    def _ga_factor(self, mode: str) -> float:
        return float(self.current_gradient_accumulation_steps) if mode == "train" else 1.0

    def _wm_share(self, count: float, total: torch.Tensor | None, mode: str) -> float:
        """What this micro-batch's mean world-model loss (over ``count`` examples or reply tokens) weighs in
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

    def _world_model_loss(self, model, examples: list[Example], part: StepWMMetrics | None = None):
        """Mean world-model loss over ``examples`` (None without any); its sums go to ``part``."""
        if not examples:
            return None
        if len(examples) > self.args.wm_max_examples:  # evenly spaced subsample, deterministic
            stride = len(examples) / self.args.wm_max_examples
            examples = [examples[math.floor(i * stride)] for i in range(self.args.wm_max_examples)]
        batches, _ = self._wm_batches(model, examples)
        batches = [b.to(self.accelerator.device) for b in batches]
        adapters = [POLICY, WORLD_MODEL] if self.args.wm_coupling == "stacked" else [WORLD_MODEL]
        with active(self.model, adapters):
            wm_loss, _, metrics = world_model_forward(model, batches)
        if part is not None:
            part.loss_sum += float(wm_loss.detach()) * metrics["wm/examples"]
            part.examples += metrics["wm/examples"]
            part.targets += metrics["wm/target_tokens"]
            part.correct += metrics["wm/correct_tokens"]
        return wm_loss

    def _wm_batches(self, model, examples: list[Example]):
        share = self.args.wm_share_prefix and can_share_prefix(model)
        return build_wm_batches(self.processing_class, examples, self.args.wm_max_length, self.args.wm_batch_tokens,
                                share_prefix=share)

    def _shared_reply_loss(self, reply_mask, part: StepWMMetrics):
        """ECHO-style: cross-entropy on the reply tokens already inside the policy's rollout forward.
        Returns (mean loss over the reply tokens or None when there are none, their count); sums to ``part``."""
        logps, self._captured_logps = self._captured_logps, None
        count = float(reply_mask.sum()) if reply_mask is not None else 0.0
        if logps is None or count == 0:
            return None, count
        wm_loss = -(logps * reply_mask.to(logps.dtype)).sum() / count
        part.loss_sum += float(wm_loss.detach()) * count
        part.targets += count
        return wm_loss, count

    def _should_probe(self, step: int) -> bool:
        every = self.args.wm_grad_probe_every
        return every > 0 and step % every == 0

    def _probe_policy_from_wm(self, term: torch.Tensor) -> list[torch.Tensor]:
        """d(this micro-batch's lambda * wm term) / d(policy adapter), zeros where no graph path exists
        (so the step's norm is exactly 0 for `separate`); the step's probe is their sum."""
        params = [p for p in adapter_params(self.model, POLICY) if p.requires_grad]
        grads = torch.autograd.grad(term, params, retain_graph=True, allow_unused=True)
        return [torch.zeros_like(p) if g is None else g.detach() for p, g in zip(params, grads, strict=True)]


class _AdapterGradNorms(TrainerCallback):
    """Per-adapter gradient norms at every optimizer step, and the design's imbalance warnings; also where
    the step's world-model metrics are logged (``log_wm_step``: all micro-batches have run).

    The norms are taken before the global clip (``_clip_grad_norm``), and the clip's coefficient is logged
    beside them (``grad_norm/clip_coef``: the factor both adapters' gradients were scaled by, 1 when the
    total norm was under ``max_grad_norm``); the ratio of the two norms is what the design's imbalance rule reads.

    Not under DeepSpeed: ZeRO keeps the gradients in its own partitioned buffers and accelerate's
    backward already steps the engine, so ``.grad`` is empty here and the norms would read a false 0
    (seen on a GPU with ZeRO-2). Such runs log DeepSpeed's global ``grad_norm`` and the autograd probe
    ``grad_norm/policy_from_wm``, not the per-adapter norms.
    """

    RATIO_LIMIT = 10.0  # the design: "policy_grad_norm >> wm_grad_norm (>10x)" and the converse

    def __init__(self, trainer: DualLoRAGRPOTrainer):
        self.trainer = trainer

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        self.trainer.log_wm_step()  # the step's world-model metrics, summed over its micro-batches
        if self.trainer.is_deepspeed_enabled:
            return
        model = self.trainer.model
        preclip = getattr(self.trainer, "_preclip", None)  # set by _clip_grad_norm (max_grad_norm > 0)
        if preclip is not None:
            policy, wm = preclip
            coef = self.trainer._clip_coef
            self.trainer._preclip = None
        else:  # no clipping configured: the gradients are as the backward left them
            policy, wm, coef = grad_norm(adapter_params(model, POLICY)), grad_norm(adapter_params(model, WORLD_MODEL)), 1.0
        metrics = self.trainer._metrics["train"]
        metrics["grad_norm/policy"].append(policy)
        metrics["grad_norm/wm"].append(wm)
        metrics["grad_norm/clip_coef"].append(coef)
        if self.trainer._wm_enabled and policy > 0 and wm > 0:
            ratio = policy / wm
            metrics["grad_norm/policy_over_wm"].append(ratio)
            metrics["warnings/policy_dominates"].append(float(ratio > self.RATIO_LIMIT))
            metrics["warnings/wm_dominates"].append(float(ratio < 1.0 / self.RATIO_LIMIT))

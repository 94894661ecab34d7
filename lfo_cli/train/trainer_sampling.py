"""The rollouts' sampling for :class:`~lfo_cli.train.trainer.DualLoRAGRPOTrainer`: one turn at a time by lfo's
loop (:mod:`lfo_cli.models.sampler`) where the settings are plain sampling, TRL's own otherwise.

TRL methods overridden here (both private: an upgrade can rename or change them; ``tests/train/test_sampling.py``
exercises them against the pinned TRL):

* ``_generate_single_turn`` — with ``trainer.sampler: lfo`` (the default) and plain sampling on one process
  (no vLLM, top-k/top-p/min-p or repetition penalty, no DeepSpeed/FSDP, text only), one turn of the rollouts
  is sampled by lfo's loop instead of ``model.generate``: the same distribution, finished rows leave the
  batch. With ``trainer.rollout_dropout: false`` the turn is sampled in eval mode and reads only what the
  conversation added since the row's last turn (its keys and values are kept between TRL's calls).
* ``_generate_and_score_completions`` — TRL's, then drops the kept keys and values (they belong to one
  generation).
"""

from __future__ import annotations

from collections.abc import Sequence

from lfo_cli.models.sampler import PromptKV, eval_mode, sample_turn, sample_turn_cached


class LfoSampling:
    """Mixin for a ``GRPOTrainer`` subclass (listed before it in the bases)."""

    _rollout_kv: Sequence[PromptKV] = ()  # each rollout's last prompt's keys and values, within one generation

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

    def _generate_and_score_completions(self, inputs):
        try:
            return super()._generate_and_score_completions(inputs)
        finally:
            self._rollout_kv = []

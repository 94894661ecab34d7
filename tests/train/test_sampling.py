"""Rollout turns sampled by lfo's loop inside the trainer: where it applies, and the log-probs the loss uses."""

from __future__ import annotations

import sys
from pathlib import Path
from unittest import mock

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from test_trainer import make_trainer  # noqa: E402
from tiny import tiny_tokenizer  # noqa: E402

from lfo_cli.models import sampler  # noqa: E402


@pytest.fixture(scope="module")
def tokenizer():
    return tiny_tokenizer()


@pytest.mark.parametrize(("settings", "lfo"), [({}, True), ({"sampler": "generate"}, False), ({"top_p": 0.9}, False),
                                               ({"top_k": 5}, False), ({"repetition_penalty": 1.1}, False)])
def test_plain_sampling_goes_through_lfos_loop_and_anything_else_through_trls(tokenizer, tmp_path, settings, lfo):
    trainer = make_trainer(tokenizer, tmp_path, max_completion_length=6, **settings)
    prompts = [tokenizer("the rep said")["input_ids"], tokenizer("please call billing fraud")["input_ids"]]
    with (mock.patch("lfo_cli.train.trainer_sampling.sample_turn", wraps=sampler.sample_turn) as plain,
          mock.patch("lfo_cli.train.trainer_sampling.sample_turn_cached", wraps=sampler.sample_turn_cached) as cached):
        completions, logprobs = trainer._generate_single_turn(prompts, None, {}, num_generations=1)
    assert (plain.called or cached.called) == lfo and logprobs is None and len(completions) == 2
    assert all(1 <= len(c) <= 6 for c in completions)


def _modes_seen(model) -> tuple[list[bool], object]:
    """Whether the LoRA layers (and so their dropouts) were training at each forward."""
    seen: list[bool] = []
    lora = next(m for m in model.modules() if hasattr(m, "lora_dropout"))
    return seen, model.register_forward_pre_hook(lambda mod, args: seen.append(lora.training and lora.lora_dropout.training))


@pytest.mark.parametrize("rollout_dropout", [True, False])
def test_rollouts_sample_in_train_mode_only_with_rollout_dropout(tokenizer, tmp_path, rollout_dropout):
    trainer = make_trainer(tokenizer, tmp_path, max_completion_length=4, rollout_dropout=rollout_dropout)
    model = trainer.accelerator.unwrap_model(trainer.model)
    model.train()  # as the trainer holds it between steps
    before = {name: m.training for name, m in model.named_modules()}
    seen, hook = _modes_seen(model)
    try:
        trainer._generate_single_turn([tokenizer("the rep said")["input_ids"]], None, {}, num_generations=1)
    finally:
        hook.remove()
    assert seen and set(seen) == {rollout_dropout}
    assert {name: m.training for name, m in model.named_modules()} == before  # every mode as it was


def test_later_turns_reuse_the_rows_keys_and_values_and_sample_what_a_full_read_samples(tokenizer, tmp_path):
    """TRL's tool loop calls again with the rows that called a tool, each prompt now prompt + completion + reply:
    the second call reads only the new part of those rows, and samples what sampling from a full read does."""
    trainer = make_trainer(tokenizer, tmp_path, max_completion_length=5, bf16=False, rollout_dropout=False)
    model = trainer.accelerator.unwrap_model(trainer.model)
    first = [tokenizer(t)["input_ids"] for t in ("the rep said", "account number and zip code", "claims")]
    torch.manual_seed(0)
    done, _ = trainer._generate_single_turn(first, None, {}, num_generations=1)
    reply = tokenizer(" billing needs the zip code")["input_ids"]
    second = [first[i] + done[i] + reply for i in (0, 2)]  # row 1 ended without a tool call
    with mock.patch("lfo_cli.train.trainer_sampling.sample_turn_cached", wraps=sampler.sample_turn_cached) as spy:
        torch.manual_seed(1)
        reused, _ = trainer._generate_single_turn(second, None, {}, num_generations=1)
    prior = spy.call_args.args[2]
    assert [p.ids if p else None for p in prior] == [tuple(first[0]), tuple(first[2])]
    with sampler.eval_mode(model):
        torch.manual_seed(1)
        full = sampler.sample_turn(model, second, max_new_tokens=5, eos_ids=trainer.eos_token_ids,
                                   pad_id=tokenizer.pad_token_id, temperature=trainer.temperature)
    assert reused == full
    trainer._rollout_kv = [*trainer._rollout_kv]
    with (mock.patch("trl.GRPOTrainer._generate_and_score_completions", return_value={}),
          mock.patch.object(trainer.objective, "collect")):
        trainer._generate_and_score_completions({})
    assert trainer._rollout_kv == []  # nothing kept from one generation to the next


def test_the_loss_reads_the_log_probs_of_a_full_forward_over_sampled_rollouts(tokenizer, tmp_path):
    """Rollouts from lfo's loop, then TRL's per-token log-probs (what the DAPO loss uses) against a plain
    forward over the same padded sequences: within 1e-5."""
    trainer = make_trainer(tokenizer, tmp_path, max_completion_length=10, bf16=False)  # the CPU recipes' precision
    prompts = [tokenizer(t)["input_ids"] for t in ("the rep said", "account number and zip code", "claims")]
    torch.manual_seed(0)
    completions, _ = trainer._generate_single_turn(prompts, None, {}, num_generations=1)
    pad = tokenizer.pad_token_id
    prompt_ids, prompt_mask = sampler.left_pad(prompts, pad)
    width = max(map(len, completions))
    completion_ids = torch.tensor([c + [pad] * (width - len(c)) for c in completions])
    completion_mask = torch.tensor([[1] * len(c) + [0] * (width - len(c)) for c in completions])
    ids = torch.cat([prompt_ids, completion_ids], dim=1)
    mask = torch.cat([prompt_mask, completion_mask], dim=1)
    model = trainer.model.eval()
    with torch.no_grad():
        trl_logps = trainer._get_per_token_logps_and_entropies(model, ids, mask, logits_to_keep=width)[0]
        logits = model(input_ids=ids, attention_mask=mask).logits[:, -width - 1:-1] / trainer.temperature
        full = torch.log_softmax(logits.float(), dim=-1).gather(-1, completion_ids[..., None])[..., 0]
    on = completion_mask.bool()
    assert torch.allclose(trl_logps[on], full[on], atol=1e-5)



@pytest.mark.parametrize("groups", [2, 3])
def test_the_loss_forward_in_length_groups_gives_one_forwards_values_and_gradients(tokenizer, tmp_path, groups):
    """Rows of very different lengths (left-padded prompts, right-padded completions), grouped by length and cut
    to each group's length: per-token log-probs, entropies and the policy adapter's gradient as one forward's."""
    from lfo_cli.train.adapters import POLICY, adapter_params

    trainer = make_trainer(tokenizer, tmp_path, bf16=False, loss_length_groups=1)
    for p in adapter_params(trainer.model, POLICY):  # LoRA B starts at zero: give the adapter a gradient path
        torch.nn.init.normal_(p, std=0.1)
    pad = tokenizer.pad_token_id
    prompts = [tokenizer(t)["input_ids"] for t in ("the rep said", "account number and the last 4 of your ssn",
                                                   "claims", "please call billing fraud customer service")]
    completions = [tokenizer(t)["input_ids"] for t in ("zip code pin policy number member id card", "thank you",
                                                       "your request is done reference code", "the")]
    prompt_ids, prompt_mask = sampler.left_pad(prompts, pad)
    width = max(map(len, completions))
    ids = torch.cat([prompt_ids, torch.tensor([c + [pad] * (width - len(c)) for c in completions])], dim=1)
    mask = torch.cat([prompt_mask, torch.tensor([[1] * len(c) + [0] * (width - len(c)) for c in completions])], dim=1)
    on = mask[:, -width:].bool()
    trainer.model.eval()

    def run(n):
        trainer.args.loss_length_groups = n
        trainer.model.zero_grad()
        logps, entropies, _ = trainer._get_per_token_logps_and_entropies(trainer.model, ids, mask, width,
                                                                         compute_entropy=True)
        (logps * on).sum().backward()
        grads = [p.grad.clone() for p in adapter_params(trainer.model, POLICY)]
        return logps.detach(), entropies.detach(), grads

    one, grouped = run(1), run(groups)
    assert torch.allclose(one[0][on], grouped[0][on], atol=1e-5) and torch.allclose(one[1][on], grouped[1][on], atol=1e-5)
    assert float(grouped[0][~on].abs().sum()) == 0.0  # cut positions are zeros (the loss masks them)
    for a, b in zip(one[2], grouped[2], strict=True):
        assert torch.allclose(a, b, atol=1e-5, rtol=1e-4)

"""DualLoRAGRPOTrainer on a tiny random model: gradient routing, schedules, parity with stock TRL."""

from __future__ import annotations

import copy
import random
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from tiny import tiny_model, tiny_tokenizer  # noqa: E402

from lfo_cli.train.adapters import (  # noqa: E402
    POLICY,
    WORLD_MODEL,
    LoraSettings,
    activate,
    active,
    adapter_params,
    attach_dual_lora,
)
from lfo_cli.train.config import DualLoRAConfig  # noqa: E402
from lfo_cli.train.trainer import WM_COLUMN, DualLoRAGRPOTrainer  # noqa: E402
from lfo_cli.train.wm_batches import IGNORE_INDEX, build_batch  # noqa: E402
from lfo_cli.train.wm_settings import Schedule, WorldModelSettings  # noqa: E402
from lfo_cli.worlds import world_class  # noqa: E402

WM_TEXT = (
    "<|state|>\nTask: call billing\nStep: 2\nPrevious Actions:\n- search_company: the rep\nCollected Auth: {}\n"
    "<|/state|>\n\n<|action|>\n<|tool|>make_phone_call<|args|>{\"phone_number\": \"800-555-0100\"}<|/tool|>\n"
    "<|/action|>\n\n<|predict_csr|>\n"
)
WM_TARGET = "<|csr|>I need your account number and the last 4 of your ssn<|/csr|>"


def wm_example():
    return (WM_TEXT + WM_TARGET, (len(WM_TEXT), len(WM_TEXT) + len(WM_TARGET)))


def reward_len(completions, **kwargs):
    return [float(len(str(c))) for c in completions]


@pytest.fixture(scope="module")
def tokenizer():
    return tiny_tokenizer()


def make_trainer(tokenizer, tmp_path, cls=DualLoRAGRPOTrainer, dual=True, **cfg):
    """A trainer on the tiny model; ``wm_<name>=value`` keywords are ``WorldModelSettings(name=value)``."""
    from datasets import Dataset

    model = attach_dual_lora(tiny_model(tokenizer), LoraSettings(r=4, alpha=8, dropout=0.0), with_world_model=dual)
    args_cls = DualLoRAConfig if cls is DualLoRAGRPOTrainer else __import__("trl").GRPOConfig
    defaults = dict(
        output_dir=str(tmp_path / "out"), per_device_train_batch_size=4, num_generations=4,
        max_completion_length=8, learning_rate=1e-2, report_to=[], use_cpu=True, logging_steps=1,
        save_strategy="no", loss_type="dapo", beta=0.0, warmup_steps=0,
    )
    wm = {"grad_probe_every": 1}
    wm.update({k.removeprefix("wm_"): cfg.pop(k) for k in list(cfg) if k.startswith("wm_")})
    if cls is DualLoRAGRPOTrainer:
        defaults["wm"] = WorldModelSettings(**wm)
    defaults.update(cfg)
    args = args_cls(**defaults)
    data = Dataset.from_dict({"prompt": [[{"role": "user", "content": "the rep said"}]] * 8})
    world = {"world": world_class("customer_service")} if cls is DualLoRAGRPOTrainer else {}
    trainer = cls(model=model, reward_funcs=reward_len, args=args, train_dataset=data, processing_class=tokenizer, **world)
    trainer.current_gradient_accumulation_steps = 1  # set by the training loop; we drive compute_loss directly
    return trainer


def make_inputs(tokenizer, n=4, seed=0, with_wm=True):
    g = torch.Generator().manual_seed(seed)
    prompt_ids = torch.randint(5, len(tokenizer), (n, 6), generator=g)
    completion_ids = torch.randint(5, len(tokenizer), (n, 8), generator=g)
    inputs = {
        "prompt_ids": prompt_ids, "prompt_mask": torch.ones_like(prompt_ids),
        "completion_ids": completion_ids, "completion_mask": torch.ones_like(completion_ids),
        "advantages": torch.tensor([1.0, -1.0, 0.5, -0.5][:n]),
        "num_items_in_batch": torch.tensor(float(n * 8)),
    }
    if with_wm:
        inputs[WM_COLUMN] = [[wm_example()] for _ in range(n)]
    return inputs


def snapshot(model, name):
    return [p.detach().clone() for p in adapter_params(model, name)]


def changed(before, model, name):
    return any(not torch.equal(a, b) for a, b in zip(before, adapter_params(model, name), strict=True))


def one_step(trainer, inputs):
    trainer.model.train()
    opt = trainer.create_optimizer()
    loss = trainer.compute_loss(trainer.model, inputs)
    loss.backward()
    opt.step()
    opt.zero_grad()
    trainer.state.global_step += 1
    return loss


@pytest.mark.parametrize("coupling, expect_zero", [("separate", True), ("stacked", False)])
def test_policy_gradient_from_world_model(tokenizer, tmp_path, coupling, expect_zero):
    trainer = make_trainer(tokenizer, tmp_path, wm_coupling=coupling, wm_coef=1.0)
    # Give the policy adapter non-zero B so a stacked path has something to differentiate through.
    for p in adapter_params(trainer.model, POLICY):
        torch.nn.init.normal_(p, std=0.1)
    trainer.model.train()
    trainer.compute_loss(trainer.model, make_inputs(tokenizer))
    value = trainer._metrics["train"]["grad_norm/policy_from_wm"][-1]
    if expect_zero:
        assert value == 0.0
    else:
        assert value > 0.0


def test_joint_step_changes_both_adapters(tokenizer, tmp_path):
    trainer = make_trainer(tokenizer, tmp_path, wm_coef=0.5, wm_schedule="joint")
    before_p, before_w = snapshot(trainer.model, POLICY), snapshot(trainer.model, WORLD_MODEL)
    one_step(trainer, make_inputs(tokenizer))
    assert changed(before_p, trainer.model, POLICY)
    assert changed(before_w, trainer.model, WORLD_MODEL)
    assert trainer._metrics["train"]["losses/wm"] and trainer._metrics["train"]["losses/policy"]


@pytest.mark.parametrize("deepspeed", [False, True])
def test_per_adapter_grad_norms_only_where_the_gradients_are_readable(tokenizer, tmp_path, deepspeed):
    """Under DeepSpeed `.grad` is empty when callbacks run: no per-adapter norms rather than a false 0."""
    from lfo_cli.train.wm_step_log import OptimizerStepHook as _OptimizerStepMetrics

    trainer = make_trainer(tokenizer, tmp_path, wm_coef=0.5)
    trainer.model.train()
    trainer.compute_loss(trainer.model, make_inputs(tokenizer)).backward()
    trainer.is_deepspeed_enabled = deepspeed
    (callback,) = [c for c in trainer.callback_handler.callbacks if isinstance(c, _OptimizerStepMetrics)]
    callback.on_pre_optimizer_step(trainer.args, trainer.state, trainer.control)
    metrics = trainer._metrics["train"]
    if deepspeed:
        assert "grad_norm/policy" not in metrics and "grad_norm/wm" not in metrics
    else:
        assert metrics["grad_norm/policy"][-1] > 0 and metrics["grad_norm/wm"][-1] > 0



@pytest.mark.parametrize("max_norm", [1e-4, 1e6])
def test_adapter_grad_norms_are_taken_before_the_clip_with_its_coefficient(tokenizer, tmp_path, max_norm):
    """The logged per-adapter norms make up the pre-clip total that transformers' clip returns; the logged
    coefficient is the factor the clip scaled the gradients by (1 when under max_grad_norm)."""
    from lfo_cli.train.adapters import adapter_params, grad_norm
    from lfo_cli.train.wm_step_log import OptimizerStepHook as _OptimizerStepMetrics

    trainer = make_trainer(tokenizer, tmp_path, wm_coef=0.5, max_grad_norm=max_norm)
    trainer.model.train()
    trainer.compute_loss(trainer.model, make_inputs(tokenizer)).backward()
    total = float(trainer._clip_grad_norm(trainer.model))  # what transformers' loop calls before the callback
    after = (grad_norm(adapter_params(trainer.model, POLICY)), grad_norm(adapter_params(trainer.model, WORLD_MODEL)))
    (callback,) = [c for c in trainer.callback_handler.callbacks if isinstance(c, _OptimizerStepMetrics)]
    callback.on_pre_optimizer_step(trainer.args, trainer.state, trainer.control)
    m = trainer._metrics["train"]
    policy, wm, coef = m["grad_norm/policy"][-1], m["grad_norm/wm"][-1], m["grad_norm/clip_coef"][-1]
    assert policy > 0 and wm > 0 and (policy ** 2 + wm ** 2) ** 0.5 == pytest.approx(total, rel=1e-5)
    assert coef == pytest.approx(min(1.0, max_norm / (total + 1e-6)), rel=1e-6)
    assert (max_norm < total) == (coef < 1)
    assert after[0] == pytest.approx(policy * coef, rel=1e-4) and after[1] == pytest.approx(wm * coef, rel=1e-4)

def test_alternating_changes_one_adapter_per_step(tokenizer, tmp_path):
    trainer = make_trainer(tokenizer, tmp_path, wm_coef=0.5, wm_schedule="alternating")
    for step in range(4):
        before_p, before_w = snapshot(trainer.model, POLICY), snapshot(trainer.model, WORLD_MODEL)
        update_policy, update_wm = trainer.args.wm.plan.updates(trainer.state.global_step)
        one_step(trainer, make_inputs(tokenizer, seed=step))
        assert changed(before_p, trainer.model, POLICY) == update_policy
        assert changed(before_w, trainer.model, WORLD_MODEL) == update_wm
        assert update_policy != update_wm


def test_lambda_zero_equals_stock_grpo_loss(tokenizer, tmp_path):
    from trl import GRPOTrainer

    dual = make_trainer(tokenizer, tmp_path / "a", wm_coef=0.0)
    stock = make_trainer(tokenizer, tmp_path / "b", cls=GRPOTrainer)
    stock.model.load_state_dict(dual.model.state_dict())
    dual.model.train()
    stock.model.train()
    inputs = make_inputs(tokenizer)
    loss_dual = dual.compute_loss(dual.model, copy.deepcopy(inputs))
    inputs.pop(WM_COLUMN)
    loss_stock = stock.compute_loss(stock.model, inputs)
    assert torch.equal(loss_dual.detach(), loss_stock.detach())


def test_only_policy_active_after_compute_loss(tokenizer, tmp_path):
    trainer = make_trainer(tokenizer, tmp_path, wm_coupling="stacked", wm_coef=1.0)
    trainer.model.train()
    trainer.compute_loss(trainer.model, make_inputs(tokenizer))
    assert trainer.model.active_adapters == [POLICY]
    assert all(p.requires_grad for p in adapter_params(trainer.model, WORLD_MODEL))
    assert all(p.requires_grad for p in adapter_params(trainer.model, POLICY))


def test_loss_mask_covers_exactly_the_reply(tokenizer):
    text, span = wm_example()
    batch = build_batch(tokenizer, [(text, span)], max_length=512)
    target_ids = batch.labels[0][batch.labels[0] != IGNORE_INDEX].tolist()
    assert tokenizer.decode(target_ids) == text[span[0] : span[1]]
    prefix_ids = batch.input_ids[0][batch.labels[0] == IGNORE_INDEX].tolist()
    assert tokenizer.decode(prefix_ids) == text[: span[0]]
    # Truncation drops the oldest prefix tokens, never the reply's start.
    budget = len(target_ids) + 40
    assert len(prefix_ids) > 40 and len(target_ids) < 3 * budget // 4
    short = build_batch(tokenizer, [(text, span)], max_length=budget)
    kept = short.labels[0][short.labels[0] != IGNORE_INDEX].tolist()
    assert kept == target_ids and short.input_ids.size(1) == budget
    assert short.input_ids[0][:40].tolist() == prefix_ids[-40:]


@pytest.mark.parametrize(
    "text, expected",
    [("joint", [(True, True)] * 4), ("alternating", [(False, True), (True, False)] * 2),
     ("wm_first:2", [(False, True), (False, True), (True, True), (True, True)]),
     ("hierarchical:3", [(True, True), (True, False), (True, False), (True, True)])],
)
def test_schedules(text, expected):
    schedule = Schedule.parse(text)
    assert [schedule.updates(s) for s in range(4)] == expected


@pytest.mark.parametrize("bad", ["sometimes", "wm_first:0", "hierarchical:", "joint:3"])
def test_bad_schedule_is_rejected(bad):
    from lfo_cli.errors import LfoError

    with pytest.raises(LfoError):
        Schedule.parse(bad)


@pytest.mark.parametrize("coupling", ["separate", "stacked"])
def test_activation_checkpointing_is_off_by_default_and_refused_where_it_breaks_the_wm_gradient(tmp_path, coupling):
    """Checkpointing recomputes the world-model forward in backward with the policy adapter active."""
    from lfo_cli.errors import LfoError
    from lfo_cli.train.config import DualLoRAConfig

    base = dict(output_dir=str(tmp_path), use_cpu=True)
    wm = WorldModelSettings(coupling=coupling)
    assert DualLoRAConfig(**base, wm=wm).activation_checkpointing is False  # TRL's GRPOConfig default is True
    for flag in ("gradient_checkpointing", "activation_checkpointing"):
        with pytest.raises(LfoError, match="checkpointing"):
            DualLoRAConfig(**base, wm=wm, **{flag: True})
    off = WorldModelSettings(coupling=coupling, coef=0.0)
    assert DualLoRAConfig(**base, wm=off, gradient_checkpointing=True).activation_checkpointing
    shared = WorldModelSettings(coupling="shared")
    assert DualLoRAConfig(**base, wm=shared, gradient_checkpointing=True).activation_checkpointing


def test_reply_token_mask_marks_exactly_the_phone_replies(tokenizer):
    from lfo_cli.models.reply_mask import reply_token_mask

    reply_a, reply_b = "I need your account number", "thank you your request is done"
    text_model = "<|im_start|>assistant\ncall<|im_end|>\n"
    segment_a = f"<|im_start|>user\n<tool_response>\n{reply_a}\n</tool_response><|im_end|>\n"
    segment_b = f"<|im_start|>user\n<tool_response>\n{reply_b}\n</tool_response><|im_end|>\n"
    ids, tmask = [], []
    for piece, m in [(text_model, 1), (segment_a, 0), (text_model, 1), (segment_b, 0), (text_model, 1)]:
        toks = tokenizer(piece, add_special_tokens=False)["input_ids"]
        ids += toks
        tmask += [m] * len(toks)
    mask = reply_token_mask(tokenizer, ids, tmask, [(reply_a, False), (reply_b, True)])
    marked = [t for t, m in zip(ids, mask, strict=True) if m]
    assert tokenizer.decode(marked).strip() == reply_b  # only the kept reply, and all of it
    assert all(tm == 0 for tm, m in zip(tmask, mask, strict=True) if m)


def test_shared_coupling_trains_the_policy_adapter_from_reply_tokens(tokenizer, tmp_path):
    from lfo_cli.train.trainer import REPLY_MASK

    trainer = make_trainer(tokenizer, tmp_path, dual=False, wm_coupling="shared", wm_coef=1.0)
    assert WORLD_MODEL not in trainer.model.peft_config
    for p in adapter_params(trainer.model, POLICY):
        torch.nn.init.normal_(p, std=0.1)
    inputs = make_inputs(tokenizer, with_wm=False)
    reply = torch.zeros_like(inputs["completion_ids"])
    reply[:, 3:6] = 1
    inputs[REPLY_MASK] = reply
    inputs["tool_mask"] = 1 - reply  # reply tokens are environment tokens: out of the policy loss
    trainer.model.train()
    trainer.compute_loss(trainer.model, inputs)
    assert trainer._metrics["train"]["losses/wm"][-1] > 0
    assert trainer._metrics["train"]["grad_norm/policy_from_wm"][-1] > 0


def test_surprise_reward_is_world_model_error(tokenizer, tmp_path):
    from types import SimpleNamespace

    trainer = make_trainer(tokenizer, tmp_path, wm_coef=1.0, wm_intrinsic="surprise", wm_intrinsic_coef=0.5)
    assert trainer._surprise_reward in trainer.reward_funcs
    trainer.objective.examples_fn = lambda env, tools: [wm_example()] * env.calls
    envs = [SimpleNamespace(calls=0), SimpleNamespace(calls=1), SimpleNamespace(calls=3)]
    bonus = trainer._surprise_reward(environments=envs)
    assert bonus[0] == 0.0 and bonus[1] > 0
    assert bonus[1] == pytest.approx(bonus[2], rel=1e-4)  # same example: same mean error
    assert trainer.model.active_adapters == [POLICY]


@pytest.mark.parametrize("max_examples, batch_tokens, grouped", [(2, 0, False), (3, 600, False), (64, 1, False),
                                                                   (64, 4096, True), (5, 4096, True)])
def test_surprise_reward_maps_each_loss_to_its_rollout(tokenizer, tmp_path, max_examples, batch_tokens, grouped):
    from types import SimpleNamespace

    from lfo_cli.train.wm_batches import SharedPrefixBatch
    from lfo_cli.train.wm_loss import world_model_forward

    trainer = make_trainer(tokenizer, tmp_path, wm_coef=1.0, wm_intrinsic="surprise", wm_intrinsic_coef=0.5,
                           wm_max_examples=max_examples, wm_batch_tokens=batch_tokens)
    for p in adapter_params(trainer.model, WORLD_MODEL):  # a non-zero adapter, so examples differ in loss
        p.data.normal_(0, 0.05)
    examples = _examples_in_groups() if grouped else _examples_of_varied_length()
    random.Random(1).shuffle(examples)
    if grouped:  # rows that share prefixes: their order in the shared batch must map back too
        assert any(isinstance(b, SharedPrefixBatch) for b in trainer.objective.batches(trainer.model, examples)[0])
    per_env = [examples[0:3], examples[3:4], [], examples[4:7]]  # chunks cross rollout boundaries
    if grouped:
        per_env = per_env[:3] + [examples[4:9], examples[9:]]
    trainer.objective.examples_fn = lambda env, tools: env.examples
    bonus = trainer._surprise_reward(environments=[SimpleNamespace(examples=e) for e in per_env])
    with torch.no_grad(), active(trainer.model, [WORLD_MODEL]):
        expected = [0.5 * float(world_model_forward(trainer.model, build_batch(tokenizer, e, 512))[1].mean())
                    if e else 0.0 for e in per_env]
    assert bonus == pytest.approx(expected, rel=1e-4, abs=1e-6)
    assert len({round(b, 4) for b in bonus}) == len(per_env)  # distinct values: a mix-up would show


def _examples_of_varied_length(n=7):
    out = []
    for i in range(n):  # histories of 0..n-1 previous actions: lengths spread like a real batch
        history = "".join(f"- make_phone_call({{\"n\": {k}}}): the rep asked for pin\n" for k in range(i * 3))
        text = WM_TEXT.replace("- search_company: the rep\n", history or "- (none)\n")
        out.append((text + WM_TARGET, (len(text), len(text) + len(WM_TARGET))))
    return out


@pytest.mark.parametrize("budget", [1, 600, 900])
def test_length_batches_give_the_same_loss_and_gradient_with_less_padding(tokenizer, budget):
    from lfo_cli.train.wm_batches import build_length_batches
    from lfo_cli.train.wm_loss import world_model_forward

    torch.manual_seed(0)
    model = attach_dual_lora(tiny_model(tokenizer), LoraSettings(r=4, alpha=8, dropout=0.0))
    for p in adapter_params(model, WORLD_MODEL):  # LoRA B starts at zero: make the adapter do something
        p.data.normal_(0, 0.05)
    model.set_adapter(WORLD_MODEL)
    examples = _examples_of_varied_length()
    random.Random(3).shuffle(examples)  # unsorted input: `order` must map rows back to examples

    def loss_and_grads(batches):
        model.zero_grad(set_to_none=True)
        loss, per_example, _ = world_model_forward(model, batches)
        loss.backward()
        return loss.detach(), per_example, [p.grad.clone() for p in adapter_params(model, WORLD_MODEL)]

    one = build_batch(tokenizer, examples, max_length=512)
    # a forward costs as much as 300 padded tokens here, so rows of unequal length do share batches
    batches, order = build_length_batches(tokenizer, examples, max_length=512, batch_tokens=budget, forward_cost=300)
    assert sorted(order) == list(range(len(examples))) and order != list(range(len(examples)))
    if budget > 1:  # batches of unequal size: a mean of per-batch means would differ from the true mean
        assert len({b.input_ids.size(0) for b in batches}) > 1
    assert all(b.input_ids.numel() <= budget or b.input_ids.size(0) == 1 for b in batches)
    assert sum(b.input_ids.numel() for b in batches) < one.input_ids.numel()  # less padding
    assert sum(b.num_target_tokens for b in batches) == one.num_target_tokens
    loss1, per1, grads1 = loss_and_grads(one)
    loss2, per2, grads2 = loss_and_grads(batches)
    torch.testing.assert_close(loss2, loss1, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(per2, per1[order], rtol=1e-5, atol=1e-6)
    for a, b in zip(grads1, grads2, strict=True):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-6)
    single, _ = build_length_batches(tokenizer, examples, max_length=512, batch_tokens=0)
    assert len(single) == 1 and torch.equal(single[0].input_ids, one.input_ids)


def _examples_in_groups():
    """Like a rollout batch: groups of examples with one task and a common history, then their own
    actions and replies, plus examples that share nothing but the template's first tokens."""
    out = []
    for g, task in enumerate(["call billing", "call fraud", "pin"]):
        for i in range(5 - g):
            history = "".join(f"- make_phone_call({{\"n\": {k}}}): the rep asked for pin\n" for k in range(3 + g))
            history += f"- auth_info_form: {'pin ' * (i % 3)}zip code\n"
            text = WM_TEXT.replace("call billing", task).replace("- search_company: the rep\n", history)
            target = WM_TARGET.replace("account number", ["pin", "zip code", "email", "member id", "card"][i])
            out.append((text + target, (len(text), len(text) + len(target))))
    for k in range(2):
        text = WM_TEXT.replace("Task: call billing", f"Task: {'email ' * (k + 1)}")
        out.append((text + WM_TARGET, (len(text), len(text) + len(WM_TARGET))))
    return out


@pytest.mark.parametrize("arch,budget", [("qwen3", 1), ("qwen3", 700), ("qwen3", 100_000), ("llama", 700)])
def test_shared_prefix_batches_give_the_same_loss_and_gradient_with_fewer_tokens(tokenizer, arch, budget):
    """Examples that start alike run their common start once (KV cache with its graph): same loss, same
    per-example losses, token accuracy and gradients as one padded batch, for both adapters at once."""

    from lfo_cli.train.wm_batches import SharedPrefixBatch, build_wm_batches
    from lfo_cli.train.wm_loss import can_share_prefix, world_model_forward

    base = _tiny_base(arch, tokenizer)
    model = attach_dual_lora(base, LoraSettings(r=4, alpha=8, dropout=0.0))
    for name in (POLICY, WORLD_MODEL):
        for p in adapter_params(model, name):
            p.data.normal_(0, 0.05)
    activate(model, [POLICY, WORLD_MODEL])  # stacked: gradients into both adapters
    assert can_share_prefix(model)
    examples = _examples_in_groups()
    random.Random(5).shuffle(examples)
    params = adapter_params(model, POLICY) + adapter_params(model, WORLD_MODEL)

    def run(batches):
        model.zero_grad(set_to_none=True)
        loss, per_example, metrics = world_model_forward(model, batches)
        loss.backward()
        return loss.detach(), per_example, metrics, [p.grad.clone() for p in params]

    one = build_batch(tokenizer, examples, max_length=512)
    batches, order = build_wm_batches(tokenizer, examples, 512, budget, share_prefix=True)
    shared = [b for b in batches if isinstance(b, SharedPrefixBatch)]
    assert len(shared) == 1 and sorted(order) == list(range(len(examples)))
    assert 2 <= shared[0].num_rows < len(examples)  # the two loners take the length batches
    real = int(one.attention_mask.sum())
    plain, _ = build_wm_batches(tokenizer, examples, 512, budget)
    assert shared[0].num_tokens + sum(b.input_ids.numel() for b in batches[1:]) < min(
        real, sum(b.input_ids.numel() for b in plain))  # fewer tokens than even the unpadded rows
    assert sum(b.num_target_tokens for b in batches) == one.num_target_tokens
    loss1, per1, m1, grads1 = run(one)
    loss2, per2, m2, grads2 = run(batches)
    torch.testing.assert_close(loss2, loss1, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(per2, per1[order], rtol=1e-5, atol=1e-6)
    assert m2 == pytest.approx(m1)
    for a, b in zip(grads1, grads2, strict=True):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-6)
    assert all(g.abs().sum() > 0 for g in grads2)


def test_shared_prefix_is_used_only_when_it_runs_fewer_tokens_and_forwards(tokenizer):
    from lfo_cli.train.wm_batches import SharedPrefixBatch, build_wm_batches, plan_cost

    def shared(batches):
        return any(isinstance(b, SharedPrefixBatch) for b in batches)

    grouped = _examples_in_groups()
    batches, _ = build_wm_batches(tokenizer, grouped, 512, 4096, share_prefix=True)
    plain, _ = build_wm_batches(tokenizer, grouped, 512, 4096)
    assert shared(batches) and not shared(plain) and plan_cost(batches) < plan_cost(plain)
    # two examples that share only their first ~20 tokens: one more forward costs more than that saves
    pair = [(text.replace("call billing", "call billing " + word * 40), span) for word, (text, span) in
            zip(("pin ", "zip code "), [wm_example()] * 2, strict=True)]
    pair = [(t, (len(t) - len(WM_TARGET), len(t))) for t, _ in pair]
    assert not shared(build_wm_batches(tokenizer, pair, 512, 4096, share_prefix=True, min_shared=4)[0])
    assert shared(build_wm_batches(tokenizer, pair, 512, 4096, share_prefix=True, min_shared=4, forward_cost=0)[0])
    assert not shared(build_wm_batches(tokenizer, grouped, 512, 4096, share_prefix=True, min_shared=10_000)[0])


def test_trainer_loss_is_the_same_with_and_without_shared_prefixes(tokenizer, tmp_path):
    """`wm.share_prefix` changes how the world-model loss is computed, not what: compute_loss and both
    adapters' gradients agree (stacked, so the policy adapter gets world-model gradient too)."""
    from lfo_cli.train.wm_batches import SharedPrefixBatch

    grouped = _examples_in_groups()
    results = []
    for share in (True, False):
        trainer = make_trainer(tokenizer, tmp_path / str(share), wm_coef=1.0, wm_coupling="stacked",
                               wm_share_prefix=share, wm_grad_probe_every=0)
        torch.manual_seed(1)
        for name in (POLICY, WORLD_MODEL):
            for p in adapter_params(trainer.model, name):
                p.data.normal_(0, 0.05)
        batches, _ = trainer.objective.batches(trainer.model, grouped)
        assert any(isinstance(b, SharedPrefixBatch) for b in batches) == share
        inputs = make_inputs(tokenizer)
        inputs[WM_COLUMN] = [grouped[0:4], grouped[4:8], grouped[8:12], grouped[12:]]
        trainer.model.train()
        loss = trainer.compute_loss(trainer.model, inputs)
        loss.backward()
        results.append((loss.detach(), [p.grad.clone() for n in (POLICY, WORLD_MODEL)
                                        for p in adapter_params(trainer.model, n)]))
    (loss1, grads1), (loss2, grads2) = results
    torch.testing.assert_close(loss1, loss2, rtol=1e-5, atol=1e-6)
    for a, b in zip(grads1, grads2, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_shared_prefix_needs_a_plain_unwrapped_full_attention_model(tokenizer):
    from transformers import MistralConfig, MistralForCausalLM

    from lfo_cli.train.wm_batches import build_wm_batches
    from lfo_cli.train.wm_loss import can_share_prefix, world_model_forward

    model = attach_dual_lora(tiny_model(tokenizer), LoraSettings(r=4, alpha=8, dropout=0.0))
    assert can_share_prefix(model)
    wrapper = torch.nn.Module()
    wrapper.module = model  # like DistributedDataParallel
    assert not can_share_prefix(wrapper)
    sliding = MistralForCausalLM(MistralConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=4, num_key_value_heads=2, sliding_window=16))
    assert not can_share_prefix(sliding)
    batches, _ = build_wm_batches(tokenizer, _examples_in_groups(), 512, 4096, share_prefix=True)
    with pytest.raises(ValueError, match="unwrapped"):
        world_model_forward(sliding, batches)


@pytest.mark.parametrize("arch", ["qwen3", "llama", "fallback", "wrapped"])
def test_world_model_head_on_targets_only_matches_full_logits(tokenizer, arch, monkeypatch):
    """The world-model loss projects only target positions through the LM head: same loss, same grads."""

    from lfo_cli.train import wm_loss
    from lfo_cli.train.wm_batches import build_batch
    from lfo_cli.train.wm_loss import masked_lm_loss, world_model_forward

    base = _tiny_base(arch, tokenizer)
    if arch == "fallback":  # a model whose logits are post-processed takes transformers' logits_to_keep
        monkeypatch.setattr(wm_loss, "_plain_head", lambda _base: False)
    model = attach_dual_lora(base, LoraSettings(r=4, alpha=8, dropout=0.0))
    for p in adapter_params(model, WORLD_MODEL):
        p.data.normal_(0, 0.05)
    model.set_adapter(WORLD_MODEL)
    examples = _examples_of_varied_length()
    batch = build_batch(tokenizer, examples, max_length=512)
    batch.labels[0] = IGNORE_INDEX  # a row without targets counts 0 and contributes 0

    class Wrapper(torch.nn.Module):  # like DistributedDataParallel: its forward must not be bypassed
        def __init__(self, module):
            super().__init__()
            self.module, self.calls = module, []

        def forward(self, **kwargs):
            self.calls.append(sorted(kwargs))
            return self.module(**kwargs)

    wrapper = Wrapper(model) if arch == "wrapped" else None
    model.zero_grad(set_to_none=True)
    loss, per_example, metrics = world_model_forward(wrapper or model, batch)
    if wrapper is not None:
        assert len(wrapper.calls) == 1 and "logits_to_keep" in wrapper.calls[0]
    loss.backward()
    grads = [p.grad.clone() for p in adapter_params(model, WORLD_MODEL)]

    model.zero_grad(set_to_none=True)
    logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, use_cache=False).logits
    ref_per, ref_correct, ref_count = masked_lm_loss(logits, batch.labels)
    ref_per.mean().backward()
    torch.testing.assert_close(per_example, ref_per.detach(), rtol=1e-5, atol=1e-6)
    assert float(per_example[0]) == 0.0 and float(ref_count[0]) == 0
    assert metrics["wm/token_acc"] == pytest.approx(float(ref_correct.sum()) / float(ref_count.sum()))
    assert metrics["wm/target_tokens"] == float(ref_count.sum())
    for a, b in zip(grads, [p.grad for p in adapter_params(model, WORLD_MODEL)], strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_attention_mask_is_dropped_only_where_padding_is_all_on_the_right():
    from lfo_cli.train.wm_loss import causal_only

    right = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1], [1, 0, 0, 0]])
    assert causal_only(right) is None and causal_only(torch.ones(3, 1, dtype=torch.long)) is None
    for kept in (torch.tensor([[0, 1, 1, 1], [1, 1, 1, 1]]),  # left padding
                 torch.tensor([[1, 1, 0, 1]])):  # a hole: a shorter prefix's padding before the suffix
        assert causal_only(kept) is kept


def test_token_accuracy_counts_the_targets_that_are_the_top_logit():
    from lfo_cli.train.wm_batches import IGNORE_INDEX
    from lfo_cli.train.wm_loss import _target_loss

    torch.manual_seed(0)
    labels = torch.randint(0, 50, (3, 9))
    labels[0, :4] = IGNORE_INDEX
    mask = labels != IGNORE_INDEX
    logits = torch.randn(int(mask.sum()), 50)
    logits[::2, :] = logits[::2, :].scatter(1, labels[mask][::2, None], 10.0)  # every other target on top
    _, correct, count = _target_loss(logits, labels, mask)
    hits = (logits.argmax(-1) == labels[mask]).long()
    assert correct.tolist() == [int(h.sum()) for h in hits.split(mask.sum(-1).tolist())]
    assert count.tolist() == mask.sum(-1).tolist() and int(correct.sum()) >= len(logits[::2])


def test_shared_token_floor_counts_each_distinct_context_prefix_once_and_every_tail(tokenizer):
    from lfo_cli.train.wm_batches import (
        IGNORE_INDEX,
        build_wm_batches,
        plan_cost,
        shared_token_floor,
        tokenize_example,
    )

    examples = _examples_in_groups()
    rows = [tokenize_example(tokenizer, text, span, 512) for text, span in examples]
    starts = [next(k for k, lab in enumerate(labels) if lab != IGNORE_INDEX) - 1 for _, labels in rows]
    prefixes = {tuple(ids[:k]) for (ids, _), s in zip(rows, starts, strict=True) for k in range(1, s + 1)}
    tails = sum(len(ids) - s for (ids, _), s in zip(rows, starts, strict=True))
    floor = shared_token_floor(tokenizer, examples, 512)
    assert floor == len(prefixes) + tails < sum(len(ids) for ids, _ in rows)
    assert floor == shared_token_floor(tokenizer, examples[::-1], 512)  # order does not matter
    assert floor <= plan_cost(build_wm_batches(tokenizer, examples, 512, 4096, share_prefix=True)[0], forward_cost=0)
    # A batch without phone calls: no forwards to plan and nothing to run.
    assert shared_token_floor(tokenizer, [], 512) == 0
    for batch_tokens in (0, 4096):
        for share in (False, True):
            assert build_wm_batches(tokenizer, [], 512, batch_tokens, share_prefix=share) == ([], [])


def test_gather_by_prompt_moves_each_prompts_examples_to_its_first_row():
    from lfo_cli.train.rollout_record import gather_by_prompt

    column = [["a1"], ["b1", "b2"], [], ["a2"], ["c1"], ["b3"]]
    keys = ["A", "B", "B", "A", "C", "B"]
    assert gather_by_prompt(column, keys) == [["a1", "a2"], ["b1", "b2", "b3"], [], [], ["c1"], []]
    assert gather_by_prompt([], []) == []


def test_generation_puts_a_groups_examples_on_one_row_with_the_total(tokenizer, tmp_path, monkeypatch):
    """After TRL's rollouts the example column holds each prompt's examples on its first row (TRL's
    shuffle + split then keeps a group together), and the generation's total rides along as 0-d."""
    from types import SimpleNamespace

    from trl import GRPOTrainer
    from trl.trainer.utils import shuffle_sequence_dict, split_tensor_dict

    from lfo_cli.train.trainer import WM_TOTAL

    grouped = _examples_in_groups()
    trainer = make_trainer(tokenizer, tmp_path, wm_coef=0.5, wm_grad_probe_every=0)
    trainer.objective.examples_fn = lambda env, tools: env.examples
    per_row = [grouped[0:2], grouped[2:3], [], grouped[3:6], grouped[6:7], grouped[7:9]]
    trainer.environments = [SimpleNamespace(examples=e) for e in per_row]
    prompts = torch.tensor([[0, 0, 7, 8], [0, 0, 7, 8], [0, 0, 7, 8], [5, 6, 7, 8], [5, 6, 7, 8], [0, 0, 7, 8]])
    mask = (prompts != 0).long()
    fake = {"prompt_ids": prompts, "prompt_mask": mask, "completion_ids": torch.zeros(6, 3, dtype=torch.long)}
    monkeypatch.setattr(GRPOTrainer, "_generate_and_score_completions", lambda self, inputs: dict(fake))
    out = trainer._generate_and_score_completions(None)
    assert out[WM_COLUMN] == [grouped[0:3] + grouped[7:9], [], [], grouped[3:7], [], []]
    assert out[WM_TOTAL].ndim == 0 and float(out[WM_TOTAL]) == 9.0
    chunks = split_tensor_dict(shuffle_sequence_dict(out), 3)
    assert all(float(c[WM_TOTAL]) == 9.0 for c in chunks)
    assert sorted(len(ex) for c in chunks for ex in c[WM_COLUMN] if ex) == [4, 5]


def test_world_model_term_is_the_mean_over_the_generation_however_its_rows_are_split(tokenizer, tmp_path):
    """With gradient accumulation the micro-batches of one generation add up to lambda x the mean loss
    over all of its examples (the WM_TOTAL normaliser, as TRL's DAPO normalises by the generation's
    tokens), whichever micro-batch holds which examples. The per-micro-batch mean / accumulation steps
    (what inputs without a total get) would weigh a lone example in a micro-batch 3x here."""
    from trl.trainer.utils import split_tensor_dict

    from lfo_cli.train.trainer import WM_TOTAL
    from lfo_cli.train.wm_loss import world_model_forward

    examples = _examples_in_groups()[:4]
    trainer = make_trainer(tokenizer, tmp_path, wm_coef=0.5, wm_grad_probe_every=0, per_device_train_batch_size=2,
                           num_generations=2, gradient_accumulation_steps=2)
    trainer.current_gradient_accumulation_steps = 2
    torch.manual_seed(3)
    for p in adapter_params(trainer.model, WORLD_MODEL):
        p.data.normal_(0, 0.05)
    trainer.model.train()

    def wm_grads(rows, with_total=True):
        inputs = make_inputs(tokenizer)
        inputs[WM_COLUMN] = rows
        if with_total:
            inputs[WM_TOTAL] = torch.tensor(float(sum(map(len, rows))))
        for chunk in split_tensor_dict(inputs, 2):
            trainer.compute_loss(trainer.model, chunk).backward()
        grads = [p.grad.clone() for p in adapter_params(trainer.model, WORLD_MODEL)]
        trainer.model.zero_grad(set_to_none=True)
        return grads

    with active(trainer.model, [WORLD_MODEL]):
        batch = build_batch(tokenizer, examples, 512)
        (0.5 * world_model_forward(trainer.model, batch)[0]).backward()
    expected = [p.grad.clone() for p in adapter_params(trainer.model, WORLD_MODEL)]
    trainer.model.zero_grad(set_to_none=True)
    activate(trainer.model, POLICY)

    lopsided = [examples[:1], [], examples[1:], []]  # 1 example in the first micro-batch, 3 in the second
    even = [examples[:1], examples[1:2], examples[2:3], examples[3:]]
    for rows in (lopsided, even):
        for got, want in zip(wm_grads(rows), expected, strict=True):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-7)
    per_micro_batch_mean = wm_grads(lopsided, with_total=False)
    assert any(not torch.allclose(a, b, rtol=1e-3, atol=1e-7) for a, b in zip(per_micro_batch_mean, expected, strict=True))


@pytest.mark.parametrize("coupling", ["separate", "stacked"])
def test_world_model_metrics_describe_the_step_not_a_micro_batch(tokenizer, tmp_path, coupling):
    """Under gradient accumulation a micro-batch holds whole groups or none; the logged losses/wm,
    wm/token_acc, wm/examples and grad_norm/policy_from_wm are the step's: one value per optimizer step,
    over all of its phone calls, equal to those of the step's examples in one batch. (Per micro-batch
    they were a mean of two means here, counts of 1 and 3, and probe norms of the parts x 2.)"""
    from trl.trainer.utils import split_tensor_dict

    from lfo_cli.train.trainer import WM_TOTAL
    from lfo_cli.train.wm_loss import world_model_forward
    from lfo_cli.train.wm_step_log import OptimizerStepHook as _OptimizerStepMetrics

    examples = _examples_in_groups()[:4]
    trainer = make_trainer(tokenizer, tmp_path, wm_coef=0.5, wm_coupling=coupling, wm_grad_probe_every=1,
                           per_device_train_batch_size=2, num_generations=2, gradient_accumulation_steps=2)
    trainer.current_gradient_accumulation_steps = 2
    torch.manual_seed(5)
    for p in [*adapter_params(trainer.model, WORLD_MODEL), *adapter_params(trainer.model, POLICY)]:
        p.data.normal_(0, 0.05)
    trainer.model.train()
    policy = adapter_params(trainer.model, POLICY)

    adapters = [POLICY, WORLD_MODEL] if coupling == "stacked" else [WORLD_MODEL]
    with active(trainer.model, adapters):
        loss, _, metrics = world_model_forward(trainer.model, build_batch(tokenizer, examples, 512))
    grads = torch.autograd.grad(0.5 * loss, policy, allow_unused=True, retain_graph=True)
    expected_probe = float(torch.nn.utils.get_total_norm([g for g in grads if g is not None] or [torch.zeros(1)]))
    activate(trainer.model, POLICY)

    inputs = make_inputs(tokenizer)
    inputs[WM_COLUMN] = [examples[:1], [], examples[1:], []]  # the step's micro-batches: 1 and 3 calls
    inputs[WM_TOTAL] = torch.tensor(4.0)
    for chunk in split_tensor_dict(inputs, 2):
        trainer.compute_loss(trainer.model, chunk).backward()
    logged = trainer._metrics["train"]
    assert "wm/examples" not in logged  # nothing yet: the step has not ended
    (callback,) = [c for c in trainer.callback_handler.callbacks if isinstance(c, _OptimizerStepMetrics)]
    callback.on_pre_optimizer_step(trainer.args, trainer.state, trainer.control)  # as TRL's loop, once per step

    assert logged["wm/examples"] == [4.0]
    assert logged["wm/target_tokens"] == [metrics["wm/target_tokens"]]
    assert logged["losses/wm"] == [pytest.approx(float(loss.detach()), rel=1e-5)]
    assert logged["wm/token_acc"] == [pytest.approx(metrics["wm/token_acc"])]
    assert logged["grad_norm/policy_from_wm"] == [pytest.approx(expected_probe, rel=1e-4)]
    if coupling == "separate":
        assert logged["grad_norm/policy_from_wm"] == [0.0]
    else:
        assert expected_probe > 0
    callback.on_pre_optimizer_step(trainer.args, trainer.state, trainer.control)  # the next step: no work yet
    assert logged["wm/examples"] == [4.0]


def _tiny_base(arch: str, tokenizer):
    """A tiny Llama (SmolLM2's architecture) for ``arch`` "llama", else the tiny Qwen3 of tests/tiny.py."""
    from transformers import LlamaConfig, LlamaForCausalLM

    if arch != "llama":
        return tiny_model(tokenizer)
    torch.manual_seed(1)
    return LlamaForCausalLM(LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
        pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=True))

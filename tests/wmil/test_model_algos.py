"""BabyModel gradients and size; GAE / PPO / REINFORCE pieces against hand computations."""

from __future__ import annotations

import math

import pytest
import torch

from lfo_cli.wmil import algos
from lfo_cli.wmil.config import WMILConfig
from lfo_cli.wmil.envs import make_task
from lfo_cli.wmil.trainer import Trainer, build_model, rollout


def test_default_model_is_small_and_predicts_raw_next_state():
    task = make_task("pattern_echo", 8)
    model = build_model(WMILConfig(), task)
    assert 50_000 < model.num_parameters() < 1_000_000
    assert "parameters" in model.summary()
    logits, value, h = model(torch.zeros(3, 1, task.obs_dim))
    assert logits.shape == (3, 1, 8) and value.shape == (3, 1)
    assert model.predict_next(h, torch.zeros(3, 1, dtype=torch.long)).shape == (3, 1, task.obs_dim)  # fix 2


@pytest.mark.parametrize("algorithm", ["reinforce", "ppo"])
def test_gradient_reaches_every_parameter(tmp_path, algorithm):
    cfg = WMILConfig(task="delayed_recall", algorithm=algorithm, num_envs=16, ppo_minibatches=2, kl_coef=0.1,
                     value_coef=0.5)
    tr = Trainer(cfg, tmp_path)
    batch = rollout(tr.model, tr.env, tr.gen_act, need_oracle=True, keep_graph=True)
    logits, values, h = tr.model(batch.obs[:, :-1])
    dist = tr.model.dist(logits)
    loss = (algos.reinforce_loss(dist.log_prob(batch.actions), batch.goal - 0.5) - 0.01 * dist.entropy().mean()
            + algos.world_model_loss(tr.model.predict_next(h, batch.actions), batch.obs[:, 1:])
            + ((values - 1.0) ** 2).mean() + algos.kl_to_parent(logits, batch.oracle))
    grads = torch.autograd.grad(loss, list(tr.model.parameters()), allow_unused=True)
    missing = [n for (n, _), g in zip(tr.model.named_parameters(), grads, strict=True) if g is None or not g.abs().sum() > 0]
    assert missing == []
    # and the real update functions run and change every head's weights (value head: PPO only)
    before = {n: p.detach().clone() for n, p in tr.model.named_parameters()}
    tr.train_step()
    changed = {n for n, p in tr.model.named_parameters() if not torch.equal(before[n], p)}
    assert any(n.startswith("world_model") for n in changed) and any(n.startswith("action_head") for n in changed)
    assert any(n.startswith("value_head") for n in changed) == (algorithm == "ppo")


def test_gae_matches_hand_computation():
    # two steps, gamma 0.9, lambda 0.8, episode continues after step 0, ends after step 1
    r = torch.tensor([[1.0, 2.0]])
    v = torch.tensor([[0.5, 1.0]])
    dones = torch.tensor([[0.0, 1.0]])
    adv, ret = algos.gae(r, v, dones, next_value=torch.tensor([3.0]), gamma=0.9, lam=0.8)
    d1 = 2.0 - 1.0  # terminal: no bootstrap of next_value
    d0 = 1.0 + 0.9 * 1.0 - 0.5
    assert torch.allclose(adv, torch.tensor([[d0 + 0.9 * 0.8 * d1, d1]]))
    assert torch.allclose(ret, adv + v)
    # not done at the end: next_value is bootstrapped
    adv2, _ = algos.gae(r, v, torch.zeros(1, 2), torch.tensor([3.0]), 0.9, 0.8)
    d1b = 2.0 + 0.9 * 3.0 - 1.0
    assert torch.allclose(adv2, torch.tensor([[d0 + 0.72 * d1b, d1b]]))
    # lambda = 1 gives discounted return minus value
    adv3, _ = algos.gae(r, v, dones, torch.zeros(1), 0.9, 1.0)
    assert torch.allclose(adv3 + v, algos.discounted_returns(r, 0.9))


def test_discounted_returns_and_ppo_clip():
    assert torch.allclose(algos.discounted_returns(torch.tensor([[0.0, 0.0, 1.0]]), 0.5), torch.tensor([[0.25, 0.5, 1.0]]))
    old = torch.log(torch.tensor([0.5, 0.5]))
    new = torch.log(torch.tensor([0.9, 0.1]))  # ratios 1.8 and 0.2
    adv = torch.tensor([1.0, -1.0])
    loss, _, clipfrac = algos.ppo_policy_loss(new, old, adv, clip_eps=0.2)
    # min(1.8*1, 1.2*1) = 1.2 ; min(0.2*-1, 0.8*-1) = -0.8 -> loss = -(1.2 - 0.8)/2
    assert math.isclose(loss.item(), -0.2, rel_tol=1e-5) and clipfrac.item() == 1.0


def test_kl_to_parent_is_zero_only_when_baby_matches():
    oracle = torch.tensor([[2, -1]])
    a = 4
    p = torch.full((a,), 0.1 / a)
    p[2] += 0.9
    logits = p.log().view(1, 1, a).expand(1, 2, a).clone()
    assert algos.kl_to_parent(logits, oracle).abs() < 1e-6
    assert algos.kl_to_parent(torch.zeros(1, 2, a), oracle) > 0.5


def test_reactive_window_blocks_the_past():
    task = make_task("delayed_recall", 8)
    model = build_model(WMILConfig(task="delayed_recall", context_window=1), task)
    x = torch.randn(2, 4, task.obs_dim)
    y = x.clone()
    y[:, 0] += 5.0  # change only the first observation
    assert torch.allclose(model(x)[0][:, 1:], model(y)[0][:, 1:], atol=1e-5)
    full = build_model(WMILConfig(task="delayed_recall"), task)
    assert not torch.allclose(full(x)[0][:, 1:], full(y)[0][:, 1:], atol=1e-5)

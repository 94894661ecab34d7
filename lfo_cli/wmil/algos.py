"""Returns, GAE and the two policy-gradient losses (REINFORCE default, PPO optional), CleanRL style.

Tensors are batch-major: ``(B, T)`` for per-step quantities, ``(B, T, D)`` for observations.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def discounted_returns(rewards: torch.Tensor, gamma: float) -> torch.Tensor:
    """Reward-to-go ``G_t = sum_k gamma^k r_{t+k}`` within each (time-limited) episode."""
    out = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(rewards.shape[1])):
        running = rewards[:, t] + gamma * running
        out[:, t] = running
    return out


def gae(rewards: torch.Tensor, values: torch.Tensor, dones: torch.Tensor, next_value: torch.Tensor,
        gamma: float, lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation (Schulman et al. 2016), as in CleanRL's ppo.py.

    ``dones[:, t]`` is 1 when the episode ended after step ``t`` (then nothing is bootstrapped
    across it); ``next_value`` is ``V(s_T)`` for the observation after the last step.
    Returns ``(advantages, returns)`` with ``returns = advantages + values``.
    """
    b, t_len = rewards.shape
    adv = torch.zeros_like(rewards)
    last = torch.zeros(b, dtype=rewards.dtype)
    for t in reversed(range(t_len)):
        nv = next_value if t == t_len - 1 else values[:, t + 1]
        nonterminal = 1.0 - dones[:, t].to(rewards.dtype)
        delta = rewards[:, t] + gamma * nv * nonterminal - values[:, t]
        last = delta + gamma * lam * nonterminal * last
        adv[:, t] = last
    return adv, adv + values


def kl_to_parent(logits: torch.Tensor, oracle: torch.Tensor, smoothing: float = 0.1) -> torch.Tensor:
    """KL(parent || baby) where the parent's policy is its oracle action, label-smoothed.

    The design's "KL-distill" baseline: the term that smuggles the parent's action distribution back
    in. Steps where the oracle is ``-1`` (any action is fine) are skipped.
    """
    mask = oracle >= 0
    if not mask.any():
        return logits.sum() * 0.0
    a = logits.shape[-1]
    logq = F.log_softmax(logits[mask], dim=-1)
    p = torch.full_like(logq, smoothing / a)
    p.scatter_(1, oracle[mask].view(-1, 1), 1.0 - smoothing + smoothing / a)
    return (p * (p.log() - logq)).sum(-1).mean()


def world_model_loss(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.mse_loss(pred, target)


def reinforce_loss(logp: torch.Tensor, advantages: torch.Tensor) -> torch.Tensor:
    """``-log pi(a|s) * (G - b)``: the design's REINFORCE with a running baseline (fix 3)."""
    return -(logp * advantages.detach()).mean()


def ppo_policy_loss(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor,
                    clip_eps: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Clipped surrogate. Returns ``(loss, approx_kl, clip_fraction)``."""
    log_ratio = logp - old_logp
    ratio = log_ratio.exp()
    surr1 = ratio * advantages
    surr2 = torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps) * advantages
    with torch.no_grad():
        approx_kl = ((ratio - 1) - log_ratio).mean()
        clipfrac = ((ratio - 1.0).abs() > clip_eps).float().mean()
    return -torch.min(surr1, surr2).mean(), approx_kl, clipfrac

"""Building blocks shared by training and evaluation: the model for a task and config, the starting
curriculum level, and the vectorised rollout of ``num_envs`` episodes at once."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from lfo_cli.wmil.config import WMILConfig
from lfo_cli.wmil.envs import VecEnv
from lfo_cli.wmil.model import BabyConfig, BabyModel
from lfo_cli.wmil.task_base import Task


def build_model(cfg: WMILConfig, task: Task) -> BabyModel:
    bcfg = BabyConfig(obs_dim=task.obs_dim, num_actions=cfg.num_actions, hidden_dim=cfg.hidden_dim,
                      num_layers=cfg.num_layers, num_heads=cfg.num_heads, max_len=task.max_horizon + 1,
                      context_window=cfg.context_window, wm_target=cfg.wm_target)
    return BabyModel(bcfg)


def initial_level(cfg: WMILConfig, task: Task) -> int:
    if cfg.level is not None:
        return task.check_level(cfg.level)
    return 0 if cfg.curriculum else task.num_levels - 1


@dataclass
class Batch:
    obs: torch.Tensor  # (B, T+1, D) observations 0..T (T = after the last action)
    actions: torch.Tensor  # (B, T)
    logp: torch.Tensor  # (B, T) log-prob of the taken action under the rollout policy
    values: torch.Tensor  # (B, T)
    goal: torch.Tensor  # (B, T) goal reward from the parent
    oracle: torch.Tensor | None  # (B, T) the parent's action (-1 = any); only for KL-distill
    episode_success: torch.Tensor  # (B,) bool
    logits: torch.Tensor | None = None  # (B, T, A) with grad (REINFORCE fast path)
    value_g: torch.Tensor | None = None
    h: torch.Tensor | None = None


def rollout(model: BabyModel | None, env: VecEnv, gen: torch.Generator, *, need_oracle: bool = False,
            keep_graph: bool = False, greedy: bool = False) -> Batch:
    """Roll out ``env.num_envs`` episodes at once. ``model=None`` is the uniform random policy.

    For step ``t`` the policy sees observations ``0..t`` (causal transformer). With ``keep_graph``
    the final step's forward pass over the whole episode runs with autograd on, and its logits are
    reused by the update (the policy is unchanged within a rollout, so they equal the no-grad ones).
    """
    obs0 = env.reset()
    b, t_len, a_n = env.num_envs, env.horizon, env.task.num_actions
    obs = torch.empty(b, t_len + 1, obs0.shape[1])
    obs[:, 0] = obs0
    actions = torch.empty(b, t_len, dtype=torch.long)
    logp = torch.zeros(b, t_len)
    values = torch.zeros(b, t_len)
    goal = torch.empty(b, t_len)
    oracle = torch.empty(b, t_len, dtype=torch.long) if need_oracle else None
    logits_g = value_g = h_g = None
    for t in range(t_len):
        if model is None:
            logits_t = torch.zeros(b, a_n)
        elif keep_graph and t == t_len - 1:
            logits_g, value_g, h_g = model(obs[:, :t_len].clone())
            logits_t, values[:, t] = logits_g[:, -1].detach(), value_g[:, -1].detach()
            values[:, :t] = value_g[:, :t].detach()
        else:
            with torch.no_grad():
                lg, v, _ = model(obs[:, : t + 1])
            logits_t, values[:, t] = lg[:, -1], v[:, -1]
        log_probs = F.log_softmax(logits_t, dim=-1)
        if greedy:
            a = log_probs.argmax(-1)
        else:
            a = torch.multinomial(log_probs.exp(), 1, generator=gen).squeeze(1)
        actions[:, t] = a
        logp[:, t] = log_probs.gather(1, a.view(-1, 1)).squeeze(1)
        if oracle is not None:
            oracle[:, t] = env.task.oracle_action(env.state, t)
        res = env.step(a)
        obs[:, t + 1] = res.obs
        goal[:, t] = res.goal
    return Batch(obs, actions, logp, values, goal, oracle, env.episode_success.clone(), logits_g, value_g, h_g)

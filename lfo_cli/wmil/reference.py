"""The design's per-step loop, kept as the throughput baseline (``benchmarks/wmil_throughput.py``).

One ``SymbolicEnv``, python ``State`` objects, one model call per env step (plus the design's separate
world-model forward, ``predict_next_state_raw``), an ``Experience`` list, and one REINFORCE update
per ``rollout_steps`` experiences -- the loop of the design's plan (phase 4.3) with REINFORCE
(phase 4.2) and the same BabyModel, task rules and losses as the vectorised trainer.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from lfo_cli.wmil.config import WMILConfig
from lfo_cli.wmil.envs import RewardVector, SymbolicEnv, make_task
from lfo_cli.wmil.parents import DeterministicParent
from lfo_cli.wmil.trainer import build_model


@dataclass
class Experience:
    state: torch.Tensor
    action: int
    reward: RewardVector
    next_state: torch.Tensor
    done: bool
    log_prob: float


class PerStepTrainer:
    """REINFORCE with the design's per-step loop (single-step tasks, T = 1 per episode)."""

    def __init__(self, cfg: WMILConfig):
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        torch.manual_seed(cfg.seed)
        self.cfg = cfg
        self.task = make_task(cfg.task, cfg.num_actions)
        level = cfg.level if cfg.level is not None else self.task.num_levels - 1
        self.env = SymbolicEnv(self.task, DeterministicParent(self.task), level, torch.Generator().manual_seed(cfg.seed))
        self.model = build_model(cfg, self.task)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=cfg.lr)
        self.baseline = 0.0
        self.buffer: list[Experience] = []
        self.env_steps = 0
        self.successes: list[bool] = []

    def collect(self, num_steps: int) -> None:
        state = self.env.reset()
        prev_action, prev_reward = None, 0.0
        for _ in range(num_steps):
            state_tensor = state.to_tensor(prev_action, prev_reward).view(1, 1, -1)
            with torch.no_grad():
                logits, _, h = self.model(state_tensor)
                dist = torch.distributions.Categorical(logits=logits[0, -1])
                action = dist.sample()
                log_prob = dist.log_prob(action)
                # the design computes the world-model prediction in its own forward pass per step
                _, _, h2 = self.model(state_tensor)
                self.model.predict_next(h2, action.view(1, 1))
            next_state, reward, done, info = self.env.step(int(action))
            self.env_steps += 1
            self.buffer.append(Experience(state_tensor[0, 0], int(action), reward,
                                          next_state.to_tensor(int(action), reward.goal), done, float(log_prob)))
            if done:
                self.successes.append(info["episode_success"])
                state, prev_action, prev_reward = self.env.reset(), None, 0.0
            else:
                state, prev_action, prev_reward = next_state, int(action), reward.goal

    def update(self) -> dict[str, float]:
        cfg = self.cfg
        states = torch.stack([e.state for e in self.buffer]).unsqueeze(1)
        actions = torch.tensor([e.action for e in self.buffer])
        rewards = torch.tensor([e.reward.scalar(cfg.reward_weights) for e in self.buffer])
        next_states = torch.stack([e.next_state for e in self.buffer])
        logits, _, h = self.model(states)
        dist = torch.distributions.Categorical(logits=logits[:, 0])
        log_probs = dist.log_prob(actions)
        self.baseline = cfg.baseline_decay * self.baseline + (1 - cfg.baseline_decay) * rewards.mean().item()
        policy_loss = -(log_probs * (rewards - self.baseline)).mean()
        entropy = dist.entropy().mean()
        wm_loss = F.mse_loss(self.model.predict_next(h[:, 0], actions), next_states)
        loss = policy_loss - cfg.entropy_coef * entropy + cfg.wm_coef * wm_loss
        self.optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.max_grad_norm)
        self.optimizer.step()
        self.buffer = []
        return {"entropy": entropy.item(), "world_model": wm_loss.item()}

    def train_step(self) -> None:
        """One update = ``num_envs`` env steps collected one at a time (same batch size as VecEnv)."""
        self.collect(self.cfg.num_envs)
        self.update()

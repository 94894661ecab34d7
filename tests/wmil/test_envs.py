"""Environment rules: fix 1 (time-limit-only termination), oracle = 1.0, random ~ 1/A, prompts."""

from __future__ import annotations

import math

import pytest
import torch

from lfo_cli.errors import LfoError
from lfo_cli.wmil.envs import TASKS, State, SymbolicEnv, VecEnv, make_task
from lfo_cli.wmil.parents import DeterministicParent
from lfo_cli.wmil.task_base import DIFFICULTY_CONFIGS


def run_episodes(task, level, policy, n=2048, seed=0):
    gen = torch.Generator().manual_seed(seed)
    env = VecEnv(task, DeterministicParent(task), n, gen, level)
    env.reset()
    dones = []
    while True:
        a = policy(env, gen)
        res = env.step(a)
        dones.append(res.done)
        if res.done:
            break
    return env, dones


def oracle(env, gen):
    a = env.task.oracle_action(env.state, env.t)
    return torch.where(a < 0, torch.zeros_like(a), a)


def uniform(env, gen):
    return torch.randint(0, env.task.num_actions, (env.num_envs,), generator=gen)


@pytest.mark.parametrize("name", list(TASKS))
@pytest.mark.parametrize("num_actions", [2, 5, 8, 16, 20])
def test_oracle_policy_succeeds_everywhere(name, num_actions):
    task = make_task(name, num_actions)
    for level in range(task.num_levels):
        env, _ = run_episodes(task, level, oracle, n=512)
        assert env.episode_success.all(), (name, num_actions, level)


@pytest.mark.parametrize("name", ["pattern_echo", "sequence_next", "conditional", "delayed_recall"])
@pytest.mark.parametrize("num_actions", [2, 8, 16])
def test_random_policy_succeeds_about_one_in_a(name, num_actions):
    task = make_task(name, num_actions)
    level = task.num_levels - 1
    n = 8192
    env, _ = run_episodes(task, level, uniform, n=n, seed=1)
    p = 1 / num_actions
    rate = env.episode_success.float().mean().item()
    assert abs(rate - p) < 5 * math.sqrt(p * (1 - p) / n), (name, num_actions, rate)


@pytest.mark.parametrize("name", list(TASKS))
def test_episode_ends_only_on_time_limit(name):
    """Fix 1: success does not end the episode; done is true exactly at the horizon."""
    task = make_task(name, 8)
    for level in range(task.num_levels):
        env, dones = run_episodes(task, level, oracle, n=64)
        assert dones == [False] * (task.horizon(level) - 1) + [True]
        with pytest.raises(RuntimeError):
            env.step(torch.zeros(64, dtype=torch.long))


def test_key_door_success_mid_episode_does_not_terminate():
    task = make_task("key_door", 8)
    gen = torch.Generator().manual_seed(0)
    env = VecEnv(task, DeterministicParent(task), 32, gen, 0)
    env.reset()
    first_success_t = None
    for _ in range(task.horizon(0)):
        res = env.step(oracle(env, gen))
        if first_success_t is None and res.success.any():
            first_success_t = env.t
            assert not res.done  # success logged, episode continues
    assert first_success_t is not None and first_success_t < task.horizon(0)
    assert res.done and env.episode_success.all()
    # reward only once: the door is already open afterwards
    assert task.transition(env.state, oracle(env, gen), env.t)[1].sum() == 0


def test_single_env_wrapper_follows_fix1_and_reports_success_separately():
    task = make_task("delayed_recall", 4)
    env = SymbolicEnv(task, DeterministicParent(task), level=1, generator=torch.Generator().manual_seed(3))
    state = env.reset()
    cue = state.attributes["cue"]
    infos = []
    for t in range(task.horizon(1)):
        action = cue if t == task.levels[1]["delay"] else 0
        state, reward, done, info = env.step(action)
        infos.append((done, info["success"], reward.goal))
    assert [d for d, _, _ in infos] == [False, False, False, True]
    assert infos[-1][1] is True and infos[-1][2] == 1.0


def test_delayed_recall_query_observation_hides_the_cue():
    """Why reactive fails: the query-step observation is the same for every cue."""
    task = make_task("delayed_recall", 8)
    state = torch.stack([torch.arange(8), torch.full((8,), 3)], dim=1)
    obs = task.encode(state, 3, torch.zeros(8, dtype=torch.long), torch.zeros(8))
    assert torch.equal(obs, obs[:1].expand_as(obs))
    assert not torch.equal(task.encode(state, 0, torch.zeros(8, dtype=torch.long), torch.zeros(8))[0],
                           task.encode(state, 0, torch.zeros(8, dtype=torch.long), torch.zeros(8))[1])


def test_state_tensor_and_prompt():
    task = make_task("conditional", 8)
    s = State(task, {"shape": 1, "color": 0, "size": 1, "num_conditions": 3})
    x = s.to_tensor()
    assert x.shape == (task.obs_dim,) and x.sum() == len(task.obs_cards)
    assert '"shape": 1' in s.to_prompt() and "conditional" in s.to_prompt()


def test_difficulty_configs_and_bad_input():
    assert set(DIFFICULTY_CONFIGS) >= {"pattern_echo", "sequence_next", "conditional"}
    assert DIFFICULTY_CONFIGS["pattern_echo"][0]["target_range"] == (0, 4)
    with pytest.raises(LfoError, match="unknown task"):
        make_task("nope", 8)
    with pytest.raises(LfoError, match="num-actions"):
        make_task("pattern_echo", 1)
    task = make_task("pattern_echo", 8)
    assert task.sample(1000, 0, torch.Generator().manual_seed(0)).max() == 4  # level 0: 5 targets

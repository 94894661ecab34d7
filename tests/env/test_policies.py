"""Reference policies: honesty (no hidden knowledge), noise injection, trajectory JSONL."""

from __future__ import annotations

import pytest

from lfo_cli.env import (
    Episode,
    NoiseConfig,
    PublicTask,
    make_policy,
    read_trajectories_jsonl,
    run_episode,
    world_model_example,
    write_trajectories_jsonl,
)
from lfo_cli.env.policies import departments_for_goal
from lfo_cli.errors import LfoError


def test_non_oracle_policies_see_only_the_public_task(world):
    task = world.tasks["val"][0]
    for name in ("probe", "prior", "random"):
        policy = make_policy(name, world)
        run_episode(Episode(world), policy, task)
        assert isinstance(policy.task, PublicTask) and not hasattr(policy.task, "steps")
    oracle = make_policy("oracle", world)
    run_episode(Episode(world), oracle, task)
    assert oracle.task is task


def test_goal_routing_matches_the_hidden_chain(world):
    for t in world.all_tasks():
        assert departments_for_goal(t.goal, t.industry) == [s.department for s in t.steps]


def test_noise_degrades_gracefully_and_is_reproducible(world):
    tasks = world.tasks["val"]
    ep = Episode(world)
    clean = sum(run_episode(ep, "probe", t, i).reward for i, t in enumerate(tasks)) / len(tasks)
    noise = NoiseConfig(epsilon=0.15, field_dropout=0.1)
    noisy = [run_episode(ep, make_policy("probe", world, noise), t, i) for i, t in enumerate(tasks)]
    rate = sum(tr.reward for tr in noisy) / len(tasks)
    assert clean == 1.0 and 0.2 < rate < 1.0
    again = [run_episode(ep, make_policy("probe", world, noise), t, i) for i, t in enumerate(tasks)]
    assert [t.to_dict() for t in noisy] == [t.to_dict() for t in again]
    assert noisy[0].policy == "probe+noise"
    with pytest.raises(LfoError):
        NoiseConfig(epsilon=1.5)
    with pytest.raises(LfoError, match="unknown policy"):
        make_policy("greedy", world)


def test_copy_slips_are_errors_followed_by_the_intended_action(world):
    ep = Episode(world)
    tasks = world.tasks["train"][:60]
    base = NoiseConfig(epsilon=0.1, field_dropout=0.1)
    slipped = NoiseConfig(epsilon=0.1, field_dropout=0.1, slip=0.5)
    plain = [run_episode(ep, "prior", t, i, noise=base) for i, t in enumerate(tasks)]
    noisy = [run_episode(ep, "prior", t, i, noise=slipped) for i, t in enumerate(tasks)]
    # slip 0 draws nothing: trajectories are unchanged by the option's existence
    assert [t.to_dict() for t in plain] == [t.to_dict() for t in run_episode_all(ep, tasks, NoiseConfig(0.1, 0.1, 0.0))]
    kinds, n = set(), 0
    for traj in noisy:
        for i in traj.info.get("slipped_steps", []):
            n += 1
            bad, nxt = traj.transitions[i], traj.transitions[i + 1]
            assert bad.action["tool"] == nxt.action["tool"] and bad.action != nxt.action
            assert bad.category != "success"  # a slip never completes a step by accident
            kinds.add(bad.category)
    assert n >= 20 and {"unknown_number", "not_found"} <= kinds and kinds & {"auth_failure", "routing_violation"}
    # the intended actions are the same as without slips where no epsilon step intervened
    assert sum(t.info["success"] for t in noisy) >= 0.7 * sum(t.info["success"] for t in plain)
    with pytest.raises(LfoError, match="slip"):
        NoiseConfig(slip=-0.1)


def test_random_replacement_steps_are_recorded(world, monkeypatch):
    from lfo_cli.env import policies

    # every replacement action is recognisable, so the recorded indices can be checked against it
    monkeypatch.setattr(policies.RandomPolicy, "random_action",
                        lambda self, rng, values=None: policies.Action("search_company", {"company_name": "Zz Marker"}))
    ep = Episode(world)
    tasks = world.tasks["train"][:60]
    clean = [run_episode(ep, "prior", t, i, noise=NoiseConfig(field_dropout=0.1)) for i, t in enumerate(tasks)]
    noisy = [run_episode(ep, "prior", t, i, noise=NoiseConfig(epsilon=0.2)) for i, t in enumerate(tasks)]
    assert all("random_steps" not in t.info for t in clean)
    marked = 0
    for traj in noisy:
        steps = traj.info.get("random_steps", [])
        assert steps == [k for k, tr in enumerate(traj.transitions) if tr.action["args"] == {"company_name": "Zz Marker"}]
        marked += len(steps)
    assert marked >= 10


def run_episode_all(ep, tasks, noise):
    return [run_episode(ep, "prior", t, i, noise=noise) for i, t in enumerate(tasks)]


def test_trajectory_jsonl_roundtrip(world, tmp_path):
    ep = Episode(world)
    trajs = [run_episode(ep, p, t, i) for i, t in enumerate(world.tasks["val"][:10]) for p in ("oracle", "random")]
    path = write_trajectories_jsonl(tmp_path / "traj.jsonl", trajs)
    back = read_trajectories_jsonl(path)
    assert [t.to_dict() for t in back] == [t.to_dict() for t in trajs]
    for a, b in zip(trajs, back, strict=True):
        for x, y in zip(a.transitions, b.transitions, strict=True):
            assert world_model_example(x) == world_model_example(y)
    path.write_text(path.read_text() + '{"task_id": 1}\n')
    with pytest.raises(LfoError, match="traj.jsonl:21"):
        read_trajectories_jsonl(path)


def test_random_policy_is_plausible_but_hopeless(world):
    ep = Episode(world)
    trajs = [run_episode(ep, "random", t, i) for i, t in enumerate(world.tasks["train"][:100])]
    assert all(tr.info["turns"] == 16 for tr in trajs)
    cats = {c for tr in trajs for t in tr.transitions for c in [t.category]}
    assert {"directory", "form", "auth_failure", "routing_violation", "unknown_number", "bad_request"} <= cats
    assert sum(tr.reward for tr in trajs) / len(trajs) < 0.05


def test_field_extra_adds_one_unasked_field_and_draws_nothing_when_off(world):
    from lfo_cli.env import catalogue as cat

    ep = Episode(world)
    tasks = [t for t in world.tasks["train"] if t.difficulty in (1, 2)][:80]
    base = NoiseConfig(epsilon=0.1, field_dropout=0.1)
    plain = [run_episode(ep, "prior", t, i, noise=base) for i, t in enumerate(tasks)]
    # field_extra 0 draws nothing: trajectories equal those made before the option existed
    off = [run_episode(ep, "prior", t, i, noise=NoiseConfig(epsilon=0.1, field_dropout=0.1, field_extra=0.0))
           for i, t in enumerate(tasks)]
    assert [t.to_dict() for t in off] == [t.to_dict() for t in plain]

    def form(traj):
        return next((tr.action["args"]["fields"] for tr in traj.transitions if tr.action["tool"] == "auth_info_form"), None)

    clean = [form(run_episode(ep, "prior", t, i)) for i, t in enumerate(tasks)]
    extra = [form(run_episode(ep, "prior", t, i, noise=NoiseConfig(field_extra=0.5))) for i, t in enumerate(tasks)]
    grown = 0
    for c, e in zip(clean, extra, strict=True):
        assert e[: len(c)] == c  # the policy's own fields first, unchanged
        if len(e) > len(c):
            grown += 1
            assert len(e) == len(c) + 1 and e[-1] in cat.FIELDS and e[-1] not in c
    assert 0.3 * len(tasks) < grown < 0.7 * len(tasks)  # about half the forms
    with pytest.raises(LfoError, match="field_extra"):
        NoiseConfig(field_extra=1.5)

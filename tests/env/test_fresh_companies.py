"""RL tasks on companies generated afresh for a run (data.fresh_companies / data.fresh_company_share): a
positive-control candidate of the reading study. Each test builds its own world, since the pool adds companies
to it."""

from __future__ import annotations

import dataclasses
from collections import Counter
from types import SimpleNamespace

import pytest

from lfo_cli.env import generate_world, run_episode, write_world
from lfo_cli.env.episode import Episode
from lfo_cli.env.task_pools import heldout_pool, training_tasks, validation_pool
from lfo_cli.env.world import normalize_name, normalize_phone
from lfo_cli.errors import LfoError


def _world():
    return generate_world(num_companies=40, num_train_tasks=50, num_val_tasks=10, heldout_fraction=0.25, seed=5)


def _data(**kw):
    base = dict(fresh_tasks=600, companies=None, min_difficulty=1, max_difficulty=2, difficulty_weights={1: 1.0, 2: 3.0},
                max_tasks=None, fresh_companies=0, fresh_company_share=0.0)
    return SimpleNamespace(**{**base, **kw})


def _eval():
    return SimpleNamespace(fresh_tasks=200, difficulties=[1, 2], num_tasks=30, heldout_tasks=40, heldout_difficulties=[2])


@pytest.mark.parametrize(("companies", "share"), [(12, 0.5), (5, 0.25), (30, 0.8)])
def test_fresh_companies_make_their_share_of_the_pool_in_its_difficulty_mix(companies, share):
    world = _world()
    names = {normalize_name(c.name) for c in world.companies.values()}
    phones = {normalize_phone(d.phone) for c in world.companies.values() for d in c.departments}
    train_ids, held_ids = world.train_company_ids, world.heldout_company_ids
    base = training_tasks(_world(), _data(), seed=7)

    pool = training_tasks(world, _data(fresh_companies=companies, fresh_company_share=share), seed=7)
    added = [t for t in pool if t.company_id in world.added_company_ids]
    assert len(world.added_company_ids) == companies
    assert {t.company_id for t in added} <= world.added_company_ids
    assert len(added) / len(pool) == pytest.approx(share, abs=0.01)
    # the rest is the pool without fresh companies, in the same mix
    assert sorted(t.task_id for t in pool if t not in added) == sorted(t.task_id for t in base)
    mix = Counter(t.difficulty for t in added)
    assert set(mix) == {1, 2} and mix[2] / len(added) == pytest.approx(0.75, abs=0.02)
    # none of the world's companies: no shared id, name or number; the world's own sets are unchanged
    for cid in world.added_company_ids:
        c = world.companies[cid]
        assert normalize_name(c.name) not in names
        assert not {normalize_phone(d.phone) for d in c.departments} & phones
    assert world.train_company_ids == train_ids and world.heldout_company_ids == held_ids
    assert any(d.exception for cid in world.added_company_ids for d in world.companies[cid].departments)


def test_the_pool_is_seeded_and_validation_never_sees_the_fresh_companies():
    a, b, c = _world(), _world(), _world()
    data = _data(fresh_companies=10, fresh_company_share=0.5)
    pool_a = training_tasks(a, data, seed=3)
    assert [t.to_dict() for t in training_tasks(b, data, seed=3)] == [t.to_dict() for t in pool_a]
    assert sorted(training_tasks(c, data, seed=4)[0].to_dict().items()) != sorted(pool_a[0].to_dict().items())
    plain = _world()
    training_tasks(plain, _data(), seed=3)
    val = validation_pool(a, _eval())
    assert not {t.company_id for t in val} & a.added_company_ids
    assert [t.to_dict() for t in val] == [t.to_dict() for t in validation_pool(plain, _eval())]
    assert [t.to_dict() for t in heldout_pool(a, _eval())] == [t.to_dict() for t in heldout_pool(plain, _eval())]


def test_an_episode_on_a_fresh_company_plays_like_any_other():
    """The probe reference policy reads each needed department's reply and solves every task; it can only
    do that if the environment finds the added company by name and its departments by number."""
    world = _world()
    pool = training_tasks(world, _data(fresh_companies=6, fresh_company_share=0.5), seed=1)
    added = [t for t in pool if t.company_id in world.added_company_ids][:20]
    episode = Episode(world)
    rewards = [run_episode(episode, "probe", t, rollout_seed=i).reward for i, t in enumerate(added)]
    assert rewards == [1.0] * len(added)


def test_added_companies_are_checked_and_never_written(tmp_path):
    world = _world()
    c = next(iter(world.companies.values()))
    with pytest.raises(LfoError, match="company id already"):
        world.add_companies([c])
    with pytest.raises(LfoError, match="company name already"):
        world.add_companies([dataclasses.replace(c, id="x1")])
    other = generate_world(num_companies=3, num_train_tasks=0, num_val_tasks=0, heldout_fraction=0.0, seed=99)
    d0 = dataclasses.replace(other.companies["c0000"].departments[0], phone=c.departments[0].phone)
    clash = dataclasses.replace(other.companies["c0000"], id="x2", name="Nowhere Unique Holdings",
                                departments=(d0, *other.companies["c0000"].departments[1:]))
    with pytest.raises(LfoError, match="phone number already"):
        world.add_companies([clash])
    from lfo_cli.env.directory import close_names

    close_names(world, "zzz unknown")  # builds the name index the lookups cache
    training_tasks(world, _data(fresh_companies=2, fresh_company_share=0.2), seed=0)
    name = normalize_name(world.companies[sorted(world.added_company_ids)[0]].name)
    assert name in close_names(world, name)
    with pytest.raises(LfoError, match="added for one run"):
        write_world(world, tmp_path / "w")


@pytest.mark.parametrize(("kw", "msg"), [({"fresh_companies": -1}, ">= 0"),
                                         ({"fresh_companies": 3, "fresh_company_share": 1.0}, r"\[0, 1\)"),
                                         ({"fresh_companies": 3}, "go together"),
                                         ({"fresh_company_share": 0.3}, "go together")])
def test_the_recipe_rejects_a_half_set_or_out_of_range_pair(kw, msg):
    from lfo_cli.train.recipe_config import world_sections

    with pytest.raises(LfoError, match=msg):
        world_sections("customer_service")["data"](**kw)


def test_rl_plays_the_added_companies_in_a_copy_and_evaluation_in_the_world_as_it_is():
    """Evaluation must be the baseline's to the byte: its world gains no company (a misspelt name's "Did you
    mean" would list them), while the training environments find every added company's tasks."""
    from lfo_cli.env.plugin import CustomerServiceWorld

    world = CustomerServiceWorld(_world())
    names = dict(world.data.name_index)
    pools = world.task_pools(_data(fresh_companies=8, fresh_company_share=0.5), _eval(), seed=2)
    added = [t for t in pools.train if t.company_id in world.rl_data.added_company_ids]
    assert added and not world.data.added_company_ids and world.data.name_index == names
    assert all(t.company_id not in world.data.companies for t in added)
    plain = CustomerServiceWorld(_world())
    plain_pools = plain.task_pools(_data(), _eval(), seed=2)
    assert [t.to_dict() for t in pools.validation] == [t.to_dict() for t in plain_pools.validation]
    assert [t.to_dict() for t in pools.heldout] == [t.to_dict() for t in plain_pools.heldout]
    assert plain.rl_data is plain.data
    env = world.env_factory(seed=0, max_turns=16, options={})()
    assert added[0].company_name in env.reset(task_id=added[0].task_id, row_seed=0)
    with pytest.raises(LfoError, match="unknown task id"):
        world.episode(16).reset(added[0].task_id)

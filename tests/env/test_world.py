"""World generation: determinism, held-out separation, guarantees, file validation."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from lfo_cli.env import catalogue as cat
from lfo_cli.env import generate_world, load_world, write_world
from lfo_cli.env.world import normalize_phone
from lfo_cli.env.world_files import DATA_FILES
from lfo_cli.errors import LfoError


def _digest(d: Path) -> dict[str, str]:
    return {n: hashlib.sha256((d / n).read_bytes()).hexdigest() for n in DATA_FILES}


@pytest.mark.parametrize("seed", [1, 42, 2024])
def test_same_seed_gives_byte_identical_files(tmp_path, seed):
    kw = dict(num_companies=30, num_train_tasks=60, num_val_tasks=20, heldout_fraction=0.3, seed=seed)
    write_world(generate_world(**kw), tmp_path / "a")
    write_world(generate_world(**kw), tmp_path / "b")
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b")


def test_different_seeds_differ(tmp_path):
    kw = dict(num_companies=30, num_train_tasks=60, num_val_tasks=20, heldout_fraction=0.3)
    write_world(generate_world(seed=5, **kw), tmp_path / "a")
    write_world(generate_world(seed=6, **kw), tmp_path / "b")
    da, db = _digest(tmp_path / "a"), _digest(tmp_path / "b")
    for name in DATA_FILES:
        assert da[name] != db[name], name


@pytest.mark.parametrize("seed,n,frac", [(3, 100, 0.5), (9, 37, 0.2), (17, 8, 0.75)])
def test_heldout_companies_never_in_train_or_val(seed, n, frac):
    w = generate_world(num_companies=n, num_train_tasks=200, num_val_tasks=50, heldout_fraction=frac, seed=seed)
    assert len(w.heldout_company_ids) == max(1, round(n * frac))
    for split in ("train", "val"):
        assert all(t.company_id not in w.heldout_company_ids for t in w.tasks[split])
    assert w.tasks["transfer"] and all(t.company_id in w.heldout_company_ids for t in w.tasks["transfer"])
    # stratified: held-out companies cover every industry present among >= 2 companies of it
    inds = {w.companies[c].industry for c in w.heldout_company_ids}
    if n >= 2 * len(cat.INDUSTRIES) and frac >= 0.5:
        assert inds == set(cat.INDUSTRIES)


def test_world_invariants(world):
    phones = [normalize_phone(d.phone) for c in world.companies.values() for d in c.departments]
    assert len(phones) == len(set(phones)), "phone numbers must be unique across the world"
    names = [c.name.casefold() for c in world.companies.values()]
    assert len(names) == len(set(names))
    for c in world.companies.values():
        assert sum(d.exception for d in c.departments) >= 1
        assert sum(not d.exception for d in c.departments) >= 2
        for d in c.departments:
            spec = cat.DEPARTMENT_SPECS[(c.industry, d.name)]
            if d.exception:  # the prior is never sufficient for an exception department
                assert not set(d.requires) <= set(spec.requires)
            else:
                assert set(d.requires) == set(spec.requires)
            for f, alts in d.alternatives.items():
                assert f in d.requires and not set(alts) & set(d.requires)
    for t in world.all_tasks():
        chain = [world.companies[t.company_id].department(s.department) for s in t.steps]
        assert len(t.steps) == {1: 1, 2: 1, 3: 2, 4: 1, 5: 3}[t.difficulty]
        assert [s.requires_reference for s in t.steps] == [i > 0 for i in range(len(t.steps))]
        exc = [d.exception for d in chain]
        assert any(exc) == (t.difficulty in (2, 5))
        missing = {f for d in chain for f in d.requires if f not in t.user_values}
        assert bool(missing) == (t.difficulty == 4)
        for d in chain:  # every missing field has an alternative route the user can satisfy
            for f in d.requires:
                if f not in t.user_values:
                    assert all(a in t.user_values for a in d.alternatives[f])
        assert t.company_name in t.goal and all(s.service.lower() in t.goal.lower() for s in t.steps)


def test_difficulties_balanced(world):
    for split, n in (("train", 500), ("val", 100), ("transfer", 100)):
        counts = [sum(t.difficulty == d for t in world.tasks[split]) for d in range(1, 6)]
        assert counts == [n // 5] * 5


def test_catalogue_is_consistent():
    for ind, (_, depts) in cat.INDUSTRIES.items():
        services = [s for d in depts for s in d.services]
        assert len(set(services)) == len(services)
        for a in services:
            assert not any(a != b and a in b for b in services), (ind, a)
        for d in depts:
            assert d.alternatives, (ind, d.name)
            assert set(d.requires) <= cat.FIELD_SET
            for f, alts in d.alternatives:
                assert f in d.requires and not set(alts) & set(d.requires)


def test_roundtrip_through_files(tmp_path, small_world):
    write_world(small_world, tmp_path)
    back = load_world(tmp_path)
    assert back.companies == small_world.companies
    assert back.tasks == small_world.tasks
    assert back.heldout_company_ids == small_world.heldout_company_ids


def test_write_refuses_to_overwrite(tmp_path, small_world):
    write_world(small_world, tmp_path)
    with pytest.raises(LfoError, match="--force"):
        write_world(small_world, tmp_path)
    write_world(small_world, tmp_path, force=True)


@pytest.mark.parametrize("name", ["companies.jsonl", "tasks_train.jsonl", "tasks_val.jsonl", "tasks_transfer.jsonl"])
@pytest.mark.parametrize("damage", ["truncate_mid_line", "drop_last_line", "garbage_line", "delete", "edit_value"])
def test_corrupt_files_are_named(tmp_path, small_world, name, damage):
    write_world(small_world, tmp_path)
    p = tmp_path / name
    data = p.read_bytes()
    if damage == "truncate_mid_line":
        p.write_bytes(data[: len(data) - 7])
    elif damage == "drop_last_line":
        p.write_bytes(b"".join(data.splitlines(keepends=True)[:-1]))
    elif damage == "garbage_line":
        p.write_bytes(data + b'{"task_id": oops\n')
    elif damage == "delete":
        p.unlink()
    else:
        p.write_bytes(data.replace(b'"difficulty": 1', b'"difficulty": 9', 1).replace(b'"phone": "8', b'"phone": "9', 1))
    with pytest.raises(LfoError) as exc:
        load_world(tmp_path)
    assert name in str(exc.value)


def test_bad_manifest_and_missing_dir(tmp_path, small_world):
    with pytest.raises(LfoError, match="not found"):
        load_world(tmp_path / "nope")
    write_world(small_world, tmp_path)
    (tmp_path / "manifest.json").write_text("{ not json")
    with pytest.raises(LfoError, match="manifest.json"):
        load_world(tmp_path)


@pytest.mark.parametrize(
    "kw,msg",
    [
        (dict(num_companies=0), "num-companies"),
        (dict(num_train_tasks=-1), "num-train-tasks"),
        (dict(heldout_fraction=1.0), "heldout-fraction"),
        (dict(heldout_fraction=-0.1), "heldout-fraction"),
        (dict(exception_rate=0.0), "exception-rate"),
        (dict(num_companies=1, heldout_fraction=0.5, num_transfer_tasks=5), "holds out no company"),
        (dict(heldout_fraction=0.0, num_transfer_tasks=5), "held-out"),
    ],
)
def test_invalid_configs_raise(kw, msg):
    base = dict(num_companies=10, num_train_tasks=10, num_val_tasks=5, heldout_fraction=0.5, seed=0)
    with pytest.raises(LfoError, match=msg):
        generate_world(**{**base, **kw})


def test_tiny_and_no_heldout_worlds_work():
    w = generate_world(num_companies=1, num_train_tasks=10, num_val_tasks=5, heldout_fraction=0.0, seed=4)
    assert not w.tasks["transfer"] and not w.heldout_company_ids
    assert {t.difficulty for t in w.tasks["train"]} == {1, 2, 3, 4, 5}


def test_committed_default_world_is_in_sync_with_the_generator(tmp_path):
    """data/ is what `lfo gen-env ... --seed 0` writes today (regenerate it when the generator changes)."""
    repo_data = Path(__file__).resolve().parents[2] / "data"
    if not (repo_data / "manifest.json").exists():
        pytest.skip("no committed data/ in this checkout")
    world = load_world(repo_data)
    assert len(world.companies) == 100 and [len(world.tasks[s]) for s in ("train", "val", "transfer")] == [500, 100, 100]
    write_world(generate_world(100, 500, 100, 0.5, 0), tmp_path)
    assert _digest(tmp_path) == _digest(repo_data)


@pytest.mark.parametrize("seed", [5, 17])
def test_fresh_training_tasks_stay_on_training_companies_and_off_the_splits(world, seed):
    from lfo_cli.env.tasks import fresh_training_tasks

    fresh = fresh_training_tasks(world, 250, seed=seed)
    assert len(fresh) == 250 and {t.split for t in fresh} == {"sft"}
    assert {t.company_id for t in fresh} <= world.train_company_ids
    assert {t.difficulty for t in fresh} == {1, 2, 3, 4, 5}
    assert [t.difficulty for t in fresh].count(1) == 50  # balanced like the world's own splits
    assert not {t.task_id for t in fresh} & set(world.task_by_id)
    existing = {(t.company_id, t.goal, t.user_name) for t in world.all_tasks()}
    assert sum((t.company_id, t.goal, t.user_name) in existing for t in fresh) <= 2  # new customers and goals
    assert [t.to_dict() for t in fresh_training_tasks(world, 250, seed=seed)] == [t.to_dict() for t in fresh]
    assert fresh_training_tasks(world, 250, seed=seed + 1)[0].to_dict() != fresh[0].to_dict()
    with pytest.raises(LfoError, match="own split"):
        fresh_training_tasks(world, 5, seed=seed, split="val")


def test_registered_fresh_tasks_resolve_by_id_without_touching_the_splits(world):
    from lfo_cli.env.episode import Episode
    from lfo_cli.env.tasks import fresh_training_tasks

    before = {s: len(ts) for s, ts in world.tasks.items()}
    fresh = fresh_training_tasks(world, 20, seed=3, split="rl_test")
    with pytest.raises(LfoError, match="unknown task id"):
        world.task(fresh[0].task_id)
    world.register_tasks(fresh)
    try:
        assert world.task(fresh[7].task_id) is fresh[7]
        assert {s: len(ts) for s, ts in world.tasks.items()} == before
        assert Episode(world).reset(fresh[7].task_id) == fresh[7].prompt()
        with pytest.raises(LfoError, match="already in the world"):
            world.register_tasks(fresh[:1])
    finally:
        for t in fresh:
            world.task_by_id.pop(t.task_id, None)

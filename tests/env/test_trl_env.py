"""TRL compatibility: the tool surface TRL 1.16 extracts, JSON schemas, reset/get_reward contract."""

from __future__ import annotations

import inspect
import sys

import pytest

from lfo_cli.env import CustomerServiceEnv, make_env_factory, parse_reply, write_world
from lfo_cli.errors import LfoError

TOOLS = {"search_company", "auth_info_form", "make_phone_call"}


def test_public_function_set_is_exactly_the_tools_plus_protocol():
    # the exact filter TRL's GRPOTrainer applies to environment classes
    public = {n for n, _ in inspect.getmembers(CustomerServiceEnv, predicate=inspect.isfunction) if not n.startswith("_")}
    assert public == TOOLS | {"reset", "get_reward"}


def test_json_schema_for_every_tool():
    from transformers.utils import get_json_schema

    for name in TOOLS:
        schema = get_json_schema(getattr(CustomerServiceEnv, name))
        fn = schema["function"]
        assert fn["name"] == name and fn["description"]
        params = fn["parameters"]
        assert set(params["required"]) == set(params["properties"]) and all(
            p.get("description") for p in params["properties"].values())
    assert get_json_schema(CustomerServiceEnv.auth_info_form)["function"]["parameters"]["properties"]["fields"] == {
        "type": "array", "items": {"type": "string"},
        "description": get_json_schema(CustomerServiceEnv.auth_info_form)["function"]["parameters"]["properties"]["fields"]["description"]}
    assert get_json_schema(CustomerServiceEnv.make_phone_call)["function"]["parameters"]["properties"]["auth_info"]["type"] == "object"


def test_env_module_imports_no_heavy_library():
    import subprocess

    code = ("import sys; import lfo_cli.env, lfo_cli.env.policies, lfo_cli.env.check;"
            "print([m for m in ('torch','transformers','trl','pandas','numpy','matplotlib') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_factory_reset_ignores_other_columns_and_seeds_generations_differently(world, tmp_path):
    factory = make_env_factory(world, seed=5)
    task = next(t for t in world.tasks["train"] if t.difficulty == 5)
    row = {"prompt": [{"role": "user", "content": "hi"}], "task_id": task.task_id, "difficulty": 5}
    envs = [factory() for _ in range(8)]  # one group of G=8 generations
    prompts = {e.reset(**row) for e in envs}
    assert prompts == {task.prompt()}
    assert task.goal in task.prompt() and task.user_name in task.prompt()
    company = world.companies[task.company_id]
    dept = company.department(task.steps[1].department)
    for d in company.departments:
        for f in d.requires:
            assert f not in task.prompt()
    replies = [e.make_phone_call(dept.phone, {}) for e in envs]
    assert len(set(replies)) >= 5, "the G generations of a group get different reply RNGs"
    assert all(parse_reply(r).category == "auth_failure" for r in replies)
    # reproducible: a fresh factory with the same seed gives the same replies
    again = make_env_factory(world, seed=5)
    envs2 = [again() for _ in range(8)]
    for e in envs2:
        e.reset(**row)
    assert [e.make_phone_call(dept.phone, {}) for e in envs2] == replies
    # an explicit rollout_seed column wins
    a, b = factory(), factory()
    a.reset(**row, rollout_seed=3)
    b.reset(**row, rollout_seed=3)
    assert a.make_phone_call(dept.phone, {}) == b.make_phone_call(dept.phone, {})
    # the factory also loads a data directory
    write_world(world, tmp_path)
    assert make_env_factory(tmp_path)().reset(task_id=task.task_id) == task.prompt()


def test_oracle_through_the_tool_methods_gets_reward(world):
    env = make_env_factory(world)()
    task = next(t for t in world.tasks["val"] if t.difficulty == 4)
    env.reset(task_id=task.task_id)
    company = world.companies[task.company_id]
    dept = company.department(task.steps[0].department)
    assert parse_reply(env.search_company(task.company_name)).category == "directory"
    need = [f for f in dept.requires if f in task.user_values]
    need += [a for f in dept.requires if f not in task.user_values for a in dept.alternatives[f]]
    env.auth_info_form(need)
    obs = env.make_phone_call(dept.phone, {f: task.user_values[f] for f in need})
    assert parse_reply(obs).category == "success"
    assert env.get_reward() == 1.0 and env.done and env.info["success"] and len(env.transitions) == 3


def test_tool_methods_survive_wrong_types_and_trl_style_errors(world):
    env = make_env_factory(world)()
    env.reset(task_id=world.tasks["val"][0].task_id)
    for call in (lambda: env.search_company(None), lambda: env.auth_info_form("account_number"),
                 lambda: env.make_phone_call(8005550100, "pin=1234"), lambda: env.make_phone_call("800", {"pin": [1]})):
        assert parse_reply(call()).category == "bad_request"
    with pytest.raises(TypeError):  # TRL calls fn(**arguments) and catches this itself
        env.make_phone_call(phone_number="800-555-0100")
    assert env.get_reward() == 0.0 and env.info["invalid_tool_calls"] == 4


def test_reset_needs_a_task_id(world):
    env = make_env_factory(world)()
    with pytest.raises(LfoError, match="task_id"):
        env.reset(prompt="x")
    with pytest.raises(LfoError, match="unknown task"):
        env.reset(task_id="nope")
    with pytest.raises(LfoError, match="unknown option"):
        make_env_factory(world, temperature=1.0)


def test_a_row_seed_makes_replies_independent_of_the_episodes_before(world):
    """What an exact resume needs: with a row_seed, an instance that already played other rows replies as a
    fresh one does; the G generations of a group (instances) still differ."""
    task = next(t for t in world.tasks["train"] if t.difficulty == 5)
    company = world.companies[task.company_id]
    phone = company.department(task.steps[1].department).phone
    row = {"task_id": task.task_id, "row_seed": 7}

    def replies(played_before: int, with_row_seed: bool = True) -> list[str]:
        factory = make_env_factory(world, seed=5)
        envs = [factory() for _ in range(4)]
        for e in envs:
            for _ in range(played_before):
                e.reset(task_id=task.task_id, row_seed=99) if with_row_seed else e.reset(task_id=task.task_id)
            e.reset(**row) if with_row_seed else e.reset(task_id=task.task_id)
        return [e.make_phone_call(phone, {}) for e in envs]

    fresh = replies(0)
    assert replies(3) == fresh  # as after a resume: the instances' earlier episodes do not matter
    assert len(set(fresh)) >= 3  # generations differ
    assert replies(3, with_row_seed=False) != replies(0, with_row_seed=False)  # without it they would

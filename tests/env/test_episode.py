"""Episode semantics, reference-policy levels, and the never-raise contract under fuzzing."""

from __future__ import annotations

import random
from collections import defaultdict

from lfo_cli.env import FIELDS, MAX_TURNS, TOOLS, Episode, parse_reply, run_episode
from lfo_cli.env.tool_calls import TOOL_PARAMS


def _success_by_difficulty(world, policy, tasks):
    ep = Episode(world)
    out = defaultdict(list)
    for i, t in enumerate(tasks):
        out[t.difficulty].append(run_episode(ep, policy, t, rollout_seed=i).reward)
    return {d: sum(v) / len(v) for d, v in sorted(out.items())}, sum(map(sum, out.values())) / len(tasks)


def test_reference_policy_levels_on_100_companies(world):
    tasks = world.all_tasks()  # 700 tasks: train, val and transfer companies
    oracle, oracle_all = _success_by_difficulty(world, "oracle", tasks)
    probe, probe_all = _success_by_difficulty(world, "probe", tasks)
    prior, prior_all = _success_by_difficulty(world, "prior", tasks)
    rand, rand_all = _success_by_difficulty(world, "random", tasks)
    assert oracle == {d: 1.0 for d in range(1, 6)}
    assert probe == {d: 1.0 for d in range(1, 6)}, "the task must be learnable from observations alone"
    assert rand_all < 0.05
    assert rand_all < prior_all < oracle_all
    # the prior is right where companies follow it and wrong where they deviate or the user lacks a field
    assert prior[1] == 1.0 and prior[3] == 1.0
    assert prior[2] == 0.0 and prior[4] == 0.0 and prior[5] < 0.5


def test_reference_levels_hold_on_other_world_sizes():
    from lfo_cli.env import generate_world

    for seed, n in ((21, 14), (99, 40)):
        w = generate_world(num_companies=n, num_train_tasks=100, num_val_tasks=20, heldout_fraction=0.3, seed=seed)
        tasks = w.all_tasks()
        assert _success_by_difficulty(w, "oracle", tasks)[1] == 1.0
        assert _success_by_difficulty(w, "probe", tasks)[1] == 1.0
        r, p = _success_by_difficulty(w, "random", tasks)[1], _success_by_difficulty(w, "prior", tasks)[1]
        assert r < 0.05 and r < p < 1.0


def test_probe_fits_in_turn_budget_at_every_difficulty(world):
    ep = Episode(world)
    for t in world.tasks["train"]:
        info = run_episode(ep, "probe", t).info
        assert info["turns"] <= 2 + 2 * len(t.steps) <= MAX_TURNS


def _d(world, difficulty, split="val"):
    return next(t for t in world.tasks[split] if t.difficulty == difficulty)


def test_one_form_rule(world):
    ep = Episode(world)
    ep.reset(_d(world, 1), 0)
    first = ep.step("auth_info_form", {"fields": ["account_number", "email"]})
    assert ep.transitions[-1].category == "form" and "unavailable" in first
    again = ep.step("auth_info_form", {"fields": ["pin"]})
    assert ep.transitions[-1].category == "bad_request"
    assert parse_reply(again).category == "bad_request" and "only one form" in again
    assert ep.info()["forms_submitted"] == 1


def test_form_reports_unavailable_and_invalid_names(world):
    t = _d(world, 4)
    ep = Episode(world)
    ep.reset(t, 0)
    obs = ep.step("auth_info_form", {"fields": [t.unavailable[0], "Date of Birth", "mothers_maiden_name"]})
    p = parse_reply(obs)
    assert p.category == "form" and t.unavailable[0] in p.unavailable
    assert "date_of_birth" in p.fields and "mothers_maiden_name" in obs
    # a form naming no known field is a bad request and does not use up the one form
    ep.reset(t, 1)
    assert parse_reply(ep.step("auth_info_form", {"fields": ["password"]})).category == "bad_request"
    assert ep.step("auth_info_form", {"fields": ["email"]}).startswith("{")


def test_turn_limit(world):
    ep = Episode(world)
    ep.reset(_d(world, 1), 0)
    for _ in range(MAX_TURNS):
        assert not ep.done
        ep.step("search_company", {"company_name": "Nobody Inc"})
    assert ep.done and ep.reward() == 0.0
    obs = ep.step("search_company", {"company_name": "Nobody Inc"})
    assert parse_reply(obs).category == "bad_request" and "turn limit" in obs
    assert len(ep.transitions) == MAX_TURNS and ep.info()["calls_after_done"] == 1


def test_chain_rules_order_references_and_probing(world):
    t = _d(world, 3)
    company = world.companies[t.company_id]
    first, second = (company.department(s.department) for s in t.steps)
    ep = Episode(world)
    ep.reset(t, 0)
    # probing the second department names its fields AND the reference it will need from the first
    p = parse_reply(ep.step("make_phone_call", {"phone_number": second.phone, "auth_info": {}}))
    assert p.category == "auth_failure" and set(second.requires) | {"reference_code"} == p.fields
    assert p.departments == (first.name,)
    values = dict(t.user_values)
    assert ep.step("auth_info_form", {"fields": sorted(set(first.requires) | set(second.requires))}).startswith("{")
    # calling the second department first, fully verified, is an order violation pointing to the first
    p = parse_reply(ep.step("make_phone_call", {"phone_number": second.phone, "auth_info": values}))
    assert (p.category, p.detail, p.departments, p.phones) == ("routing_violation", "out_of_order", (first.name,),
                                                               (first.phone,))
    s = parse_reply(ep.step("make_phone_call", {"phone_number": first.phone, "auth_info": values}))
    assert s.category == "success" and not ep.done
    # without (or with a wrong) reference code the second step fails, naming the reference
    p = parse_reply(ep.step("make_phone_call", {"phone_number": second.phone, "auth_info": {**values, "reference_code": "REF-WRONG1"}}))
    assert p.category == "auth_failure" and p.fields == {"reference_code"}
    # repeating the first step is "already done" and points on to the second
    p = parse_reply(ep.step("make_phone_call", {"phone_number": first.phone, "auth_info": values}))
    assert (p.detail, p.departments) == ("already_done", (second.name,))
    ok = parse_reply(ep.step("make_phone_call", {"phone_number": second.phone.replace("-", " "),
                                                 "auth_info": {**values, "Reference": s.reference_codes[0].lower()}}))
    assert ok.category == "success" and ep.done and ep.reward() == 1.0
    info = ep.info()
    assert info["success"] and not info["department_order_correct"] and info["order_violations"] == 1
    assert not info["auth_before_first_call"] and info["forms_submitted"] == 1


def test_alternative_route_and_unavailable_markers(world):
    t = _d(world, 4)
    dept = world.companies[t.company_id].department(t.steps[0].department)
    lacking = next(f for f in dept.requires if f not in t.user_values)
    ep = Episode(world)
    ep.reset(t, 0)
    p = parse_reply(ep.step("make_phone_call", {"phone_number": dept.phone, "auth_info": {}}))
    assert p.fields == set(dept.requires) and p.alternatives == set(dept.alternatives[lacking]) - set(dept.requires) \
        or set(dept.alternatives[lacking]) <= p.alternatives
    base = {f: t.user_values[f] for f in dept.requires if f in t.user_values}
    p = parse_reply(ep.step("make_phone_call", {"phone_number": dept.phone, "auth_info": {**base, lacking: None}}))
    assert p.category == "auth_failure" and lacking in p.fields
    alt = {f: t.user_values[f] for f in dept.alternatives[lacking]}
    ok = ep.step("make_phone_call", {"phone_number": dept.phone, "auth_info": {**base, **alt, lacking: "unavailable"}})
    assert parse_reply(ok).category == "success" and ep.reward() == 1.0


def test_wrong_values_and_other_company(world):
    t = _d(world, 1)
    dept = world.companies[t.company_id].department(t.steps[0].department)
    ep = Episode(world)
    ep.reset(t, 0)
    wrong = {f: "0000" for f in dept.requires}
    assert parse_reply(ep.step("make_phone_call", {"phone_number": dept.phone, "auth_info": wrong})).fields == set(dept.requires)
    other = next(c for c in world.companies.values() if c.id != t.company_id)
    p = parse_reply(ep.step("make_phone_call", {"phone_number": other.departments[0].phone, "auth_info": {}}))
    assert (p.category, p.detail) == ("routing_violation", "wrong_company")
    assert parse_reply(ep.step("make_phone_call", {"phone_number": "+1 (999) 555-0000", "auth_info": {}})).category == "unknown_number"


def test_search(world):
    t = _d(world, 1)
    ep = Episode(world)
    ep.reset(t, 0)
    obs = ep.step("search_company", {"company_name": "  " + t.company_name.upper() + "!"})
    p = parse_reply(obs)
    company = world.companies[t.company_id]
    assert p.category == "directory" and p.departments == tuple(d.name for d in company.departments)
    for d in company.departments:
        for f in d.requires:
            assert f not in obs  # the directory never shows requirements
    miss = ep.step("search_company", {"company_name": t.company_name[:-2]})
    assert parse_reply(miss).category == "not_found" and t.company_name in miss


def test_replies_reproducible_per_rollout_seed_and_varied_across(world):
    t = _d(world, 5)

    def texts(rs):
        return [x.observation for x in run_episode(Episode(world), "probe", t, rollout_seed=rs).transitions]

    assert texts(4) == texts(4)
    assert len({tuple(texts(rs)) for rs in range(8)}) > 4


def test_progress_shaping_is_off_by_default(world):
    t = _d(world, 5)
    ep = Episode(world)
    tr = run_episode(ep, "prior", t)
    if not tr.info["success"]:
        assert tr.reward == 0.0
    shaped = Episode(world, progress_shaping=0.5)
    shaped.reset(t, 0)
    assert shaped.reward() == 0.0


def test_field_credit_rewards_the_share_of_required_fields_right(world):
    """field_credit: a failed episode earns credit x (best share of the current step's fields right) / steps."""
    import pytest

    task = next(t for t in world.tasks["val"] if t.difficulty == 1
                and len(world.companies[t.company_id].department(t.steps[0].department).requires) >= 2)
    dept = world.companies[task.company_id].department(task.steps[0].department)
    values = {f: task.user_values[f] for f in dept.requires}
    one_wrong = {**values, dept.requires[0]: "0000000000"}
    share = 1 - 1 / len(dept.requires)

    plain, credited = Episode(world), Episode(world, field_credit=0.5)
    for ep in (plain, credited):
        ep.reset(task, 0)
        ep.step("make_phone_call", {"phone_number": dept.phone, "auth_info": {}})  # nothing right
    assert credited.reward() == 0.0
    for ep in (plain, credited):
        ep.step("make_phone_call", {"phone_number": dept.phone, "auth_info": one_wrong})
        ep.step("make_phone_call", {"phone_number": dept.phone, "auth_info": {}})  # a worse call later
    assert not credited.success and plain.reward() == 0.0
    assert credited.reward() == pytest.approx(0.5 * share)  # the best call counts
    credited.step("make_phone_call", {"phone_number": dept.phone, "auth_info": values})
    assert credited.success and credited.reward() == 1.0
    with pytest.raises(ValueError, match="field_credit"):
        Episode(world, field_credit=1.0)


# ------------------------------------------------------------------ fuzzing: 10,000 calls
# A seeded generator of the call shapes an agent can produce: well-formed calls with wrong values, calls with missing
# or extra keys, and arbitrary nested garbage (None, bools, huge ints, NaN, 20,000-character strings, lone surrogates,
# lists and dicts of these) in the tool name or the arguments. Plain `random` draws 10,000 calls in well under a second;
# hypothesis spent ~25 s generating the same shapes. tests/models/test_tokenizer.py keeps hypothesis where shrinking helps.
_ODD_STRINGS = ["800-555-0100", "reference_code", "account_number", "", "Acme Bank", "\x00\ud7ff", " ", "\u00e9" * 3]


def _scalar(rng):
    kind = rng.randrange(7)
    if kind == 0:
        return rng.choice([None, True, False])
    if kind == 1:
        return rng.choice([0, -1, 1, 2**63, -(2**70), rng.randrange(-10**6, 10**6)])
    if kind == 2:
        return rng.choice([0.0, -0.0, float("nan"), float("inf"), float("-inf"), rng.uniform(-1e9, 1e9)])
    if kind == 3:
        return "".join(chr(rng.choice([rng.randrange(32, 127), rng.randrange(0, 0x2FFFF)])) for _ in range(rng.randrange(31)))
    if kind == 4:
        return rng.choice("a9\x00\u00e9-") * 20_000
    return rng.choice(_ODD_STRINGS)


def _garbage(rng, depth=0):
    kind = rng.randrange(5) if depth < 2 else 0
    if kind == 3:
        return [_garbage(rng, depth + 1) for _ in range(rng.randrange(5))]
    if kind == 4:
        keys = [rng.choice([*FIELDS, "", "x", "\x00"]) for _ in range(rng.randrange(5))]
        return {k: _garbage(rng, depth + 1) for k in keys}
    return _scalar(rng)


def _text(rng, n):
    return "".join(rng.choice("0123456789-abcXYZ \u00e9") for _ in range(rng.randrange(n + 1)))


def _random_call(rng, phones, names):
    shape = rng.randrange(4)
    if shape < 2:  # the keys of some tool, with values right or wrong, sent to that tool or another
        tool = rng.choice(TOOLS)
        if tool == "search_company":
            args = {"company_name": rng.choice(names) if rng.random() < 0.7 else _garbage(rng)}
        elif tool == "auth_info_form":
            fields = [rng.choice([*FIELDS, "pw"]) for _ in range(rng.randrange(6))]
            args = {"fields": fields if rng.random() < 0.7 else _garbage(rng)}
        else:
            phone = rng.choice(phones) if rng.random() < 0.7 else rng.choice([_text(rng, 14), _garbage(rng)])
            auth = {rng.choice([*FIELDS, "reference_code"]): rng.choice([_text(rng, 12), rng.randrange(-99, 10**9), None])
                    for _ in range(rng.randrange(6))}
            args = {"phone_number": phone, "auth_info": auth if rng.random() < 0.7 else _garbage(rng)}
        if rng.random() < 0.2:
            tool = rng.choice([*TOOLS, None]) or _garbage(rng)
        return tool, args
    tool = rng.choice([*TOOLS, *TOOLS, None]) or _garbage(rng)
    if shape == 2:  # missing or extra keys
        return tool, {rng.choice(["company_name", "fields", "phone_number", "auth_info", "x"]): _garbage(rng)
                      for _ in range(rng.randrange(4))}
    return tool, _garbage(rng)


def _is_valid_shape(tool, args) -> bool:
    if not isinstance(tool, str) or tool not in TOOL_PARAMS or not isinstance(args, dict) or set(args) != set(TOOL_PARAMS[tool]):
        return False
    if tool == "search_company":
        return isinstance(args["company_name"], str) and 0 < len(args["company_name"].strip()) <= 200
    if tool == "auth_info_form":
        f = args["fields"]
        return isinstance(f, list) and 0 < len(f) <= 32 and all(isinstance(x, str) and len(x) <= 64 for x in f)
    a = args["auth_info"]
    return isinstance(args["phone_number"], str) and len(args["phone_number"]) <= 64 and isinstance(a, dict) and all(
        isinstance(k, str) and (v is None or (isinstance(v, str) and len(v) <= 200) or (isinstance(v, int) and not isinstance(v, bool)))
        for k, v in a.items())


CALLS_PER_EPISODE = 10
EPISODES = 1000  # 1,000 x 10 = 10,000 tool calls


def test_fuzz_ten_thousand_calls_never_raise(world):
    rng = random.Random(20261129)
    phones = sorted(d.phone for c in world.companies.values() for d in c.departments)[:50]
    names = sorted(c.name for c in world.companies.values())[:20]
    tasks = world.tasks["val"]
    calls = invalid = 0
    categories = set()
    for _ in range(EPISODES):
        max_turns = rng.choice([16, 40])
        ep = Episode(world, max_turns=max_turns)
        ep.reset(rng.choice(tasks), rng.randrange(10**6))
        for _ in range(CALLS_PER_EPISODE):
            tool, args = _random_call(rng, phones, names)
            was_done = ep.done
            obs = ep.step(tool, args)
            calls += 1
            assert isinstance(obs, str) and obs
            if was_done or not _is_valid_shape(tool, args):
                invalid += 1
                assert parse_reply(obs).category == "bad_request", (tool, args, obs)
                if not was_done:
                    assert ep.transitions[-1].category == "bad_request"
            else:
                category = ep.transitions[-1].category
                assert category in {"directory", "not_found", "form", "auth_failure", "success",
                                    "routing_violation", "unknown_number", "bad_request"}
                assert parse_reply(obs).category == category
                categories.add(category)
        assert ep.info()["internal_errors"] == 0
        assert len(ep.transitions) <= max_turns
    assert calls == EPISODES * CALLS_PER_EPISODE
    assert 1000 < invalid < calls  # both kinds were drawn often
    assert {"directory", "not_found", "form", "auth_failure", "unknown_number"} <= categories, categories


def test_step_before_reset_and_odd_objects(world):
    ep = Episode(world)
    assert parse_reply(ep.step("search_company", {"company_name": "x"})).category == "bad_request"

    class Evil:
        def __repr__(self):
            raise RuntimeError("no")

        def __eq__(self, other):
            raise RuntimeError("no")

        __hash__ = object.__hash__

    ep.reset(world.tasks["val"][0], 0)
    for tool, args in [(Evil(), {}), ("search_company", Evil()), ("search_company", {Evil(): 1}),
                       ("make_phone_call", {"phone_number": "800", "auth_info": {"pin": Evil()}}),
                       ("auth_info_form", {"fields": (x for x in "abc")})]:
        assert parse_reply(ep.step(tool, args)).category == "bad_request"
    assert ep.info()["invalid_tool_calls"] == 5


def test_form_cap_rules_out_asking_for_everything(world):
    from lfo_cli.env.catalogue import MAX_FORM_FIELDS

    ep = Episode(world)
    ep.reset(_d(world, 1), 0)
    obs = ep.step("auth_info_form", {"fields": list(FIELDS)})
    assert parse_reply(obs).category == "bad_request" and f"at most {MAX_FORM_FIELDS}" in obs
    assert ep.info()["forms_submitted"] == 0  # a rejected form does not use up the one form
    # ... and every task is solvable within the cap (the oracle's form is what it needs)
    for t in world.all_tasks():
        form = run_episode(ep, "oracle", t).transitions[1]
        assert form.category == "form" and len(form.action["args"]["fields"]) <= MAX_FORM_FIELDS


def test_first_call_records_where_the_first_phone_call_went(world):
    from lfo_cli.env.episode import FIRST_CALL_OUTCOMES

    t = next(t for t in world.tasks["val"] if t.difficulty >= 2)  # several departments: "first" means step 0
    company = world.companies[t.company_id]
    first = company.department(t.steps[0].department)
    later = company.department(t.steps[1].department)
    other = next(c for c in world.companies.values() if c.id != t.company_id).departments[0]
    cases = [("12-34", "invalid_number"), ("+1 (999) 555-0000", "unknown_number"), (other.phone, "other_company"),
             (later.phone, "other_department"), (first.phone, "right_department")]
    assert sorted(o for _, o in cases) == sorted(FIRST_CALL_OUTCOMES)
    ep = Episode(world)
    for phone, outcome in cases:
        ep.reset(t, 0)
        assert ep.info()["first_call"] is None
        ep.step("search_company", {"company_name": t.company_name})
        ep.step("make_phone_call", {"phone_number": phone, "auth_info": {}})
        ep.step("make_phone_call", {"phone_number": first.phone, "auth_info": {}})  # later calls do not change it
        assert ep.info()["first_call"] == outcome, phone


def test_probing_is_counted_and_the_form_checked_against_the_fields_the_rep_named(world):
    """The reading study's mechanism: a call with no identity field that the rep answers by naming what it
    needs is a probe; a form filed after it holds every named field, or not."""
    t = _d(world, 2)
    dept = world.companies[t.company_id].department(t.steps[0].department)
    for form, holds in ((sorted(dept.requires), True), (sorted(dept.requires)[:-1] or ["email"], False)):
        ep = Episode(world)
        ep.reset(t, 0)
        assert parse_reply(ep.step("make_phone_call", {"phone_number": dept.phone, "auth_info": {}})).category == "auth_failure"
        ep.step("auth_info_form", {"fields": form})
        info = ep.info()
        assert info["probe_calls"] == 1 and info["form_holds_named"] is holds
        assert info["departments"] == [dept.name]  # per-department d2 in the reading study's report
    ep = Episode(world)
    ep.reset(t, 0)
    ep.step("auth_info_form", {"fields": sorted(dept.requires)})  # the form first: nothing was named before it
    ep.step("make_phone_call", {"phone_number": dept.phone, "auth_info": {f: "wrong" for f in dept.requires}})
    assert ep.info()["probe_calls"] == 0 and ep.info()["form_holds_named"] is None  # a wrong value is no probe
    by_policy = {p: [run_episode(Episode(world), p, task, rollout_seed=1).info for task in world.tasks["val"][:30]]
                 for p in ("probe", "prior")}
    assert all(i["probe_calls"] >= 1 and i["form_holds_named"] for i in by_policy["probe"])
    assert all(i["probe_calls"] == 0 and i["form_holds_named"] is None for i in by_policy["prior"])
    assert all(i["departments"] == [s.department for s in task.steps]
               for i, task in zip(by_policy["probe"], world.tasks["val"][:30], strict=True))


def test_validation_reports_the_probe_rate_and_forms_that_hold_the_named_fields(world):
    from lfo_cli.env.plugin import CustomerServiceWorld
    from lfo_cli.train.run_metrics import validation_metrics

    episodes = [{"success": s, "turns": 4, "difficulty": 2, "probe_calls": p, "form_holds_named": h}
                for s, p, h in ((True, 1, True), (False, 2, False), (False, 0, None), (True, 0, None))]
    row = validation_metrics({"episodes": episodes, "turns": []}, world=CustomerServiceWorld(world))
    assert row["val/probe_rate"] == 0.5 and row["val/form_holds_named"] == 0.5


def test_the_positive_controls_probe_bonus_pays_a_failed_episode_that_probed_before_its_form(world):
    t = _d(world, 2)
    dept = world.companies[t.company_id].department(t.steps[0].department)
    rewards = {}
    for probe_first in (True, False):
        ep = Episode(world, probe_bonus=0.1)
        ep.reset(t, 0)
        if probe_first:
            ep.step("make_phone_call", {"phone_number": dept.phone, "auth_info": {}})
        ep.step("auth_info_form", {"fields": ["email"]})
        ep.step("make_phone_call", {"phone_number": dept.phone, "auth_info": {}})  # after the form: no bonus
        rewards[probe_first] = (ep.reward(), ep.info()["probed_before_form"])
    assert rewards == {True: (0.1, True), False: (0.0, False)}
    import pytest

    with pytest.raises(ValueError, match="must add up to less than 1"):
        Episode(world, field_credit=0.5, probe_bonus=0.5)

"""Rep replies: every surface form parses back to its meaning; each category is varied."""

from __future__ import annotations

import itertools
import random

import pytest

from lfo_cli.env import Episode, parse_reply, run_episode
from lfo_cli.env import replies as R
from lfo_cli.env.catalogue import FIELDS, REFERENCE_KEY

DEPTS = ["Customer Service", "Billing", "Account Security", "Start Stop Service", "Loyalty Program"]


def _wrapped(core: str):
    """Every persona opener x closer around ``core`` (the agent/company/department vary too)."""
    for style in R.STYLES:
        for opener, closer in itertools.product(R.OPENERS[style], R.CLOSERS[style]):
            o = opener.format(company="Acme Bank", dept="Billing", agent="Priya")
            yield " ".join(p for p in (o, core, closer) if p)


@pytest.mark.parametrize("tid", list(R.AUTH_CORE))
def test_auth_core_every_field_paraphrase_and_join_style(tid):
    tpl = R.AUTH_CORE[tid]
    for f in FIELDS:
        for phrase in R.FIELD_PHRASES[f]:
            for style in ("and", "oxford", "plus"):
                others = [g for g in FIELDS if g != f][:2]
                items = [phrase] + [R.FIELD_PHRASES[g][1] for g in others]
                core = tpl.format(fields=R.join_phrases(items, style))
                for text in _wrapped(core):
                    p = parse_reply(text)
                    assert (p.category, p.template, p.fields) == ("auth_failure", tid, frozenset([f, *others])), text


@pytest.mark.parametrize("alt_tid", list(R.AUTH_ALT))
@pytest.mark.parametrize("ref_tid", [None, *R.AUTH_REF_EXTRA])
def test_auth_alternatives_and_reference_sentences(alt_tid, ref_tid):
    core = R.AUTH_CORE["auth.security"].format(fields="account number and PIN")
    for f in ("pin", "account_number"):
        for phrase in R.FIELD_PHRASES[f]:
            for alt_phrase in R.FIELD_PHRASES["security_answer"]:
                text = core + " " + R.AUTH_ALT[alt_tid].format(field=phrase, alts=f"{alt_phrase} and birth date")
                if ref_tid:
                    text += " " + R.AUTH_REF_EXTRA[ref_tid].format(ref_dept="Start Stop Service")
                for full in _wrapped(text):
                    p = parse_reply(full)
                    want = {"account_number", "pin"} | ({REFERENCE_KEY} if ref_tid else set())
                    assert p.fields == want, full
                    assert p.alternatives == {"security_answer", "date_of_birth"}, full
                    assert p.departments == (("Start Stop Service",) if ref_tid else ()), full


@pytest.mark.parametrize("tid", list(R.AUTH_REF_ONLY))
def test_reference_only_failures(tid):
    for dept in DEPTS:
        for text in _wrapped(R.AUTH_REF_ONLY[tid].format(ref_dept=dept)):
            p = parse_reply(text)
            assert (p.category, p.fields, p.departments, p.template) == ("auth_failure", {REFERENCE_KEY}, (dept,), tid)


@pytest.mark.parametrize("tid", list(R.SUCCESS))
def test_success_templates(tid):
    for service in ("dispute a charge", "reset the debit card PIN", "exchange an item for another size"):
        for text in _wrapped(R.SUCCESS[tid].format(service=service, ref="REF-AB12CD")):
            p = parse_reply(text)
            assert (p.category, p.reference_codes, p.template, p.fields) == ("success", ("REF-AB12CD",), tid, frozenset())


@pytest.mark.parametrize(
    "table,kind",
    [(R.ROUTING_WRONG_DEPT, "wrong_department"), (R.ROUTING_ORDER, "out_of_order"), (R.ROUTING_DONE, "already_done")],
)
def test_routing_templates(table, kind):
    for tid, tpl in table.items():
        for here, target in itertools.permutations(DEPTS, 2):
            for text in _wrapped(tpl.format(here=here, target=target, phone="800-555-0199")):
                p = parse_reply(text)
                assert (p.category, p.detail, p.departments, p.phones, p.template) == (
                    "routing_violation", kind, (target,), ("800-555-0199",), tid), text


def test_wrong_company_and_unknown_number_and_bad_request():
    for tid, tpl in R.ROUTING_COMPANY.items():
        for text in _wrapped(tpl.format(here_company="Summit Wireless", target_company="Acme Bank")):
            p = parse_reply(text)
            assert (p.category, p.detail, p.template) == ("routing_violation", "wrong_company", tid)
    for tid, tpl in R.UNKNOWN.items():
        p = parse_reply(tpl.format(phone="800-123-4567"))
        assert (p.category, p.phones, p.template) == ("unknown_number", ("800-123-4567",), tid)
    for tid, tpl in R.BAD_REQUEST.items():
        p = parse_reply(tpl.format(detail="'fields' must be a list"))
        assert (p.category, p.detail, p.template) == ("bad_request", "'fields' must be a list", tid)


def test_writer_roundtrip_on_random_draws():
    """The writer's own output, thousands of random draws: the parse recovers exactly what was said."""
    rng = random.Random(0)
    w = R.ReplyWriter(rng)
    for _ in range(3000):
        missing = rng.sample(FIELDS, rng.randint(0, 4))
        alts = {f: tuple(rng.sample([g for g in FIELDS if g not in missing], rng.randint(1, 2)))
                for f in missing if rng.random() < 0.5}
        ref_dept = rng.choice([None, *DEPTS])
        if not missing and ref_dept is None:
            ref_dept = "Billing"
        p = parse_reply(w.auth_failure("Acme Bank", "Fraud", missing, alts, ref_dept))
        want_alts = {g for f in missing for g in alts.get(f, ())}
        assert p.category == "auth_failure"
        assert p.fields == set(missing) | ({REFERENCE_KEY} if ref_dept else set())
        assert p.alternatives == want_alts - set(missing)
        ref = w.reference_code()
        s = parse_reply(w.success("Acme Bank", "Fraud", "dispute a charge", ref))
        assert s.category == "success" and s.reference_codes == (ref,)


def test_parse_of_every_episode_observation_matches_its_category(world):
    ep = Episode(world)
    for i, task in enumerate(world.tasks["val"][:60]):
        for policy in ("probe", "random", "prior"):
            traj = run_episode(ep, policy, task, rollout_seed=i)
            for t in traj.transitions:
                assert parse_reply(t.observation).category == t.category, t.observation


def _observations_by_category(world, n_calls: int = 200):
    """Drive phone calls until every category has >= n_calls observations."""
    ep = Episode(world, max_turns=10_000)
    task = next(t for t in world.tasks["val"] if t.difficulty == 3)
    company = world.companies[task.company_id]
    first, second = (company.department(s.department) for s in task.steps)
    other = next(d for d in company.departments if d.name not in (first.name, second.name))
    stranger = next(c for c in world.companies.values() if c.id != company.id).departments[0]
    seen: dict[str, list[str]] = {c: [] for c in R.PHONE_CATEGORIES}
    rs = 0
    while min(len(v) for v in seen.values()) < n_calls:
        ep.reset(task, rollout_seed=rs)
        rs += 1
        ep.step("auth_info_form", {"fields": sorted({f for d in (first, second) for f in d.requires})})
        values = dict(task.user_values)
        calls = [
            (first.phone, {}),  # auth_failure
            (stranger.phone, {}),  # routing_violation (wrong company)
            (other.phone, {f: values.get(f, "") for f in FIELDS}),  # auth ok, wrong department (or auth fail)
            (second.phone, values),  # out of order
            ("800-000-0000", {}),  # unknown number
            (12345, {}),  # bad request
            (first.phone, values),  # success
        ]
        for phone, auth in calls:
            obs = ep.step("make_phone_call", {"phone_number": phone, "auth_info": auth})
            seen[ep.transitions[-1].category].append(obs)
    return seen


def test_each_category_has_at_least_five_surface_forms_over_200_calls(world):
    seen = _observations_by_category(world)
    for category, texts in seen.items():
        first200 = texts[:200]
        templates = {parse_reply(t).template for t in first200}
        assert len(set(first200)) >= 5, category
        assert len(templates) >= 5, (category, templates)


def test_free_text_fallback():
    p = parse_reply("I'll need your account number and your date of birth to verify you.")
    assert p.category == "auth_failure" and p.template is None
    assert p.fields == {"account_number", "date_of_birth"}
    assert parse_reply("").category is None
    assert parse_reply("<|csr|>Done. Your confirmation reference code is REF-ABCDEF.<|/csr|>").category == "success"

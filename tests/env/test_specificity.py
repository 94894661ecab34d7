"""Company subsets for the observation study and the form measures that tell learning from padding."""

from __future__ import annotations

import pytest

from lfo_cli.env import Episode
from lfo_cli.env import catalogue as cat
from lfo_cli.env.specificity import exception_fields, form_specificity
from lfo_cli.env.tasks import fresh_heldout_tasks, fresh_training_tasks, select_companies
from lfo_cli.errors import LfoError


def test_exception_fields_are_the_required_fields_outside_the_prior(world):
    seen = 0
    for company in world.companies.values():
        fields = exception_fields(company)
        assert set(fields) == {d.name for d in company.departments if d.exception}
        for dept, extra in fields.items():
            prior = cat.DEPARTMENT_SPECS[(company.industry, dept)].requires
            assert extra and not set(extra) & set(prior)  # every exception needs a field the prior lacks
            assert set(extra) <= set(company.department(dept).requires)
            seen += 1
    assert seen >= len(world.companies)  # >= 1 exception per company


def test_select_companies_is_the_worlds_choice_and_checked(world):
    four = select_companies(world, 4)
    assert len(four) == 4 and set(four) <= world.train_company_ids
    assert select_companies(world, 4) == four  # drawn with the world's seed: every run gets the same
    assert select_companies(world, None) is None
    some = sorted(world.train_company_ids)[:3]
    assert select_companies(world, list(reversed(some))) == some
    heldout = next(iter(world.heldout_company_ids))
    for bad in (0, len(world.train_company_ids) + 1, [heldout], ["no-such-company"]):
        with pytest.raises(LfoError, match="data.companies"):
            select_companies(world, bad)


def test_fresh_tasks_on_a_subset_and_on_heldout_companies(world):
    subset = select_companies(world, 3)
    tasks = fresh_training_tasks(world, 60, seed=1, split="subset_test", company_ids=subset)
    assert {t.company_id for t in tasks} == set(subset)
    assert {t.difficulty for t in tasks} == {1, 2, 3, 4, 5}
    with pytest.raises(LfoError, match="not training companies"):
        fresh_training_tasks(world, 5, seed=1, split="subset_test", company_ids=[next(iter(world.heldout_company_ids))])
    held = fresh_heldout_tasks(world, 50, seed=1)
    assert {t.company_id for t in held} <= world.heldout_company_ids and len(held) == 50
    assert [t.to_dict() for t in fresh_heldout_tasks(world, 50, seed=1)] == [t.to_dict() for t in held]


def test_episode_info_records_the_forms_fields(world):
    task = next(t for t in world.tasks["val"] if t.difficulty == 2)
    ep = Episode(world)
    ep.reset(task, rollout_seed=0)
    assert ep.info()["form_fields"] == []
    ep.step("auth_info_form", {"fields": ["Date of Birth", "email", "nonsense", "email"]})
    assert ep.info()["form_fields"] == ["date_of_birth", "email"]
    ep.step("auth_info_form", {"fields": ["pin"]})  # a second form is refused and changes nothing
    assert ep.info()["form_fields"] == ["date_of_birth", "email"]


def _d2_and_sibling(world):
    """A d2 task and a d1 task of the same company, plus that company's exception departments."""
    for t in world.tasks["val"]:
        if t.difficulty != 2:
            continue
        sibling = next((s for s in world.all_tasks() if s.company_id == t.company_id and s.difficulty == 1), None)
        if sibling is not None:
            return t, sibling, exception_fields(world.companies[t.company_id])
    raise AssertionError("no d2 task with a d1 sibling")


def test_form_specificity_tells_a_specific_learner_from_a_padder(world):
    d2, d1, extra = _d2_and_sibling(world)
    dept = d2.steps[0].department
    own_field = extra[dept][0]
    prior = list(cat.DEPARTMENT_SPECS[(d2.industry, dept)].requires)
    # Specific: the exception field only when the task goes to the exception department.
    d1_prior = list(cat.DEPARTMENT_SPECS[(d1.industry, d1.steps[0].department)].requires)
    specific = [{"task_id": d2.task_id, "form_fields": [*prior, own_field]}, {"task_id": d1.task_id, "form_fields": d1_prior}]
    # Padding: every exception field of the company in every form.
    pad = sorted({f for fs in extra.values() for f in fs})
    padded = [{"task_id": d2.task_id, "form_fields": [*prior, *pad]}, {"task_id": d1.task_id, "form_fields": [*d1_prior, *pad]}]
    s, p = form_specificity(world, specific), form_specificity(world, padded)
    assert s["exception_field_own"] == 1.0 and s["exception_field_other"] == 0.0
    assert p["exception_field_own"] == 1.0 and p["exception_field_other"] == 1.0
    assert p["form_size"] > s["form_size"]
    # Pairs: the d2 task pairs with its own department (own) and the company's other exceptions (other);
    # the d1 task pairs with every exception department as "other".
    assert s["exception_pairs_own"] == 1 and s["exception_pairs_other"] == (len(extra) - 1) + len(extra)
    none = form_specificity(world, [{"task_id": d2.task_id, "form_fields": []}])
    assert none["exception_field_own"] == 0.0 and "form_size" not in none  # no form: the field was not asked

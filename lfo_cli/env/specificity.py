"""Is a policy's form company-specific? The measures behind "learned the exceptions" vs "pads forms".

A department that is a company *exception* verifies at least one field its industry's prior does not
(its *exception fields*). A policy that learned the exception from the rep's replies asks for that field
when the task goes to that department, and not when the task goes to another department of the same
company. A policy that merely pads every form raises both rates alike.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from lfo_cli import run_record as rr
from lfo_cli.env import catalogue as cat
from lfo_cli.env.world import Company, WorldData


def exception_fields(company: Company) -> dict[str, tuple[str, ...]]:
    """Department name -> the fields it requires beyond its industry's prior (exceptions only)."""
    out = {}
    for d in company.departments:
        if d.exception:
            prior = set(cat.DEPARTMENT_SPECS[(company.industry, d.name)].requires)
            out[d.name] = tuple(f for f in d.requires if f not in prior)
    return out


def form_specificity(world: WorldData, episodes: Iterable[dict[str, Any]]) -> dict[str, float]:
    """Form measures over evaluated episodes (each with ``task_id`` and ``form_fields``).

    - ``form_size``: mean number of fields in the submitted form (episodes with a form);
    - ``exception_field_own``: over (episode, exception department of its company) pairs where the task's
      first department is that department, the share whose form holds one of its exception fields;
    - ``exception_field_other``: the same share where the task goes to another department of the company;
    - ``exception_pairs_own`` / ``exception_pairs_other``: the denominators.

    Episodes without a form count as forms without the field (a policy that stops asking learned nothing).
    """
    sizes, own, other = [], [], []
    for ep in episodes:
        task = world.task(ep["task_id"])
        fields = set(ep.get("form_fields") or ())
        if fields:
            sizes.append(len(fields))
        first = task.steps[0].department
        for dept, extra in exception_fields(world.companies[task.company_id]).items():
            (own if dept == first else other).append(bool(fields & set(extra)))
    out: dict[str, float] = {"exception_pairs_own": float(len(own)), "exception_pairs_other": float(len(other))}
    if sizes:
        out[rr.FORM_SIZE] = sum(sizes) / len(sizes)
    if own:
        out[rr.EXCEPTION_FIELD_OWN] = sum(own) / len(own)
    if other:
        out[rr.EXCEPTION_FIELD_OTHER] = sum(other) / len(other)
    return out

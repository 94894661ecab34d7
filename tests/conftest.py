"""Suite-wide guarantees: nothing reaches a model hub, and caches live in a temp dir."""

from __future__ import annotations

import os

import pytest

# Set before any test imports transformers/datasets: tests must never download anything.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")



@pytest.hookimpl(trylast=True)  # after tests/cluster/conftest.py has marked its tests
def pytest_collection_modifyitems(items):
    """Longest first: the cluster tests, then the modules marked ``slow``, then the rest, each group in
    collection order. xdist's ``--dist loadscope`` hands a free worker the next module in this order, so the
    long modules start early and the two workers finish close together instead of one waiting on the other."""
    items.sort(key=lambda item: 0 if item.get_closest_marker("cluster") else 1 if item.get_closest_marker("slow") else 2)


def pytest_terminal_summary(terminalreporter):
    """How many tests ran against a real SLURM or Ray cluster (tests/cluster), and how many were skipped."""
    ran, skipped = set(), set()
    for outcome in ("passed", "failed", "error", "skipped"):
        for rep in terminalreporter.stats.get(outcome, []):
            if "cluster" not in getattr(rep, "keywords", {}):
                continue
            (skipped if outcome == "skipped" else ran).add(rep.nodeid)
    if ran or skipped:
        terminalreporter.write_line(f"cluster tests (real SLURM and Ray on this machine): {len(ran)} ran, "
                                    f"{len(skipped)} skipped")
    markexpr = terminalreporter.config.option.markexpr or ""
    if "not cluster" in markexpr or "not long" in markexpr:  # deselected in the workers: the count is theirs
        terminalreporter.write_line(f"-m \"{markexpr}\": the tests marked cluster or long were left out; "
                                    "`make test ALL=1` runs them (CI does)")

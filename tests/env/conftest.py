"""Shared worlds for the environment tests (generated in memory; seeds other than 0 on purpose)."""

from __future__ import annotations

import pytest

from lfo_cli.env import generate_world


@pytest.fixture(scope="session")
def world():
    return generate_world(num_companies=100, num_train_tasks=500, num_val_tasks=100, heldout_fraction=0.5, seed=3)


@pytest.fixture(scope="session")
def small_world():
    return generate_world(num_companies=12, num_train_tasks=40, num_val_tasks=10, heldout_fraction=0.25, seed=11)

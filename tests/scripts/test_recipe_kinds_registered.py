"""The recipe kinds are one explicit table (`lfo_cli.recipes.KINDS`): a benchmark, a script or a user's own code
resolves any recipe without importing a config module first (`wm_overhead.py` and `step_time.py` once failed on a
GPU machine with "'kind' must be one of" when kinds registered themselves on import), and listing recipes loads
no training library."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_kind_resolves_in_a_fresh_process_without_a_registering_import():
    code = ("import sys; from lfo_cli import recipes\n"
            "names = recipes.recipe_descriptions(); assert 'trl' not in sys.modules, 'listing recipes imported TRL'\n"
            "kinds = {recipes.load_recipe(n).kind for n in ('dual_lora_micro', 'warmstart_micro', 'wmil/key_door_ppo')}\n"
            "assert kinds == set(recipes.KINDS), kinds\n"
            "for k in recipes.KINDS.values(): assert callable(k.run_function()), k.name\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


def test_an_unknown_kind_names_the_table():
    from lfo_cli import recipes
    from lfo_cli.errors import LfoError

    try:
        recipes.recipe_from_mapping({"kind": "ppo"}, name="x")
    except LfoError as exc:
        assert str(exc) == "recipe 'x': 'kind' must be one of grpo, warmstart, wmil, got 'ppo'"
    else:
        raise AssertionError("an unknown kind was accepted")

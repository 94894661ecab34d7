"""A benchmark or script that loads a recipe registers the recipe kinds first (`lfo_cli.recipes` knows none
by itself): `wm_overhead.py` and `step_time.py` once failed on a GPU machine with "'kind' must be one of"."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def callers() -> list[Path]:
    return sorted(p for d in ("benchmarks", "scripts") for p in (ROOT / d).glob("*.py")
                  if "load_recipe(" in p.read_text())


def registering_imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return found


@pytest.mark.parametrize("path", callers(), ids=lambda p: p.name)
def test_every_recipe_loader_registers_the_grpo_kind(path):
    # importing the warm-start modules registers only `warmstart`: that is how the two benchmarks failed
    assert "lfo_cli.train.recipe_config" in registering_imports(path), (
        f"{path.relative_to(ROOT)} calls load_recipe without importing lfo_cli.train.recipe_config")


def test_there_are_callers_to_check():
    assert {"wm_overhead.py", "step_time.py"} <= {p.name for p in callers()}

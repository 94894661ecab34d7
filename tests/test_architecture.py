"""The package's layers, checked with import-linter (contracts in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_import_contracts_hold():
    # lint-imports reads [tool.importlinter] from pyproject.toml in the working directory.
    done = subprocess.run([sys.executable, "-c", "from importlinter.cli import lint_imports_command; lint_imports_command()"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "0 broken" in done.stdout


def test_an_upward_import_is_caught(tmp_path):
    """The contract is not vacuous: a copy of the package with env importing train breaks it."""
    import shutil

    pkg = tmp_path / "lfo_cli"
    shutil.copytree(ROOT / "lfo_cli", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (pkg / "env" / "upward.py").write_text("from lfo_cli.train import runner  # noqa: F401\n")
    done = subprocess.run([sys.executable, "-c", "from importlinter.cli import lint_imports_command; lint_imports_command()"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert done.returncode != 0 and "lfo_cli.env is not allowed to import lfo_cli.train" in done.stdout


MAX_MODULE_LINES = 450


def test_no_module_is_over_450_lines():
    """Small modules, one concern each: a file that grows past the limit is split by concern."""
    long = {str(p.relative_to(ROOT)): n for p in sorted((ROOT / "lfo_cli").rglob("*.py"))
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"

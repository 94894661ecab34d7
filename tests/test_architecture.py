"""The package's layers, checked with import-linter (contracts in pyproject.toml)."""

from __future__ import annotations

import ast
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


# Third-party libraries that take seconds to import: `lfo --help` must not load them.
HEAVY = {"torch", "transformers", "trl", "peft", "datasets", "matplotlib", "pandas", "scipy", "vllm", "accelerate",
         "submitit", "ray"}  # the last two: optional extras (the slurm and ray launchers)
MAX_FUNCTION_LEVEL_IMPORTS = 20


def _module_file(module: str) -> Path | None:
    base = ROOT / module.replace(".", "/")
    return next((p for p in (base.with_suffix(".py"), base / "__init__.py") if p.is_file()), None)


def _imported(node: ast.Import | ast.ImportFrom) -> list[str]:
    """The modules an import statement loads: `from a.b import c` loads a.b, and a.b.c when c is a module."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    return [node.module] + [f"{node.module}.{a.name}" for a in node.names if _module_file(f"{node.module}.{a.name}")]


class _LoadTimeImports(ast.NodeVisitor):
    """Import statements that run when the module is imported (not those inside its functions)."""

    def __init__(self):
        self.found: list[str] = []

    def visit_FunctionDef(self, node):
        pass

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Import(self, node):
        self.found += _imported(node)

    visit_ImportFrom = visit_Import


def _loads_heavy(module: str, seen: set[str] | None = None) -> bool:
    """Does importing ``module`` import a HEAVY library (through its parents and lfo_cli modules)?"""
    seen = set() if seen is None else seen
    parts = module.split(".")
    for name in (".".join(parts[:i]) for i in range(1, len(parts) + 1)):
        if name in seen:
            continue
        seen.add(name)
        if parts[0] != "lfo_cli":
            return parts[0] in HEAVY
        path = _module_file(name)
        if path is None:
            continue
        visitor = _LoadTimeImports()
        visitor.visit(ast.parse(path.read_text(encoding="utf-8")))
        if any(_loads_heavy(m, seen) for m in visitor.found):
            return True
    return False


def _function_level_lfo_imports() -> list[tuple[str, int, str]]:
    """(file, line, module) of every `lfo_cli` import inside a function body."""
    found = set()
    for path in sorted((ROOT / "lfo_cli").rglob("*.py")):
        for fn in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in ast.walk(fn):
                    if isinstance(node, (ast.Import, ast.ImportFrom)):
                        modules = [m for m in _imported(node) if m.split(".")[0] == "lfo_cli"]
                        if modules:
                            found.add((str(path.relative_to(ROOT)), node.lineno, modules[-1]))
    return sorted(found)


def test_lfo_modules_are_imported_inside_functions_only_at_the_command_boundary():
    """Library modules import lfo_cli at top level: an import inside a function hides a dependency and
    gains nothing when the module it loads is light. The one place for it is the command boundary
    (lfo_cli/commands/, lfo_cli/cli.py), for a module that loads a heavy library when imported, so that
    `lfo --help` and every subcommand's --help import no torch (tests/test_cli.py)."""
    assert _loads_heavy("lfo_cli.train.runner") and not _loads_heavy("lfo_cli.io")  # the check sees both kinds
    found = _function_level_lfo_imports()
    assert len(found) <= MAX_FUNCTION_LEVEL_IMPORTS, found
    outside = [f for f in found if not (f[0].startswith("lfo_cli/commands/") or f[0] == "lfo_cli/cli.py")]
    assert not outside, f"lfo_cli imports inside library functions (move them to the top): {outside}"
    light = [f for f in found if not _loads_heavy(f[2])]
    assert not light, f"function-level imports of modules that load no heavy library (move them to the top): {light}"

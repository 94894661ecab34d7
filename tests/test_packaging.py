"""The `[gpu]` extra has to stay installable with lfo's own pins and inside TRL's supported vLLM range.

A vllm release outside that range (e.g. 0.33, which pins torch 2.14 and transformers < 5.21 while lfo
pins 2.13 / 5.23) makes `pip install lfo[gpu]` unresolvable; these tests catch it.
Resolving the extra needs the package index (`pip install --dry-run '.[gpu]'`, see docs/gpu.md); these
checks read only pyproject.toml and the installed TRL's metadata.
"""

from __future__ import annotations

import importlib.metadata
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def _project() -> dict:
    return tomllib.loads(PYPROJECT.read_text())["project"]


def _requirement(requirements: list[str], name: str) -> Requirement:
    (req,) = [r for r in map(Requirement, requirements) if r.name == name]
    return req


def _bounds(spec: SpecifierSet) -> tuple[Version, Version, bool]:
    """(lowest allowed, upper bound, whether the upper bound itself is allowed) of a range specifier."""
    lows = [Version(s.version) for s in spec if s.operator in (">=", "==")]
    highs = [(Version(s.version.rstrip(".*")), s.operator == "<=") for s in spec if s.operator in ("<", "<=")]
    assert lows and highs, f"{spec} is not a closed range"
    high, inclusive = min(highs)
    return max(lows), high, inclusive


def test_gpu_extra_vllm_is_inside_trls_supported_range():
    ours = _requirement(_project()["optional-dependencies"]["gpu"], "vllm").specifier
    trl = _requirement([r.split(";")[0] for r in importlib.metadata.requires("trl") if r.startswith("vllm")], "vllm").specifier
    low, high, inclusive = _bounds(ours)
    trl_low, trl_high, trl_inclusive = _bounds(trl)
    assert low >= trl_low, f"vllm {ours} starts below TRL's supported {trl}"
    assert high < trl_high or (high == trl_high and (trl_inclusive or not inclusive)), f"vllm {ours} reaches past TRL's {trl}"


def test_gpu_extra_does_not_loosen_the_cpu_torch_pin():
    """The extra adds packages; lfo's base pins (torch 2.13 CPU wheel first, never a CUDA pull) stay."""
    torch = _requirement(_project()["dependencies"], "torch").specifier
    assert "2.13.0" in torch and "2.14.0" not in torch
    assert not any(Requirement(r).name == "torch" for r in _project()["optional-dependencies"]["gpu"])

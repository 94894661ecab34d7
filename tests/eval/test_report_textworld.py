"""`lfo report` on a TextWorld run: a world whose games have one level gets no per-difficulty tables (they would
only repeat the overall success), while a customer-service run keeps them; what to run next names each world's
own study grid."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from lfo_cli.report.build import build_report

REPO = Path(__file__).resolve().parents[2]
PILOT = REPO / "reports" / "studies" / "textworld_cpu" / "pilots" / "textworld_base_s0"


def _index(runs: Path, out: Path) -> str:
    build_report([runs], out)
    return (out / "index.md").read_text(encoding="utf-8")


def test_a_textworld_report_has_no_per_difficulty_tables(tmp_path):
    pytest.importorskip("textworld")
    runs = tmp_path / "runs"
    shutil.copytree(PILOT, runs / PILOT.name)
    text = _index(runs, tmp_path / "report")
    assert "### Transfer to held-out games" in text
    assert "| condition | transfer |" in text and "transfer/d1" not in text and "`transfer/dK`" not in text
    assert "Success by difficulty" not in text
    assert not (tmp_path / "report" / "success_by_difficulty.csv").exists()
    # what to run next names this world's grid, never the customer-service world's
    assert "`lfo ablate --grid textworld_cpu --parallel 2`" in text and "observation_cpu" not in text


def test_the_same_run_as_a_customer_service_run_keeps_them(tmp_path):
    """The one difference is the recorded world: the per-difficulty tables come back."""
    runs = tmp_path / "runs"
    run = runs / PILOT.name
    shutil.copytree(PILOT, run)
    recipe = yaml.safe_load((run / "recipe.yaml").read_text(encoding="utf-8"))
    assert recipe["env"]["kind"] == "textworld"
    recipe["env"]["kind"] = "customer_service"
    (run / "recipe.yaml").write_text(yaml.safe_dump(recipe), encoding="utf-8")
    text = _index(runs, tmp_path / "report")
    assert "| condition | transfer | transfer/d1 |" in text
    assert "Success by difficulty (final evaluation)" in text
    assert "`lfo ablate --grid observation_cpu --parallel 2`" in text and "textworld_cpu" not in text

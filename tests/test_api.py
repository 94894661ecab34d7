"""The public API (`lfo_cli.api`): its names are pinned, each is what docs/api.md says, and importing it loads
no part of the CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NAMES = ["POLICY", "WORLD_MODEL", "CalibrationRule", "DualLoRAConfig", "DualLoRAGRPOTrainer", "LfoError", "LoraSettings",
         "Normaliser", "ObsTokens", "Separate", "Shared", "Stacked", "TokenMean", "TrainerRun", "WorldModelObjective",
         "WorldModelSettings", "attach_dual_lora", "calibrate", "couplings", "objective_class"]


def test_the_exported_names_are_pinned_and_documented():
    import lfo_cli.api as api

    assert api.__all__ == NAMES
    assert all(getattr(api, name) is not None for name in NAMES)
    doc = (ROOT / "docs" / "api.md").read_text()
    assert not [n for n in NAMES if f"`{n}`" not in doc], "docs/api.md must give every exported name"


def test_the_exports_are_the_trainers_own_objects():
    from trl import GRPOConfig, GRPOTrainer

    import lfo_cli.api as api
    from lfo_cli.report.calibration import calibrate
    from lfo_cli.train.trainer import DualLoRAGRPOTrainer

    assert api.DualLoRAGRPOTrainer is DualLoRAGRPOTrainer and issubclass(api.DualLoRAGRPOTrainer, GRPOTrainer)
    assert issubclass(api.DualLoRAConfig, GRPOConfig) and api.calibrate is calibrate
    assert api.objective_class("stacked") is api.Stacked and {"separate", "stacked", "shared"} <= set(api.couplings())


def test_importing_the_api_loads_no_cli():
    code = ("import sys, lfo_cli.api; bad = [m for m in sys.modules if m == 'typer' or m.startswith(('typer.', "
            "'lfo_cli.cli', 'lfo_cli.commands', 'lfo_cli.console'))]; print(bad); sys.exit(1 if bad else 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]

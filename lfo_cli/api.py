"""lfo's world-model loss for your own TRL script: the names to import, and nothing of the CLI.

``from lfo_cli.api import DualLoRAGRPOTrainer, DualLoRAConfig, WorldModelSettings, ...``: TRL's ``GRPOTrainer``
workflow (your model, dataset, reward functions and ``environment_factory``) with ``lambda x world_model_loss``
added (docs/api.md gives each name with an example, docs/training.md the algorithm). Importing this module
loads torch, transformers, TRL and PEFT, never ``lfo_cli.cli`` or ``lfo_cli.commands`` (typer): an
import-linter contract and ``tests/test_api.py`` hold it.

It lives beside the layers rather than in ``lfo_cli.train``: the calibration rule is the report's
(:mod:`lfo_cli.report.calibration`), above training, and ``lfo_cli.train``'s own modules stay importable without
loading TRL.
"""

from __future__ import annotations

from lfo_cli.errors import LfoError
from lfo_cli.report.calibration import CalibrationRule, calibrate
from lfo_cli.train.adapters import POLICY, WORLD_MODEL, LoraSettings, attach_dual_lora
from lfo_cli.train.config import DualLoRAConfig
from lfo_cli.train.normalise import Normaliser, ObsTokens, TokenMean
from lfo_cli.train.objectives import (
    Separate,
    Shared,
    Stacked,
    WorldModelObjective,
    couplings,
    objective_class,
)
from lfo_cli.train.trainer import DualLoRAGRPOTrainer
from lfo_cli.train.trainer_run import TrainerRun
from lfo_cli.train.wm_settings import WorldModelSettings

__all__ = [
    "POLICY",
    "WORLD_MODEL",
    "CalibrationRule",
    "DualLoRAConfig",
    "DualLoRAGRPOTrainer",
    "LfoError",
    "LoraSettings",
    "Normaliser",
    "ObsTokens",
    "Separate",
    "Shared",
    "Stacked",
    "TokenMean",
    "TrainerRun",
    "WorldModelObjective",
    "WorldModelSettings",
    "attach_dual_lora",
    "calibrate",
    "couplings",
    "objective_class",
]

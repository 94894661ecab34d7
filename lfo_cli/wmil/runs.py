"""A WMIL run dir read back: its latest checkpoint and the trained model with its config and task."""

from __future__ import annotations

from pathlib import Path

from lfo_cli import run_record as rr
from lfo_cli.errors import LfoError
from lfo_cli.io import read_json
from lfo_cli.wmil.config import WMILConfig
from lfo_cli.wmil.envs import make_task
from lfo_cli.wmil.model import BabyModel
from lfo_cli.wmil.rollout import build_model
from lfo_cli.wmil.task_base import Task


def latest_checkpoint(run_dir: Path) -> Path | None:
    pointer = Path(run_dir) / "checkpoints" / "latest.json"
    if not pointer.is_file():
        return None
    path = pointer.parent / read_json(pointer)["dir"]
    return path if (path / "model.safetensors").is_file() else None


def load_model_from_run(run_dir: Path) -> tuple[WMILConfig, BabyModel, Task]:
    """The config, trained model and task of a finished (or checkpointed) run."""
    from safetensors.torch import load_file

    run_dir = Path(run_dir)
    if not (run_dir / rr.WMIL_CONFIG_FILE).is_file():
        raise LfoError(f"{run_dir}: not a WMIL run directory (no config.json)")
    cfg = WMILConfig.from_dict(read_json(run_dir / rr.WMIL_CONFIG_FILE))
    ckpt = latest_checkpoint(run_dir)
    if ckpt is None:
        raise LfoError(f"{run_dir}: no checkpoint found")
    task = make_task(cfg.task, cfg.num_actions)
    model = build_model(cfg, task)
    model.load_state_dict(load_file(ckpt / "model.safetensors"))
    return cfg, model.eval(), task

"""Helpers of the launcher tests (imported by path: the suite runs with --import-mode=importlib)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "train"))
from tiny import logged_values  # noqa: E402, F401 - re-exported for the launcher tests

# Steps of the reference grid's cells: a fault comes after checkpoint-2, so 3 steps are still to run when it lands
STEPS = 5


def free_port(span: int = 1) -> int:
    """A port P with P .. P+span-1 free on 127.0.0.1 (checked by binding each)."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port + span > 65000:
            continue
        try:
            for p in range(port, port + span):
                with socket.socket() as t:
                    t.bind(("127.0.0.1", p))
            return port
        except OSError:
            continue
    raise RuntimeError("no free port span on 127.0.0.1")


def write_grid(root: Path, name: str, steps: int = 3, seeds=(0, 1), cells=None) -> Path:
    """A grid of real `lfo train` cells on the tiny model: checkpoints every step, no evaluation."""
    data = {
        "base": "dual_lora_micro", "seeds": list(seeds),
        "set": {"model.name": str(root / "model"), "model.warmstart": None, "data.dir": str(root / "data"),
                "eval.every": 0, "lora.r": 4, "lora.alpha": 8, "trainer.max_steps": steps, "trainer.save_steps": 1,
                "trainer.max_completion_length": 24, "trainer.per_device_train_batch_size": 4,
                "trainer.num_generations": 2, "trainer.logging_steps": 1,
                "wm.stop_without_targets": 0},  # the random tiny model calls no tool: no world-model target
        "cells": cells or [{"id": "base", "wm.coef": 0.5}],
    }
    path = root / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def lfo(*args: str, env: dict | None = None, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "lfo_cli", *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "OMP_NUM_THREADS": "1", "TRL_EXPERIMENTAL_SILENCE": "1", **(env or {})})
    if check and done.returncode != 0:
        raise AssertionError(f"lfo {' '.join(args)} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done


def wait_for(pred, timeout: float = 300, every: float = 0.5, what: str = "condition"):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        value = pred()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def states(runs: Path, env: dict | None = None) -> dict[str, str]:
    """Each cell's state as `lfo ablate --status` reads it, in this process (polling through the CLI would
    start Python, TRL included, twice a second beside the cells)."""
    import csv

    from lfo_cli.ablate.grid import Cell
    from lfo_cli.ablate.launchers import statuses

    with (runs / "runs.csv").open(newline="") as fh:
        cells = [Cell(r["cell_id"], r["condition"], {}, int(r["seed"]), [], Path(r["run_dir"]))
                 for r in csv.DictReader(fh)]
    old = {k: os.environ.get(k) for k in (env or {})}
    os.environ.update(env or {})
    try:
        return {s.cell_id: s.state for s in statuses(cells, runs)}
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

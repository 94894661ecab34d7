"""Synthetic run dirs for the report tests (test fixtures only; never shipped as results).

They follow the formats `lfo train` and `lfo wmil train` write (see docs/report.md): a training run
has recipe.yaml, run.json, metrics.jsonl (train rows every step, val rows every `eval_every`) and
summary.json; a WMIL run has config.json, metrics.jsonl and summary.json.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))


def make_training_run(
    root: Path, name: str, *, seed: int, coef: float, jump_at: float | None, steps: int = 20,
    tasks_per_step: int = 100, eval_every: int = 1, high: float = 0.95, transfer: dict | None = None,
    extra: dict | None = None, complete: bool = True, grad: bool = True,
) -> Path:
    """Validation success is 0.05 before `jump_at` tasks and `high` from then on (None: never jumps)."""
    run = root / name
    run.mkdir(parents=True)
    cfg = {"kind": "grpo", "seed": seed, "model": {"name": "micro", "warmstart": "warmstart_micro"},
           "lora": {"r": 16, "alpha": 32}, "wm": {"coef": float(coef), "predict": "phone", "coupling": "separate",
                                                  "schedule": "joint", "grad_probe_every": 10},
           "trainer": {"max_steps": steps, "logging_steps": 1}}
    for dotted, value in (extra or {}).items():
        node = cfg
        *path, last = dotted.split(".")
        for k in path:
            node = node.setdefault(k, {})
        node[last] = value
    (run / "recipe.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    (run / "run.json").write_text(json.dumps({"seed": seed, "config": cfg, "recipe": "synthetic", "kind": "grpo"}))
    rows = []
    for step in range(0, steps + 1):
        tasks = step * tasks_per_step
        if step > 0:
            acc = 1 - math.exp(-step / 8) if coef > 0 else 0.1
            row = {"step": step, "tasks_seen": tasks, "losses/policy": 1.0 / step, "losses/total": 1.0 / step + coef,
                   "wm/token_acc": acc, "reward": 0.1 * step}
            if grad:
                row.update({"grad_norm/policy": 1.0 + 0.01 * step, "grad_norm/wm": 0.5 if coef else 0.0,
                            "grad_norm/policy_from_wm": 0.0})
            rows.append(row)
        if step % eval_every == 0:
            succ = high if (jump_at is not None and tasks >= jump_at) else 0.05
            val = {"step": step, "tasks_seen": tasks, "val/success": succ, "val/turns": 4.0,
                   "val/auth_before_call": succ, "val/calls_per_task": 2.0 - succ}
            for d in range(1, 6):
                val[f"val/success/d{d}"] = max(0.0, succ - 0.1 * (d - 1))
            rows.append(val)
    _write_jsonl(run / "metrics.jsonl", rows)
    if complete:
        (run / "summary.json").write_text(json.dumps({"status": "complete", "steps": steps}))
    if transfer:
        (run / "transfer_eval.json").write_text(json.dumps({"splits": {k: {"success": v, "n": 50}
                                                                       for k, v in transfer.items()}}))
    return run


def make_wmil_run(root: Path, name: str, *, seed: int, wm_coef: float, rise: float, logs: int = 10) -> Path:
    run = root / name
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"task": "pattern_echo", "seed": seed, "wm_coef": wm_coef,
                                                 "algorithm": "reinforce", "log_every": 50}))
    rows = []
    for i in range(1, logs + 1):
        rows.append({"step": 50 * i, "charts/env_steps": 3200 * i, "charts/success": min(1.0, rise * i),
                     "losses/entropy": 2.0 - 0.1 * i})
    _write_jsonl(run / "metrics.jsonl", rows)
    (run / "summary.json").write_text(json.dumps({"task": "pattern_echo", "seed": seed,
                                                  "eval": {"overall": {"success": min(1.0, rise * logs)}}}))
    return run


@pytest.fixture
def make_run():
    return make_training_run


@pytest.fixture
def make_wmil():
    return make_wmil_run

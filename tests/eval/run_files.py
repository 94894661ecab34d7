"""The files of the report tests: a finished `lfo train` run written by hand (the formats docs/report.md
describes), and a CSV table that lfo wrote (a report's, a grid's runs.csv) read back."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import yaml


def write_training_run(run: Path, cfg: dict, rows: list[dict]) -> None:
    """A finished training run in ``run``: recipe.yaml and run.json of its config ``cfg`` (a grpo recipe with its
    seed and trainer.max_steps), metrics.jsonl of ``rows`` and a complete summary.json."""
    run.mkdir(parents=True, exist_ok=True)
    (run / "recipe.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    (run / "run.json").write_text(json.dumps({"seed": cfg["seed"], "config": cfg, "kind": "grpo"}))
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run / "summary.json").write_text(json.dumps({"status": "complete", "steps": cfg["trainer"]["max_steps"]}))


def rows_by(path: Path, key: str) -> dict[str, dict]:
    """Each row of ``path`` as a dict of strings, under its value in column ``key`` (one row per value)."""
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    by_key = {r[key]: r for r in rows}
    assert len(by_key) == len(rows), f"{path}: {key} repeats"
    return by_key

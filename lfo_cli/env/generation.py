"""`lfo gen-env` for the customer-service world: its options, the generator and the reference policies' check.

Imported by the command line to list its options, so it stays light (the standard library and lfo_cli.env).
``progress(label, total, unit)``, where given, returns a callable that takes the units done so far.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lfo_cli.env.check import run_check, select_tasks, summarize
from lfo_cli.env.generate import generate_world
from lfo_cli.env.policies import REFERENCE_POLICIES
from lfo_cli.env.world_files import load_world, write_world
from lfo_cli.errors import LfoError
from lfo_cli.io import read_json


@dataclass
class CustomerServiceGeneration:
    """The customer-service world's `lfo gen-env` options (a field ``num_companies`` is ``--num-companies``)."""

    num_companies: int = field(default=100, metadata={"help": "Companies in the world."})
    num_train_tasks: int = field(default=500, metadata={"help": "Tasks on training companies."})
    num_val_tasks: int = field(default=100, metadata={"help": "Validation tasks on training companies."})
    num_transfer_tasks: int | None = field(
        default=None, metadata={"help": "Tasks on held-out companies only \\[default: --num-val-tasks]."})
    heldout_fraction: float = field(
        default=0.5, metadata={"help": "Fraction of companies held out for transfer (stratified by industry)."})
    exception_rate: float = field(
        default=0.3, metadata={"help": "Per-department probability that a company deviates from the industry prior."})
    episodes_per_difficulty: int = field(
        default=40, metadata={"help": "Episodes per policy and difficulty in --check.", "check": True})


FILES = ("companies.jsonl", "manifest.json")


def generate(output_dir: Path, options: CustomerServiceGeneration, *, seed: int, force: bool,
             progress: Callable[..., Any] | None = None) -> dict:
    """Generate the world and write its files; the manifest, with ``summary`` lines for a person."""
    if options.num_transfer_tasks is not None and options.num_transfer_tasks < 0:
        raise LfoError(f"--num-transfer-tasks must be a non-negative integer, got {options.num_transfer_tasks}")
    existing = [n for n in FILES if (output_dir / n).exists()]
    if existing and not force:  # refuse before spending any work
        raise LfoError(f"{output_dir / existing[0]} already exists; pass --force to overwrite")
    world = generate_world(num_companies=options.num_companies, num_train_tasks=options.num_train_tasks,
                           num_val_tasks=options.num_val_tasks, heldout_fraction=options.heldout_fraction, seed=seed,
                           num_transfer_tasks=options.num_transfer_tasks, exception_rate=options.exception_rate)
    manifest = write_world(world, output_dir, force=force)
    c = manifest["counts"]
    files = [f"  {name}: {entry['rows']} rows, sha256 {entry['sha256'][:16]}" for name, entry in manifest["files"].items()]
    summary = [f"lfo world written to {output_dir}/ (seed {seed})", *files,
               f"{c['companies']} companies ({c['heldout_companies']} held out for transfer), "
               f"tasks: {c['tasks_train']} train / {c['tasks_val']} val / {c['tasks_transfer']} transfer"]
    return {"output_dir": str(output_dir), **manifest, "summary": summary}


def check(data_dir: Path, options: CustomerServiceGeneration, *, seed: int,
          progress: Callable[..., Any] | None = None) -> dict:
    """The reference policies on the world in ``data_dir``: success and behaviour by policy and difficulty
    (``rows``), and the world's checks (the oracle always succeeds, random almost never, the prior between)."""
    per_difficulty = options.episodes_per_difficulty
    if per_difficulty < 1:
        raise LfoError(f"--episodes-per-difficulty must be >= 1, got {per_difficulty}")
    world = load_world(data_dir)
    total = len(select_tasks(world, per_difficulty, seed)) * len(REFERENCE_POLICIES)
    update, done = (progress("reference policies", total, "episode") if progress else None), itertools.count(1)
    rows = summarize(run_check(world, REFERENCE_POLICIES, per_difficulty, seed,
                               on_episode=(lambda: update(next(done))) if update else None))
    overall = {r["policy"]: r["success_rate"] for r in rows if r["difficulty"] == "all"}
    per_diff = {(r["policy"], r["difficulty"]): r["success_rate"] for r in rows}
    diffs = sorted({r["difficulty"] for r in rows if r["difficulty"] != "all"})
    checks = {
        "oracle_100_at_every_difficulty": all(per_diff[("oracle", d)] == 1.0 for d in diffs),
        "random_below_5pct": overall["random"] < 0.05,
        "prior_strictly_between": overall["random"] < overall["prior"] < overall["oracle"],
    }
    return {"data_dir": str(data_dir), "episodes_per_difficulty": per_difficulty, "rows": rows, "checks": checks,
            "data_files": read_json(data_dir / "manifest.json").get("files")}

"""Which checkpoint a resume loads, and a check that every file in it reads before the Trainer touches it.

The Trainer writes a checkpoint in place and its ``trainer_state.json`` last (after the adapters, the
optimizer, the scheduler and the RNG states), so a checkpoint without it was cut off by a kill: it is
never loaded, and is removed so the resumed run writes it afresh. A checkpoint that has it but a damaged
file (a disk error, a bad copy) stops the resume with one line naming the file, instead of a traceback
from deep inside torch or safetensors.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from lfo_cli import run_record as rr
from lfo_cli.errors import LfoError
from lfo_cli.io import atomic_write_jsonl, iter_jsonl


def checkpoints(run_dir: Path) -> list[tuple[int, Path]]:
    """Every ``checkpoint-N`` directory of a run as (N, path), newest first, complete or not."""
    return sorted(((int(m.group(1)), p) for p in Path(run_dir).glob(f"{rr.CHECKPOINT_PREFIX}*")
                   if p.is_dir() and (m := re.fullmatch(rf"{re.escape(rr.CHECKPOINT_PREFIX)}(\d+)", p.name))),
                  reverse=True)


def last_complete_checkpoint(run_dir: Path, discard_incomplete: bool = False) -> str | None:
    """The newest ``checkpoint-N`` written to the end, or None; ``discard_incomplete`` removes newer cut-off ones."""
    for _, path in checkpoints(run_dir):
        if (path / "trainer_state.json").is_file():
            return str(path)
        if discard_incomplete:
            shutil.rmtree(path)
    return None


def check_checkpoint(path: str | Path) -> None:
    """Read every file the Trainer will load from ``path``; LfoError naming the first that does not read."""
    import torch
    from safetensors.torch import load_file

    path = Path(path)
    hint = f"delete {path} to resume from the checkpoint before it"
    for f in sorted(path.rglob("*")):
        if not f.is_file():
            continue
        try:
            if f.suffix == ".json":
                json.loads(f.read_text(encoding="utf-8"))
            elif f.suffix == ".safetensors":
                load_file(f)  # safetensors checks the header and that the data covers it
            elif f.suffix in (".pt", ".pth", ".bin"):
                torch.load(f, map_location="cpu", weights_only=False)
        except Exception as exc:  # noqa: BLE001 - json, torch and safetensors raise many kinds for a damaged file
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]
            raise LfoError(f"{f}: corrupt or truncated checkpoint file ({first}); {hint}") from None



def truncate_metrics_after(run_dir: Path, step: int) -> None:
    """On resume from checkpoint-N, drop the metrics rows logged after N, so the resumed log has no duplicates."""
    path = Path(run_dir) / rr.METRICS_FILE
    if path.is_file():
        atomic_write_jsonl(path, [r for r in iter_jsonl(path) if int(r.get(rr.STEP, 0)) <= step])


def resume_point(run_dir: Path, main: bool) -> str | None:
    """Where a resumed run continues: its last complete checkpoint, every file of it read first (newer cut-off
    ones removed by the main process), or None to start over. The main process also drops the metrics rows
    logged after that checkpoint, so the resumed log has each step once."""
    checkpoint = last_complete_checkpoint(run_dir, discard_incomplete=main)
    if checkpoint:
        check_checkpoint(checkpoint)  # one line naming a damaged file, not a traceback from the Trainer
    if main:
        truncate_metrics_after(run_dir, int(Path(checkpoint).name.split("-")[-1]) if checkpoint else -1)
    return checkpoint

"""`lfo export RUN --out DIR [--merge]`: a finished run as Hugging Face model files that load without lfo."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lfo_cli import run_record as rr
from lfo_cli.commands._common import JsonOpt, handle_errors, print_json
from lfo_cli.errors import LfoError
from lfo_cli.eval.export import export_run

CONTEXT: dict = {}


@handle_errors
def export(
    run_dir: Annotated[Path, typer.Argument(help="A finished `lfo train` run directory.")],
    out: Annotated[Path, typer.Option("--out", help="New directory to write (never overwritten).")],
    merge: Annotated[bool, typer.Option("--merge", help="Merge the policy adapter into the base: one standalone "
                                        "model dir (safetensors) for AutoModelForCausalLM or vLLM.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Write the run's policy (and world model) as Hugging Face files that load without lfo.

    Without --merge: DIR/base, DIR/policy, DIR/world_model and the tokenizer (load with PEFT).

    Examples:

      lfo export runs/dual_s3 --out exports/dual_s3 --merge

      lfo export runs/dual_s3 --out exports/dual_s3_adapters --json
    """
    if not (run_dir / rr.SUMMARY_FILE).is_file():
        raise LfoError(f"{run_dir}: not a finished run (no summary.json)")
    result = export_run(run_dir, out, merge=merge)
    if json_out:
        print_json(result)
        return
    typer.echo(f"wrote {result['out']} ({result['files']}); load with: {result['load']}")

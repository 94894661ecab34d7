"""`lfo transfer-eval RUN_DIR`: zero-shot success on held-out companies (and val, for the gap)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lfo_cli import run_record as rr
from lfo_cli.commands._common import JsonOpt, SeedOpt, handle_errors, print_json
from lfo_cli.errors import LfoError
from lfo_cli.eval.transfer import eval_file_name, eval_parameters
from lfo_cli.eval.transfer import transfer_eval as evaluate
from lfo_cli.io import atomic_write_json
from lfo_cli.progress import ProgressLog

CONTEXT: dict = {}


@handle_errors
def transfer_eval(
    run_dir: Annotated[Path, typer.Argument(help="A finished `lfo train` run directory.")],
    split: Annotated[str, typer.Option("--split", help="transfer, val, both (the train/held-out gap), or train (the tasks RL trained on: memorised or learned?).")] = "both",
    samples: Annotated[int, typer.Option("--samples", min=1, help="Rollouts per task (k).")] = 1,
    max_tasks: Annotated[int | None, typer.Option("--max-tasks", min=1, help="Evaluate the first N tasks.")] = None,
    temperature: Annotated[float, typer.Option("--temperature", min=0.0, help="Sampling temperature.")] = 1.0,
    backend: Annotated[str, typer.Option("--backend", help="transformers (CPU/GPU) or vllm (GPU + the \\[gpu] extra).")] = "transformers",
    data_dir: Annotated[Path | None, typer.Option("--data-dir", help="World data (default: the run's data.dir).")] = None,
    difficulty: Annotated[list[int] | None, typer.Option(
        "--difficulty", min=1, max=5, help="Only tasks of this difficulty (repeat for several).")] = None,
    against_base: Annotated[bool, typer.Option(
        "--against-base", help="Also play the same episodes with the run's base (its warm start, adapter off) and "
        "test policy - base per episode: did training move success?")] = False,
    seed: SeedOpt = 0,
    out: Annotated[Path | None, typer.Option(
        "--out", help="File to write (default RUN/evals/ named by the parameters); never overwritten.")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Success (pass^1, and pass^k with --samples k) by difficulty with Wilson 95% intervals, plus behaviour
    metrics; writes RUN/evals/transfer_eval-<parameters>.json (every parameter recorded in the file).

    The same tasks, order and sampling seed are used for every run, so comparisons are paired. An
    evaluation never overwrites another: other parameters make another file, the same ones are refused.

    Examples:

      lfo transfer-eval runs/dual_s0

      lfo transfer-eval runs/dual_s0 --split transfer --samples 4 --json

      lfo transfer-eval runs/dual_s0 --split val --difficulty 1 --samples 8 --against-base
    """
    if split not in ("transfer", "val", "both", "train"):
        raise LfoError(f"--split must be transfer, val, both or train, got '{split}'")
    if backend not in ("transformers", "vllm"):
        raise LfoError(f"--backend must be transformers or vllm, got '{backend}'")
    splits = ("transfer", "val") if split == "both" else (split,)
    params = eval_parameters(splits, samples=samples, max_tasks=max_tasks, temperature=temperature, seed=seed,
                             backend=backend, data_dir=data_dir, difficulties=tuple(difficulty) if difficulty else None,
                             against_base=against_base)
    target = out or Path(run_dir) / rr.EVALS_DIR / eval_file_name(params)
    if target.exists():  # checked before the (long) evaluation
        raise LfoError(f"{target} exists (an evaluation with these parameters); --out FILE writes another")
    with ProgressLog("transfer-eval", None, unit="episode", enabled=not json_out) as plog:
        passes = {"offset": 0, "done": 0, "total": 0}  # one pass per split (and per base): counted end to end

        def hook(done: int, total: int) -> None:
            if done < passes["done"]:
                passes["offset"] += passes["total"]
            passes.update(done=done, total=total)
            plog.update(passes["offset"] + done, total=passes["offset"] + total)

        result = evaluate(run_dir, splits, samples=samples, max_tasks=max_tasks, temperature=temperature,
                          seed=seed, backend=backend, data_dir=data_dir,
                          difficulties=tuple(difficulty) if difficulty else None, against_base=against_base,
                          progress=hook)
    if target.exists():
        raise LfoError(f"{target} appeared during the evaluation; not overwritten (--out FILE writes another)")
    atomic_write_json(target, {**result, "file": str(target)})
    result["file"] = str(target)
    if json_out:
        print_json(result)
        return
    _print(result)


def _print(result: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"zero-shot success ({result['samples']} sample(s)/task, T={result['temperature']})")
    for col in ("split", "difficulty", "n", "success", "95% CI"):
        table.add_column(col)
    for split, row in result["splits"].items():
        table.add_row(split, "all", str(row["n"]), f"{row['success']:.3f}", f"[{row['ci_low']:.3f}, {row['ci_high']:.3f}]")
        for d, sub in row["by_difficulty"].items():
            table.add_row("", d, str(sub["n"]), f"{sub['success']:.3f}", f"[{sub['ci_low']:.3f}, {sub['ci_high']:.3f}]")
    console = Console()
    console.print(table)
    k = result["samples"]
    if k > 1:
        console.print("pass^" + str(k) + " (all " + str(k) + " samples of a task succeed): " + ", ".join(
            f"{sp} {row['pass_k']:.3f} over {row['tasks']} tasks" for sp, row in result["splits"].items()
            if row.get("pass_k") is not None))
    behaviour = Table(title="behaviour")
    behaviour.add_column("metric")
    for split in result["splits"]:
        behaviour.add_column(split, justify="right")
    keys = sorted({k for row in result["splits"].values() for k in row["behaviour"]})
    for k in keys:
        behaviour.add_row(k, *[f"{row['behaviour'].get(k, float('nan')):.3f}" for row in result["splits"].values()])
    console.print(behaviour)
    if result.get("gap") is not None:
        console.print(f"train-company advantage (val - transfer): {result['gap']:+.3f}")
    def num(v, spec: str) -> str:
        return "n/a" if v is None else format(v, spec)

    for split, test in (result.get("vs_base") or {}).items():
        base = result["base"][split]
        console.print(
            f"{split}: policy {result['splits'][split]['success']:.3f} vs base {base['success']:.3f} "
            f"(n={test['n']} paired episodes): difference {num(test['mean_diff'], '+.3f')} "
            f"[{num(test['diff_low'], '+.3f')}, {num(test['diff_high'], '+.3f')}], "
            f"{test['wins']} won / {test['losses']} lost, Wilcoxon p={num(test['wilcoxon_p'], '.3g')}"
        )
    console.print(f"written: {result['file']}")

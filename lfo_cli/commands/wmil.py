"""`lfo wmil`: a from-scratch baby model learns from a parent environment (issue #3).

Heavy imports (torch, pandas, matplotlib, scikit-learn) happen inside the command bodies so that
`lfo --help` stays fast.
"""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path
from typing import Annotated

import typer

from lfo_cli import run_record as rr
from lfo_cli.commands._common import (
    JsonOpt,
    dataclass_options,
    dataclass_values,
    handle_errors,
    print_json,
    with_options,
)
from lfo_cli.errors import LfoError
from lfo_cli.io import read_json
from lfo_cli.recipes import read_yaml_mapping
from lfo_cli.wmil.config import WMILConfig

app = typer.Typer(
    help=(
        "WMIL: a from-scratch baby model learning from a parent environment, with a world-model head.\n\n"
        "A training step is one policy update on --num-envs episodes rolled out together.\n\n"
        "Examples:\n\n"
        "  lfo wmil train --task pattern_echo --steps 10000 --seed 0 --out runs/wmil_echo\n\n"
        "  lfo wmil eval runs/wmil_echo\n\n"
        "  lfo wmil ablate --task sequence_next --seeds 6 --out runs/wmil_ablate_seq\n\n"
        "  lfo wmil probe runs/wmil_echo"
    ),
    no_args_is_help=True,
)

ConfigOpt = Annotated[Path | None, typer.Option("--config", help="YAML file of WMILConfig fields (options given here override it).")]
# Every WMILConfig field is an option of `lfo wmil train` (and, but the seed, of `lfo wmil ablate`): generated from
# the dataclass (its type, help and default), so a new field is an option without another line here.
_RUN_PANEL, _CONFIG_PANEL = "Run", "Configuration (WMILConfig; --config FILE, then these)"


def _load_yaml(path: Path | None) -> dict:
    """A WMIL config file: the recipes' YAML reader (one-line errors; `1e-3` is a float, as in recipes)."""
    if path is None:
        return {}
    if not path.is_file():
        raise LfoError(f"{path}: config file not found")
    data = read_yaml_mapping(path, what="WMIL config", shape=" of WMILConfig fields")
    if data.get("kind", "wmil") != "wmil":  # a recipe file (recipes/wmil/) names its kind: `lfo train` reads it too
        raise LfoError(f"{path}: kind {data['kind']!r} is not a WMIL config (kind: wmil)")
    return {k: v for k, v in data.items() if k != "kind"}


@handle_errors
def train_cmd(
    config: ConfigOpt = None,
    out: Annotated[Path, typer.Option("--out", help="Run directory.", rich_help_panel=_RUN_PANEL)] = Path("runs/wmil"),
    resume: Annotated[bool, typer.Option("--resume", help="Continue the run in --out from its last checkpoint.",
                                         rich_help_panel=_RUN_PANEL)] = False,
    force: Annotated[bool, typer.Option("--force", help="Overwrite a non-empty --out.", rich_help_panel=_RUN_PANEL)] = False,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Show the rich progress bar.",
                                           rich_help_panel=_RUN_PANEL)] = True,
    json_out: JsonOpt = False,
    **options,
) -> None:
    """Train a baby model; writes metrics.jsonl/csv, checkpoints, figures, eval.json and summary.json."""
    from lfo_cli.wmil.trainer import brief, train

    base = _load_yaml(config)
    if resume and (out / rr.WMIL_CONFIG_FILE).is_file():
        base = {**read_json(out / rr.WMIL_CONFIG_FILE), **base}
    cfg = WMILConfig.from_dict({**base, **dataclass_values(WMILConfig, options)})
    summary = train(cfg, out, resume=resume, force=force, progress=progress and not json_out, quiet=json_out)
    if json_out:
        print_json(brief(summary))


app.command("train")(with_options(train_cmd, dataclass_options(WMILConfig, panel=lambda f: _CONFIG_PANEL)))


RunDirArg = Annotated[Path, typer.Argument(help="A run directory written by `lfo wmil train`.")]


def _analysis(name: str, runner: str, count: str, count_help: str, seed_help: str, doc: str) -> None:
    """`lfo wmil NAME RUN_DIR --COUNT N --seed S [--json]`: ``runner`` ("module:function", imported when the
    command runs) analyses a finished run and shows its tables, or returns them for ``--json``."""

    def command(run_dir: RunDirArg, **options) -> None:
        json_out = options.pop("json_out")
        module, function = runner.split(":")
        run = getattr(importlib.import_module(module), function)
        _print_json_if(json_out, run(run_dir, show=not json_out, **options))

    command.__doc__ = doc
    keyword = inspect.Parameter.KEYWORD_ONLY
    app.command(name)(with_options(handle_errors(command), [
        inspect.Parameter(count, keyword, default=1024, annotation=Annotated[int, typer.Option(f"--{count}", help=count_help)]),
        inspect.Parameter("seed", keyword, default=0, annotation=Annotated[int, typer.Option("--seed", help=seed_help)]),
        inspect.Parameter("json_out", keyword, default=False, annotation=JsonOpt)]))


_analysis("eval", "lfo_cli.wmil.evaluate:run_eval", "episodes", "Episodes per difficulty level and policy.",
          "Seed of the evaluation episodes.",
          "Success, world-model MSE, entropy and per-difficulty success of a run vs the random policy.")
_analysis("probe", "lfo_cli.wmil.probe:run_probe", "samples", "Episodes whose embeddings are probed.",
          "Seed of the probe episodes and the t-SNE.",
          "Linear-probe accuracy of state attributes from embeddings (trained vs untrained) + t-SNE plot.")


def _print_json_if(json_out: bool, result: dict) -> None:
    """`--json`: the command's result as one JSON document (else it has shown its tables)."""
    if json_out:
        print_json(result)


@handle_errors
def ablate_cmd(
    seeds: Annotated[int, typer.Option("--seeds", help="Seeds per condition (paired across conditions).",
                                       rich_help_panel=_RUN_PANEL)] = 8,
    first_seed: Annotated[int, typer.Option("--first-seed", help="Seeds are first-seed .. first-seed+seeds-1.",
                                            rich_help_panel=_RUN_PANEL)] = 0,
    conditions: Annotated[str, typer.Option("--conditions", help="Comma list of wm, no_wm, kl_distill, random, reactive.",
                                            rich_help_panel=_RUN_PANEL)] = "wm,no_wm,kl_distill,random",
    config: ConfigOpt = None,
    out: Annotated[Path, typer.Option("--out", help="Study directory (one run dir per condition and seed).",
                                      rich_help_panel=_RUN_PANEL)] = Path("runs/wmil_ablate"),
    force: Annotated[bool, typer.Option("--force", help="Recompute runs that already finished.",
                                        rich_help_panel=_RUN_PANEL)] = False,
    json_out: JsonOpt = False,
    **options,
) -> None:
    """WM vs no-WM and the baselines over paired seeds: mean, std, bootstrap 95% CI, paired tests. A condition sets
    its own wm_coef, kl_coef or context_window over the options given."""
    from lfo_cli.wmil.ablate import run_ablation

    base = {**_load_yaml(config), **dataclass_values(WMILConfig, options)}
    WMILConfig.from_dict(base)  # validate once, before any run starts
    result = run_ablation(base, out, seeds=seeds, first_seed=first_seed,
                          conditions=[c.strip() for c in conditions.split(",") if c.strip()], force=force,
                          show=not json_out)
    if json_out:
        print_json(result)


app.command("ablate")(with_options(ablate_cmd, dataclass_options(
    WMILConfig, names=lambda name: name != "seed", panel=lambda f: _CONFIG_PANEL)))


@app.command("tasks")
@handle_errors
def tasks_cmd(json_out: JsonOpt = False) -> None:
    """List the tasks, their difficulty levels and whether a reactive policy can solve them."""
    from lfo_cli.wmil.envs import describe_tasks

    rows = describe_tasks()
    if json_out:
        print_json(rows)
        return
    for r in rows:
        typer.echo(f"{r['task']:15s} levels {r['levels']}  reactive-solvable {str(r['reactive_solvable']):5s}  {r['difficulty']}")

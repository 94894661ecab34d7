"""`lfo gen-env`: generate a world's files, or `--check` one with its reference policies.

The command asks the world (`World.generate`, `World.check`; docs/environment.md): it names no world. Each
built-in world's options (its `World.generation` dataclass) are options here, grouped by world; a plugin world's
are given with `--set KEY=VALUE`.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from lfo_cli.commands._common import JsonOpt, dataclass_options, handle_errors, print_json, with_options
from lfo_cli.errors import LfoError
from lfo_cli.io import atomic_write_bytes, atomic_write_json, atomic_write_text, run_metadata
from lfo_cli.progress import ProgressLog
from lfo_cli.recipes import apply_overrides, build_config, config_to_dict
from lfo_cli.worlds import DEFAULT_KIND, world_class
from lfo_cli.worlds.registry import builtin_generation

CONTEXT: dict = {}

_CHECK = "Check"
WORLD_OPTIONS = builtin_generation()  # kind -> its options dataclass


def _panel(kind: str) -> str:
    return "Generation" if kind == DEFAULT_KIND else f"{kind} (--world {kind})"


def _world_parameters() -> list[inspect.Parameter]:
    """Each built-in world's options as `--name` options, None when not given (the world's default then holds)."""
    params: list[inspect.Parameter] = []
    for kind, cls in WORLD_OPTIONS.items():
        seen = {p.name for p in params}
        params += dataclass_options(cls, names=lambda name, seen=seen: name not in seen,
                                    panel=lambda f, kind=kind: _CHECK if f.metadata.get("check") else _panel(kind))
    return params


def _options(kind: str, given: dict[str, Any], sets: list[str]) -> Any:
    """The world's options dataclass from the options given on the command line and ``--set`` (one error for an
    option of another world, or a key the world does not have)."""

    cls = world_class(kind).generation
    if cls is None:
        raise LfoError(f"the {kind} world has no `lfo gen-env` options (World.generation): it makes no files here")
    ours = {f.name for f in dataclasses.fields(cls)}
    for name, value in given.items():
        if value is not None and name not in ours:
            owner = next(k for k, c in WORLD_OPTIONS.items() if name in {f.name for f in dataclasses.fields(c)})
            raise LfoError(f"--{name.replace('_', '-')} is an option of the {owner} world (--world {owner}), "
                           f"not of {kind}")
    data = apply_overrides({k: v for k, v in given.items() if v is not None and k in ours}, sets)
    try:
        return build_config(cls, data)
    except LfoError as exc:
        raise LfoError(str(exc).replace("unknown key", f"the {kind} world has no option")) from None


def _progress(as_json: bool, opened: list):
    def make(label: str, total: int, unit: str = "step"):
        log = ProgressLog(label, total, unit=unit, stream=sys.stderr if as_json else None)
        opened.append(log)
        return log.update

    return make


@handle_errors
def gen_env(
    world: Annotated[str, typer.Option(
        help="The world: customer_service, textworld (the textworld extra) or a plugin.")] = DEFAULT_KIND,
    seed: Annotated[int, typer.Option("--seed", help="World seed (same seed, byte-identical files).")] = 0,
    output_dir: Annotated[Path | None, typer.Option(
        "--output-dir", help="Where to write the world \\[default: data; --world textworld: data_tw].",
        rich_help_panel="Generation")] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite existing world files.",
                                        rich_help_panel="Generation")] = False,
    check: Annotated[bool, typer.Option("--check", help="Do not generate: load --data-dir and run the reference "
                                                        "policies.", rich_help_panel=_CHECK)] = False,
    data_dir: Annotated[Path | None, typer.Option("--data-dir", help="World to check \\[default: --output-dir].",
                                                  rich_help_panel=_CHECK)] = None,
    report_dir: Annotated[Path | None, typer.Option("--report-dir", help="Write the check as CSV + PNG + JSON here.",
                                                    rich_help_panel=_CHECK)] = None,
    set_: Annotated[list[str] | None, typer.Option(
        "--set", metavar="KEY=VALUE", help="A world's option by its name (a plugin world's options).")] = None,
    json_: JsonOpt = False,
    **world_options: Any,
) -> None:
    """Generate a world's files (customer_service: companies, tasks, manifest), or check a world with its reference
    policies. With --world textworld: train, validation and held-out games generated from --seed and cached under
    $LFO_HOME/textworld, --output-dir getting textworld_world.json; its --check plays --games games.

    Examples:

      lfo gen-env --num-companies 100 --num-train-tasks 500 --num-val-tasks 100 --heldout-fraction 0.5 --seed 0 --output-dir data/

      lfo gen-env --check --data-dir data/ --report-dir reports/env_check

      lfo gen-env --world textworld --game-type cooking --go 6 --games 50 --seed 0 --check

      lfo gen-env --world textworld --game-type cooking --go 6 --games 200 --val-games 50 --heldout-games 50 --output-dir data_tw/
    """

    cls = world_class(world)
    options = _options(world, world_options, list(set_ or []))
    opened: list = []
    try:
        if check:
            result = cls.check(data_dir or output_dir or Path(cls.default_dir), options, seed=seed,
                               progress=_progress(json_, opened))
        else:
            result = cls.generate(output_dir or Path(cls.default_dir), options, seed=seed, force=force,
                                  progress=_progress(json_, opened))
    finally:
        for log in opened:
            log.close()
    summary = result.pop("summary", [])
    if check and report_dir is not None and result.get("rows"):
        _write_report(report_dir, result, data_dir or output_dir, seed, options)
    if json_:
        print_json(result)
    else:
        for line in summary:
            typer.echo(line)
        if result.get("rows"):
            _print_tables(result["rows"], report_dir)
        for name, ok in result.get("checks", {}).items():
            typer.echo(f"{'PASS' if ok else 'FAIL'}  {name}")
    failed = [k for k, v in result.get("checks", {}).items() if not v]
    if failed:
        typer.echo(f"error: {world} check failed: {', '.join(failed)}", err=True)
        raise typer.Exit(1)


with_options(gen_env, _world_parameters())


def _print_tables(rows: list[dict], report_dir: Path | None) -> None:
    """Success by policy and difficulty, and every other measure of the rows over all difficulties."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    policies = list(dict.fromkeys(r["policy"] for r in rows))
    diffs = sorted({r["difficulty"] for r in rows if r["difficulty"] != "all"})
    by = {(r["policy"], r["difficulty"]): r for r in rows}
    t = Table(title="Success rate by difficulty")
    t.add_column("policy")
    for d in diffs:
        t.add_column(f"d{d}", justify="right")
    t.add_column("all", justify="right", style="bold")
    for p in policies:
        t.add_row(p, *[f"{by[(p, d)]['success_rate']:.0%}" for d in diffs], f"{by[(p, 'all')]['success_rate']:.1%}")
    console.print(t)
    measures = [k for k, v in rows[0].items() if k not in ("policy", "difficulty", "episodes", "success_rate")
                and isinstance(v, (int, float))]
    if measures:
        b = Table(title="Behaviour (all difficulties)")
        b.add_column("policy")
        for m in measures:
            b.add_column(m.replace("_", " "), justify="right")
        for p in policies:
            b.add_row(p, *[f"{by[(p, 'all')][m]:.2f}" for m in measures])
        console.print(b)
    if report_dir is not None:
        console.print(f"report: {report_dir}/env_check.csv, env_check.png, env_check.json")


def _write_report(report_dir: Path, result: dict, data_dir: Path | None, seed: int, options: Any) -> None:
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    rows = result["rows"]
    per_difficulty = getattr(options, "episodes_per_difficulty", None)
    df = pd.DataFrame(rows)
    atomic_write_text(report_dir / "env_check.csv", df.to_csv(index=False))
    atomic_write_json(report_dir / "env_check.json", {**result, **run_metadata(seed, config_to_dict(options))})
    pivot = df[df["difficulty"] != "all"].pivot(index="difficulty", columns="policy", values="success_rate")
    pivot = pivot[list(dict.fromkeys(df["policy"]))]
    fig, ax = plt.subplots(figsize=(7, 3.6))
    pivot.plot.bar(ax=ax, rot=0, width=0.8)
    ax.set_xlabel("difficulty")
    ax.set_ylabel("success rate")
    ax.set_ylim(0, 1.05)
    ax.set_title(f"Reference policies on {data_dir} ({per_difficulty} episodes per difficulty)")
    ax.legend(ncol=4, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.18))
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120)
    plt.close(fig)
    atomic_write_bytes(report_dir / "env_check.png", buf.getvalue())


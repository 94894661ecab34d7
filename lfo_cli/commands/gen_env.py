"""`lfo gen-env`: generate the customer-service world, or `--check` it with the reference policies."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lfo_cli.commands._common import JsonOpt, handle_errors, print_json
from lfo_cli.commands.gen_env_textworld import textworld_games, textworld_spec, textworld_world
from lfo_cli.env.check import run_check, select_tasks, summarize
from lfo_cli.env.generate import generate_world
from lfo_cli.env.policies import REFERENCE_POLICIES
from lfo_cli.env.world_files import load_world, write_world
from lfo_cli.errors import LfoError
from lfo_cli.io import atomic_write_bytes, atomic_write_json, atomic_write_text, read_json, run_metadata

CONTEXT: dict = {}

_GEN = "Generation"
_CHECK = "Check"
_TW = "TextWorld (--world textworld)"


@handle_errors
def gen_env(
    num_companies: Annotated[int, typer.Option(help="Companies in the world.", rich_help_panel=_GEN)] = 100,
    num_train_tasks: Annotated[int, typer.Option(help="Tasks on training companies.", rich_help_panel=_GEN)] = 500,
    num_val_tasks: Annotated[int, typer.Option(help="Validation tasks on training companies.", rich_help_panel=_GEN)] = 100,
    num_transfer_tasks: Annotated[
        int | None,
        typer.Option(help="Tasks on held-out companies only \\[default: --num-val-tasks].", rich_help_panel=_GEN),
    ] = None,
    heldout_fraction: Annotated[
        float, typer.Option(help="Fraction of companies held out for transfer (stratified by industry).",
                            rich_help_panel=_GEN)
    ] = 0.5,
    exception_rate: Annotated[
        float, typer.Option(help="Per-department probability that a company deviates from the industry prior.",
                            rich_help_panel=_GEN)
    ] = 0.3,
    seed: Annotated[int, typer.Option("--seed", help="World seed (same seed, byte-identical files).")] = 0,
    output_dir: Annotated[
        Path | None,
        typer.Option("--output-dir", help="Where to write the world \\[default: data; --world textworld: data_tw].",
                     rich_help_panel=_GEN),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite existing world files.", rich_help_panel=_GEN)] = False,
    check: Annotated[
        bool, typer.Option("--check", help="Do not generate: load --data-dir and run the reference policies.",
                           rich_help_panel=_CHECK)
    ] = False,
    data_dir: Annotated[
        Path | None, typer.Option("--data-dir", help="World to check \\[default: --output-dir].", rich_help_panel=_CHECK)
    ] = None,
    report_dir: Annotated[
        Path | None, typer.Option("--report-dir", help="Write the check as CSV + PNG + JSON here.", rich_help_panel=_CHECK)
    ] = None,
    episodes_per_difficulty: Annotated[
        int, typer.Option(help="Episodes per policy and difficulty in --check.", rich_help_panel=_CHECK)
    ] = 40,
    world: Annotated[str, typer.Option(help="customer_service, or textworld (the textworld extra).")] = "customer_service",
    game_type: Annotated[str, typer.Option(help="cooking, coin_collector or treasure_hunter.", rich_help_panel=_TW)] = "cooking",
    games: Annotated[int, typer.Option(help="Training games, seeds --seed onwards.", rich_help_panel=_TW)] = 20,
    val_games: Annotated[int, typer.Option(help="Validation games (the next seeds).", rich_help_panel=_TW)] = 10,
    heldout_games: Annotated[
        int, typer.Option(help="Held-out games (the seeds after those; cooking: --heldout-split foods).", rich_help_panel=_TW)
    ] = 10,
    # the game-type options default to None so that one given for the other game types is refused, not ignored
    heldout_split: Annotated[
        str | None, typer.Option(help="Cooking: the held-out games' foods (default valid).", rich_help_panel=_TW)
    ] = None,
    go: Annotated[int | None, typer.Option(help="Cooking: rooms (1, 6, 9, 12; default 6).", rich_help_panel=_TW)] = None,
    recipe: Annotated[
        int | None, typer.Option(help="Cooking: ingredients in the recipe (default 1).", rich_help_panel=_TW)
    ] = None,
    take: Annotated[int | None, typer.Option(help="Cooking: ingredients to find (default 1).", rich_help_panel=_TW)] = None,
    split: Annotated[
        str | None, typer.Option(help="Cooking: train, valid or test foods (default train).", rich_help_panel=_TW)
    ] = None,
    level: Annotated[
        int | None, typer.Option(help="Coin collector / treasure hunter level (default 1).", rich_help_panel=_TW)
    ] = None,
    json_: JsonOpt = False,
) -> None:
    """Generate the customer-service world (companies, tasks, manifest), or check it with reference policies.
    With --world textworld: a TextWorld world (train, validation and held-out games generated from --seed and
    cached under $LFO_HOME/textworld; --output-dir gets textworld_world.json), or --check of --games games.

    Examples:

      lfo gen-env --num-companies 100 --num-train-tasks 500 --num-val-tasks 100 --heldout-fraction 0.5 --seed 0 --output-dir data/

      lfo gen-env --check --data-dir data/ --report-dir reports/env_check

      lfo gen-env --world textworld --game-type cooking --go 6 --games 50 --seed 0 --check

      lfo gen-env --world textworld --game-type cooking --go 6 --games 200 --val-games 50 --heldout-games 50 --output-dir data_tw/
    """
    if world == "textworld":
        spec = textworld_spec(game_type, go=go, recipe=recipe, take=take, split=split, level=level,
                              heldout_split=heldout_split)
        heldout_split = spec.pop("heldout_split")
        if check:
            if not textworld_games(spec, games, seed, check, json_):
                typer.echo("error: textworld check failed", err=True)
                raise typer.Exit(1)
            return
        textworld_world(spec, output_dir or Path("data_tw"), seed=seed, counts=(games, val_games, heldout_games),
                        heldout_split=heldout_split, force=force, as_json=json_)
        return
    if world != "customer_service":
        raise LfoError(f"--world must be customer_service or textworld, got {world!r}")
    output_dir = output_dir or Path("data")
    if check:
        _check(data_dir or output_dir, report_dir, episodes_per_difficulty, seed, json_)
        return
    if num_transfer_tasks is not None and num_transfer_tasks < 0:
        raise LfoError(f"--num-transfer-tasks must be a non-negative integer, got {num_transfer_tasks}")
    existing = [n for n in ("companies.jsonl", "manifest.json") if (output_dir / n).exists()]
    if existing and not force:  # refuse before spending any work
        raise LfoError(f"{output_dir / existing[0]} already exists; pass --force to overwrite")
    world = generate_world(
        num_companies=num_companies, num_train_tasks=num_train_tasks, num_val_tasks=num_val_tasks,
        heldout_fraction=heldout_fraction, seed=seed, num_transfer_tasks=num_transfer_tasks,
        exception_rate=exception_rate,
    )
    manifest = write_world(world, output_dir, force=force)
    if json_:
        print_json({"output_dir": str(output_dir), **manifest})
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"lfo world written to {output_dir}/ (seed {seed})")
    table.add_column("file")
    table.add_column("rows", justify="right")
    table.add_column("sha256")
    for name, entry in manifest["files"].items():
        table.add_row(name, str(entry["rows"]), entry["sha256"][:16])
    table.add_row("manifest.json", "", "")
    Console().print(table)
    c = manifest["counts"]
    Console().print(f"{c['companies']} companies ({c['heldout_companies']} held out for transfer), "
                    f"tasks: {c['tasks_train']} train / {c['tasks_val']} val / {c['tasks_transfer']} transfer")


def _check(data_dir: Path, report_dir: Path | None, per_difficulty: int, seed: int, as_json: bool) -> None:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    if per_difficulty < 1:
        raise LfoError(f"--episodes-per-difficulty must be >= 1, got {per_difficulty}")
    world = load_world(data_dir)
    total = len(select_tasks(world, per_difficulty, seed)) * len(REFERENCE_POLICIES)
    err = Console(stderr=True)
    with Progress(TextColumn("reference policies"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err, transient=True) as progress:
        bar = progress.add_task("check", total=total)
        records = run_check(world, REFERENCE_POLICIES, per_difficulty, seed,
                            on_episode=lambda: progress.advance(bar))
    rows = summarize(records)
    overall = {r["policy"]: r["success_rate"] for r in rows if r["difficulty"] == "all"}
    per_diff = {(r["policy"], r["difficulty"]): r["success_rate"] for r in rows}
    diffs = sorted({r["difficulty"] for r in rows if r["difficulty"] != "all"})
    checks = {
        "oracle_100_at_every_difficulty": all(per_diff[("oracle", d)] == 1.0 for d in diffs),
        "random_below_5pct": overall["random"] < 0.05,
        "prior_strictly_between": overall["random"] < overall["prior"] < overall["oracle"],
    }
    if report_dir is not None:
        _write_report(report_dir, rows, checks, data_dir, per_difficulty, seed)
    if as_json:
        print_json({"data_dir": str(data_dir), "episodes_per_difficulty": per_difficulty, "rows": rows,
                    "checks": checks})
    else:
        _print_tables(rows, diffs, checks, report_dir)
    if not all(checks.values()):
        failed = ", ".join(k for k, v in checks.items() if not v)
        typer.echo(f"error: environment check failed: {failed}", err=True)
        raise typer.Exit(1)


def _print_tables(rows: list[dict], diffs: list[str], checks: dict, report_dir: Path | None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    policies = list(dict.fromkeys(r["policy"] for r in rows))
    by = {(r["policy"], r["difficulty"]): r for r in rows}
    t = Table(title="Success rate by difficulty")
    t.add_column("policy")
    for d in diffs:
        t.add_column(f"d{d}", justify="right")
    t.add_column("all", justify="right", style="bold")
    for p in policies:
        t.add_row(p, *[f"{by[(p, d)]['success_rate']:.0%}" for d in diffs], f"{by[(p, 'all')]['success_rate']:.1%}")
    console.print(t)
    b = Table(title="Behaviour (all difficulties)")
    for col in ("policy", "turns", "phone calls", "form before 1st call", "order correct", "invalid calls", "forms"):
        b.add_column(col, justify="left" if col == "policy" else "right")
    for p in policies:
        r = by[(p, "all")]
        b.add_row(p, f"{r['mean_turns']:.2f}", f"{r['mean_phone_calls']:.2f}", f"{r['auth_before_first_call']:.0%}",
                  f"{r['department_order_correct']:.0%}", f"{r['invalid_calls_per_episode']:.2f}",
                  f"{r['forms_per_episode']:.2f}")
    console.print(b)
    for name, ok in checks.items():
        console.print(f"{'PASS' if ok else 'FAIL'}  {name}")
    if report_dir is not None:
        console.print(f"report: {report_dir}/env_check.csv, env_check.png, env_check.json")


def _write_report(report_dir: Path, rows: list[dict], checks: dict, data_dir: Path, per_difficulty: int,
                  seed: int) -> None:
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    df = pd.DataFrame(rows)
    atomic_write_text(report_dir / "env_check.csv", df.to_csv(index=False))
    manifest = read_json(data_dir / "manifest.json")
    atomic_write_json(report_dir / "env_check.json", {
        "rows": rows, "checks": checks, "data_dir": str(data_dir), "data_files": manifest.get("files"),
        "episodes_per_difficulty": per_difficulty, **run_metadata(seed, {"episodes_per_difficulty": per_difficulty}),
    })
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


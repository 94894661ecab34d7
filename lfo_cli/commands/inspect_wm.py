"""`lfo inspect-wm RUN_DIR`: the world-model adapter's predicted replies vs the actual ones."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lfo_cli.commands._common import JsonOpt, SeedOpt, handle_errors, print_json
from lfo_cli.env import read_trajectories_jsonl
from lfo_cli.env.plugin import PHONE, CustomerServiceWorld
from lfo_cli.errors import LfoError
from lfo_cli.eval.loading import load_run_model, load_run_world, run_recipe

CONTEXT: dict = {}


@handle_errors
def inspect_wm(
    run_dir: Annotated[Path, typer.Argument(help="A finished `lfo train` run directory.")],
    trajectories: Annotated[
        Path | None,
        typer.Option("--trajectories", help="Trajectory JSONL (lfo_cli.env.write_trajectories_jsonl); default: "
                     "fresh noisy reference-policy episodes on the split."),
    ] = None,
    split: Annotated[str, typer.Option("--split", help="Task split for fresh episodes: val or transfer.")] = "val",
    episodes: Annotated[int, typer.Option("--episodes", min=1, help="Fresh episodes to record phone calls from.")] = 40,
    probe: Annotated[bool, typer.Option("--probe", help="Also run the design's synthetic probes (val + transfer).")] = False,
    show: Annotated[int, typer.Option("--show", min=0, help="Side-by-side examples to print.")] = 5,
    max_new_tokens: Annotated[int, typer.Option("--max-new-tokens", min=1, help="Generated reply length cap.")] = 96,
    probe_companies: Annotated[int, typer.Option("--probe-companies", min=1, help="Companies per split to probe.")] = 50,
    data_dir: Annotated[Path | None, typer.Option("--data-dir", help="World data (default: the run's data.dir).")] = None,
    seed: SeedOpt = 0,
    json_out: JsonOpt = False,
) -> None:
    """Token accuracy, perplexity, BLEU and semantic accuracy of the world model, by reply category.

    Examples:

      lfo inspect-wm runs/dual_s0

      lfo inspect-wm runs/dual_s0 --split transfer --probe --json
    """
    from lfo_cli.eval.inspect_wm import evaluate_world_model, probe_scores

    if split not in ("val", "transfer", "train"):
        raise LfoError(f"--split must be val, transfer or train, got '{split}'")
    recipe = run_recipe(run_dir)
    world = load_run_world(run_dir, data_dir)
    customer_service = isinstance(world, CustomerServiceWorld)
    if trajectories is not None and not customer_service:
        raise LfoError(f"--trajectories reads the customer-service world's phone calls; {run_dir} "
                       f"trained on a {world.kind} world")
    probes = world.inspection_probes(probe_companies, seed) if probe else None
    if probe and probes is None:
        raise LfoError(f"--probe: the {world.kind} world {run_dir} trained on has no synthetic probes")
    if trajectories is not None:
        trajs = read_trajectories_jsonl(trajectories)
        calls = [t for tr in trajs for t in tr.transitions if t.action.get("tool") == PHONE]
        source = str(trajectories)
    else:
        calls = world.inspection_calls(world.heldout_split if split == "transfer" else split, episodes, seed)
        source = f"{episodes} noisy {'probe-policy' if customer_service else 'walkthrough'} episodes on {split}"
    if not calls:
        raise LfoError(f"no calls to inspect in {source}")
    model, tokenizer = load_run_model(run_dir, "world_model")
    max_length = int(recipe.get("wm", {}).get("max_length", 512))
    result = evaluate_world_model(model, tokenizer, calls, type(world), max_length=max_length,
                                  max_new_tokens=max_new_tokens)
    out = {"run_dir": str(run_dir), "source": source, "overall": result["overall"],
           "by_category": result["by_category"]}
    if probe:
        out["probes"] = probe_scores(model, tokenizer, type(world), probes, max_length=max_length,
                                     max_new_tokens=max_new_tokens)
    if json_out:
        print_json(out)
        return
    _print(out, result["examples"][:show])


def _print(out: dict, examples: list[dict]) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    console = Console()
    side = Table(title="world model: predicted vs actual reply", show_lines=True)
    for col in ("category", "predicted", "actual", "semantic"):
        side.add_column(col, overflow="fold")
    for e in examples:  # model text as Text: a generated "[/x]" would otherwise be read as rich markup
        side.add_row(e["category"], Text(e["predicted"] or "(empty)"), Text(e["actual"]),
                     "yes" if e["semantic_ok"] else "no")
    console.print(side)
    table = Table(title=f"world-model metrics ({out['source']})")
    for col in ("category", "n", "token acc", "perplexity", "BLEU", "semantic acc"):
        table.add_column(col, justify="right" if col != "category" else "left")
    rows = [("overall", out["overall"])] + list(out["by_category"].items())
    for name, m in rows:
        table.add_row(name, str(m["n"]), f"{m['token_accuracy']:.3f}", f"{m['perplexity']:.1f}",
                      f"{m.get('bleu', 0.0):.1f}", f"{m['semantic_accuracy']:.3f}")
    console.print(table)
    if "probes" in out:
        probes = Table(title="synthetic probes (share with the expected reply category)")
        for col in ("split", "probe", "n", "correct"):
            probes.add_column(col)
        for split, kinds in out["probes"].items():
            for kind, m in kinds.items():
                probes.add_row(split, "no auth -> asks for auth" if kind == "auth_failure" else "full auth -> service",
                               str(m["n"]), f"{m['correct']:.3f}")
        console.print(probes)

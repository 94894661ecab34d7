"""`lfo train --recipe NAME`: resolve a recipe, create the run dir, hand off to the kind's runner."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lfo_cli import recipes
from lfo_cli import run_record as rr
from lfo_cli.commands._common import JsonOpt, handle_errors, print_json
from lfo_cli.errors import LfoError
from lfo_cli.models import cache
from lfo_cli.models.warmstart_cache import check_world, warmstart_status
from lfo_cli.recipe_explain import explain
from lfo_cli.report.gain import gain_rows
from lfo_cli.worlds import world_class

CONTEXT: dict = {}

RecipeOpt = Annotated[
    str | None,
    typer.Option("--recipe", help="Recipe name in recipes/ (or a path to a YAML file)."),
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", help="Override one recipe key, e.g. --set wm.coef=1.0 (repeatable)."),
]


@handle_errors
def train(
    recipe: RecipeOpt = None,
    set_: SetOpt = None,
    seed: Annotated[int | None, typer.Option("--seed", min=0, help="Overrides the recipe's seed.")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Run directory (default runs/RECIPE_sSEED_TIME).")] = None,
    resume: Annotated[
        Path | None, typer.Option("--resume", help="Continue the run in this directory after a kill (a complete run "
                                  "is left as it is; with --out NEW and --set, continue it into NEW).")
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the resolved recipe and exit.")] = False,
    list_recipes: Annotated[bool, typer.Option("--list", help="List the available recipes and exit.")] = False,
    explain: Annotated[str | None, typer.Option(
        "--explain", metavar="KEY", help="Print a config key's type, default and help (with --recipe, also its value "
        "there) and exit.")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Train from a recipe (a YAML delta over defaults).

    Examples:

      lfo train --list

      lfo train --recipe warmstart_micro --out runs/ws_micro

      lfo train --recipe dual_lora_micro --set wm.coef=1.0 --seed 3 --out runs/dual_s3

      lfo train --resume runs/dual_s3

      lfo train --resume runs/dual_s3 --out runs/dual_s3_200 --set trainer.max_steps=200

      lfo train --explain wm.coef --recipe reading_micro
    """
    import yaml

    if explain is not None:
        _explain(explain, recipe, list(set_ or []), json_out)
        return

    if list_recipes:
        described = recipes.recipe_descriptions()
        if json_out:
            print_json([{"name": n, "description": d} for n, d in described.items()])
        else:
            width = max(map(len, described))
            typer.echo("\n".join(f"{n:<{width}}  {d}" for n, d in described.items()))
        return
    from lfo_cli.train.run import BuildFailed, Run, continue_hint  # imports the models layer (torch)

    if resume is not None:
        if recipe is not None:
            raise LfoError("--resume continues a run with its recorded recipe; drop --recipe")
        if set_ and out is None:
            raise LfoError("--resume RUN --set ... changes a run: continue it into a new dir with --out NEW")
        if out is None and rr.is_complete(resume):
            # A finished run is never modified: say so and leave it as it is.
            typer.echo(f"{resume} is complete; nothing to resume. To train further, {continue_hint(resume)}")
            return
        run = Run.resumed(resume, out=out, overrides=list(set_ or []))
    else:
        if recipe is None:
            raise LfoError("--recipe NAME is required (see `lfo train --list`)")
        run = Run.new(recipe, list(set_ or []) + ([f"seed={seed}"] if seed is not None else []), out=out)
        if dry_run:
            run.recipe.check()
            if json_out:
                print_json(run.recipe.resolved)
            else:
                typer.echo(yaml.safe_dump(run.recipe.resolved, sort_keys=False), nl=False)
                _warmstart_note(run.recipe)
            return
    if not run.resume:
        _warmstart_note(run.recipe, shipped_only=True)
    try:
        summary = run.start()
    except BuildFailed as exc:
        raise typer.Exit(exc.returncode) from None  # the build printed its own error line
    if json_out:
        print_json({"run_dir": str(run.run_dir), **summary})
    else:
        typer.echo(f"run dir: {run.run_dir}")
        env = getattr(run.recipe.config, "env", None)
        skills = world_class(env.kind).paired_skills if env is not None else {}
        for row in gain_rows(summary, skills):  # success, then the world's sub-skills: the last line is a skill's
            typer.echo(row["sentence"])


def _explain(key: str, recipe: str | None, overrides: list[str], json_out: bool) -> None:
    """`--explain KEY`: the field's type, default and help, for the recipe's kind (grpo without one)."""
    value = None
    rec = recipes.load_recipe(recipe, overrides) if recipe is not None else None
    info = explain(rec.kind if rec else "grpo", key, rec.resolved if rec else None)
    if rec is not None:
        value = rec.resolved
        for part in key.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        info["recipe"], info["value"] = rec.name, value
    if json_out:
        print_json(info)
        return
    head = f"{info['key']} ({info['kind']}): {info['type']}"
    head += f", fields {', '.join(info['fields'])}" if "fields" in info else f" = {info['default']!r}"
    if rec is not None:
        head += f"; in {rec.name}: {value!r}"
    typer.echo(head + (f"\n  {info['help']}" if info["help"] else ""))


def _warmstart_note(rec, shipped_only: bool = False) -> None:
    """On stderr after a dry run: whether the run's warm start is built, or that the first run builds it or
    installs the build lfo ships (``shipped_only``: that line alone, before a run)."""
    ws = (rec.resolved.get("model") or {}).get("warmstart") if rec.kind == "grpo" else None
    if not ws:
        return
    data_dir, overrides = (rec.resolved.get("data") or {}).get("dir"), rec.config.warmstart_overrides()
    st = warmstart_status(ws, data_dir=data_dir, overrides=overrides)
    check_world(ws, st, rec.config.env.kind)
    if st["shipped"] and not st["cached"] and st["state"] == "not built":
        what = "installing" if shipped_only else "not cached: the first run installs"
        typer.echo(f"warm start '{ws}': {what} the build lfo ships for it (SHA-256 verified) at {st['path']}; "
                   f"`{cache.build_command(ws, data_dir=data_dir, overrides=overrides, force=True)}` trains it here "
                   "instead", err=True)
    elif shipped_only:
        return
    elif st["cached"]:
        took = f", built in {st['minutes']} min" if st["minutes"] is not None else ""
        typer.echo(f"warm start '{ws}': cached at {st['path']}{took}", err=True)
    elif st["state"] != "not built":
        typer.echo(f"warm start '{ws}': the cached entry at {st['path']} is {st['state']} and will be refused; "
                   f"rebuild it with `{cache.build_command(ws, data_dir=data_dir, overrides=overrides, force=True)}`",
                   err=True)
    else:
        bound = f"; its time guard fails the build after {st['max_minutes']:g} min" if st["max_minutes"] else ""
        typer.echo(f"warm start '{ws}': not built yet, so the first run builds it before training "
                   f"(`{cache.build_command(ws, data_dir=data_dir, overrides=overrides)}` builds it alone{bound})",
                   err=True)

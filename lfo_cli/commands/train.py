"""`lfo train --recipe NAME`: resolve a recipe, create the run dir, hand off to the kind's runner."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from lfo_cli import recipes
from lfo_cli import run_record as rr
from lfo_cli.ablate.runner import is_complete  # the one definition of a finished run
from lfo_cli.commands._common import JsonOpt, handle_errors, print_json
from lfo_cli.errors import LfoError
from lfo_cli.io import atomic_write_json, atomic_write_text, read_json, run_metadata
from lfo_cli.models import cache
from lfo_cli.models.warmstart_cache import warmstart_status
from lfo_cli.worlds import DEFAULT_KIND, world_class

CONTEXT: dict = {}

RecipeOpt = Annotated[
    str | None,
    typer.Option("--recipe", help="Recipe name in recipes/ (or a path to a YAML file)."),
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", help="Override one recipe key, e.g. --set wm.coef=1.0 (repeatable)."),
]


def _prepare(rec, run_dir: Path) -> dict:
    """What a run's runner gets beyond its config, made before the run dir holds anything of the run. A grpo
    run: its one `DualLoRAConfig` (every check, this machine's too) and its base model, the recipe's warm
    start built first if it is missing."""
    import subprocess
    import sys

    if rec.kind != "grpo":
        return {}
    args = rec.config.training_args(run_dir)
    ws = rec.config.model.warmstart
    if not ws:
        return {"args": args, "base": rec.config.model.name}
    from lfo_cli.models.warmstart import ensure_warmstart

    data_dir = rec.config.data.dir
    overrides = rec.config.warmstart_overrides()  # the run's seed, for a warm start drawn per seed
    # Not under `accelerate launch` with several processes or DeepSpeed: every rank would train it, and its
    # Trainer would inherit the plugin; ensure_warmstart(build=False) then says how to build it beforehand.
    distributed = args.world_size > 1 or args.deepspeed_plugin is not None
    status = warmstart_status(ws, data_dir=data_dir, overrides=overrides)
    _check_world(ws, status, rec.config.env.kind)
    if not distributed and not status["cached"]:
        # In a process of its own: the warm start's Trainer would fix accelerate's process-wide state (its
        # mixed precision) before this run's Accelerator exists. Its progress goes to the same terminal/log.
        # Its stdout goes to this process's stderr (file descriptor 2): `--json` keeps stdout to itself.
        done = subprocess.run([sys.executable, "-m", "lfo_cli", "models", "build", str(ws), "--data-dir", str(data_dir),
                               *(a for o in overrides for a in ("--set", o))], stdout=2, check=False)
        if done.returncode != 0:
            raise typer.Exit(done.returncode)  # the build printed its own error line
    return {"args": args, "base": str(ensure_warmstart(ws, data_dir=data_dir, overrides=overrides, build=False))}


def _check_world(ws: str, status: dict, kind: str) -> None:
    if status["world"] != kind:
        raise LfoError(f"model.warmstart={ws} imitates the {status['world']} world, but env.kind is {kind}: "
                       "name a warm start of the same world")


def _rank() -> int:
    """The process rank under accelerate/torchrun (0 when not distributed)."""
    import os

    return int(os.environ.get("RANK", "0") or 0)


def _continue_into(source: Path, out: Path, rec) -> Path:
    """Copy run ``source`` into the new dir ``out`` (without its final summary) with the new recipe, so
    ``--resume`` trains further there from the source's last checkpoint; the source stays as it was."""
    import shutil

    import yaml

    if out.exists() and any(out.iterdir()):
        raise LfoError(f"{out} already exists; --resume RUN --out NEW needs a new dir")
    if not any(source.glob(f"{rr.CHECKPOINT_PREFIX}*")):
        raise LfoError(f"{source} has no checkpoint to continue from")
    tmp = out.with_name(f".{out.name}.partial")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(source, tmp, ignore=shutil.ignore_patterns(rr.SUMMARY_FILE))
    atomic_write_text(tmp / rr.RECIPE_FILE, yaml.safe_dump(rec.resolved, sort_keys=False))
    meta = read_json(tmp / rr.RUN_FILE) if (tmp / rr.RUN_FILE).is_file() else {}
    meta.update({rr.RUN_CONFIG: rec.resolved, "continued_from": str(source)})
    atomic_write_json(tmp / rr.RUN_FILE, meta)
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.exists():
        out.rmdir()
    tmp.replace(out)
    return out


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
    if resume is not None:
        if recipe is not None:
            raise LfoError("--resume continues a run with its recorded recipe; drop --recipe")
        if set_ and out is None:
            raise LfoError("--resume RUN --set ... changes a run: continue it into a new dir with --out NEW")
        mapping = recipes.read_run_recipe(resume)
        name = read_json(resume / rr.RUN_FILE).get(rr.RUN_RECIPE, resume.name) if (resume / rr.RUN_FILE).is_file() else resume.name
        if out is None and is_complete(resume):
            # A finished run is never modified: say so and leave it as it is.
            typer.echo(f"{resume} is complete; nothing to resume. To train further, continue it into a new dir: "
                       f"lfo train --resume {resume} --out NEW --set trainer.max_steps=N")
            return
        rec = recipes.recipe_from_mapping(recipes.apply_overrides(mapping, list(set_ or [])), name=name)
        prepared = _prepare(rec, out or resume)
        run_dir = resume if out is None else _continue_into(resume, out, rec)
    else:
        if recipe is None:
            raise LfoError("--recipe NAME is required (see `lfo train --list`)")
        overrides = list(set_ or [])
        if seed is not None:
            overrides.append(f"seed={seed}")
        rec = recipes.load_recipe(recipe, overrides)
        if dry_run:
            rec.check()
            if json_out:
                print_json(rec.resolved)
            else:
                typer.echo(yaml.safe_dump(rec.resolved, sort_keys=False), nl=False)
                _warmstart_note(rec)
            return
        run_seed = getattr(rec.config, "seed", None)
        if out is None and _rank() > 0:
            raise LfoError("under `accelerate launch`, pass --out so every process uses the same run dir")
        run_dir = out or Path("runs") / f"{Path(rec.name).stem}_s{run_seed}_{time.strftime('%Y%m%d-%H%M%S')}"
        if _rank() == 0 and (run_dir / rr.RECIPE_FILE).exists():
            raise LfoError(f"{run_dir} already holds a run; use --resume {run_dir} or another --out")
        prepared = _prepare(rec, run_dir)
        if _rank() == 0:  # under accelerate/torchrun only the main process owns the run dir's metadata
            run_dir.mkdir(parents=True, exist_ok=True)
            atomic_write_text(run_dir / rr.RECIPE_FILE, yaml.safe_dump(rec.resolved, sort_keys=False))
            meta = run_metadata(seed=getattr(rec.config, "seed", None), config=rec.resolved)
            meta.update({rr.RUN_RECIPE: rec.name, "recipe_chain": rec.chain, "kind": rec.kind})
            data_dir = (rec.resolved.get("data") or {}).get("dir")
            if data_dir is not None:  # the world it trains on: evaluations find it, and refuse another
                kind = (rec.resolved.get("env") or {}).get("kind", DEFAULT_KIND)
                meta[rr.RUN_WORLD] = {"dir": str(Path(data_dir).resolve()), "kind": kind,
                                      "fingerprint": world_class(kind).fingerprint(data_dir)}
            atomic_write_json(run_dir / rr.RUN_FILE, meta)

    runner = recipes.KINDS[rec.kind].run_function()
    summary = runner(rec.config, run_dir, resume=resume is not None, **prepared)
    if json_out:
        print_json({"run_dir": str(run_dir), **(summary or {})})
    else:
        typer.echo(f"run dir: {run_dir}")


def _explain(key: str, recipe: str | None, overrides: list[str], json_out: bool) -> None:
    """`--explain KEY`: the field's type, default and help, for the recipe's kind (grpo without one)."""
    value = None
    rec = recipes.load_recipe(recipe, overrides) if recipe is not None else None
    info = recipes.explain(rec.kind if rec else "grpo", key)
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


def _warmstart_note(rec) -> None:
    """On stderr after a dry run: whether the run's warm start is built, or that the first run builds it."""
    ws = (rec.resolved.get("model") or {}).get("warmstart") if rec.kind == "grpo" else None
    if not ws:
        return
    data_dir, overrides = (rec.resolved.get("data") or {}).get("dir"), rec.config.warmstart_overrides()
    st = warmstart_status(ws, data_dir=data_dir, overrides=overrides)
    _check_world(ws, st, rec.config.env.kind)
    if st["cached"]:
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

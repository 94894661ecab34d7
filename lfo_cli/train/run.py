"""A run's life, in one place: its recipe resolved and checked once, its run dir (a new one with its metadata, an
interrupted one resumed, or a finished one continued into a new dir), its warm start built when missing, and
the hand-off to its kind's runner (:data:`lfo_cli.recipes.KINDS`). `lfo train` parses its options and calls
this; a script does the same::

    from lfo_cli.train.run import Run

    summary = Run.new("reading_micro", ["wm.coef=0.015", "seed=3"], out="runs/stacked_s3").start()
    summary = Run.resumed("runs/stacked_s3").start()   # after a kill: from its last complete checkpoint

Nothing is written before :meth:`Run.start`, and then the run's checks (TRL's, lfo's and this machine's) and its
warm start come before the run dir holds anything: a run that cannot start leaves no half-made dir.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from lfo_cli import recipes
from lfo_cli import run_record as rr
from lfo_cli.errors import LfoError
from lfo_cli.io import atomic_write_json, atomic_write_text, read_json, run_metadata
from lfo_cli.models.warmstart import ensure_warmstart
from lfo_cli.models.warmstart_cache import check_world, warmstart_status
from lfo_cli.worlds import DEFAULT_KIND, world_class


class BuildFailed(LfoError):
    """The warm start's build (a process of its own) failed; it printed its own error line."""

    def __init__(self, returncode: int):
        super().__init__(f"the warm start's build exited with {returncode}")
        self.returncode = returncode


def continue_hint(run_dir: str | Path) -> str:
    """How to train a finished run further, by the kind its recipe.yaml records: continue it into a new dir with
    more steps (a kind with :attr:`~lfo_cli.recipes.Kind.steps_key`), or train a new run."""
    try:
        kind = recipes.read_run_recipe(run_dir).get("kind")
    except LfoError:  # no readable recipe.yaml: not a run `lfo train` laid out
        kind = None
    key = recipes.KINDS[str(kind)].steps_key if str(kind) in recipes.KINDS else None
    if key is None:
        continued = " or ".join(k.name for k in recipes.KINDS.values() if k.steps_key)
        return f"train a new run with more steps (only a {continued} run is continued into a new dir)"
    return f"continue it into a new dir: lfo train --resume {run_dir} --out NEW --set {key}=N"


def rank() -> int:
    """The process rank under accelerate/torchrun (0 when not distributed)."""
    return int(os.environ.get("RANK", "0") or 0)


@dataclass
class Run:
    recipe: recipes.Recipe
    run_dir: Path
    resume: bool = False  # continue the run in run_dir from its last complete checkpoint
    source: Path | None = None  # a finished run continued into run_dir (a copy made at start)
    prepared: dict = field(default_factory=dict)  # what the runner gets beyond the config (grpo: args, base)

    # ---- the three ways a run begins -------------------------------------------------------------------
    @classmethod
    def new(cls, name: str, overrides: list[str] | tuple = (), *, out: str | Path | None = None) -> Run:
        """A new run of recipe ``name`` (a file in recipes/ or a path) with ``--set`` style overrides. Without
        ``out``, runs/RECIPE_sSEED_TIME. A dir that already holds a run is refused."""
        rec = recipes.load_recipe(name, list(overrides))
        if out is None and rank() > 0:
            raise LfoError("under `accelerate launch`, pass --out so every process uses the same run dir")
        seed = getattr(rec.config, "seed", None)
        run_dir = Path(out) if out is not None else \
            Path("runs") / f"{Path(rec.name).stem}_s{seed}_{time.strftime('%Y%m%d-%H%M%S')}"
        if rank() == 0 and (run_dir / rr.RECIPE_FILE).exists():
            raise LfoError(f"{run_dir} already holds a run; use --resume {run_dir} or another --out")
        return cls(rec, run_dir)

    @classmethod
    def resumed(cls, run_dir: str | Path, *, out: str | Path | None = None, overrides: list[str] | tuple = ()) -> Run:
        """The run in ``run_dir`` with its recorded recipe: resumed in place, or with ``out`` continued into a
        new dir (overrides allowed there, e.g. more steps). A finished run is never modified: resuming it in
        place is an error (:func:`lfo_cli.run_record.is_complete` tells first)."""
        run_dir = Path(run_dir)
        if overrides and out is None:
            raise LfoError("--resume RUN --set ... changes a run: continue it into a new dir with --out NEW")
        if out is None and rr.is_complete(run_dir):
            raise LfoError(f"{run_dir} is complete; {continue_hint(run_dir)}")
        mapping = recipes.read_run_recipe(run_dir)
        kind = recipes.KINDS.get(str(mapping.get("kind")))  # as fill_added_later reads it
        if out is not None and kind is not None and kind.steps_key is None:
            raise LfoError(f"{run_dir}: a {kind.name} run is not continued into a new dir; train a new run with more "
                           "steps (lfo train --recipe ...)")
        world = world_class((mapping.get("env") or {}).get("kind", DEFAULT_KIND))
        mapping = recipes.drop_retired(mapping, world.retired_keys.get(mapping.get("kind"), {}))  # recorded by an older lfo
        mapping = recipes.fill_added_later(mapping)  # ... before a key whose default later changed
        meta = read_json(run_dir / rr.RUN_FILE) if (run_dir / rr.RUN_FILE).is_file() else {}
        rec = recipes.recipe_from_mapping(recipes.apply_overrides(mapping, list(overrides)),
                                          name=meta.get(rr.RUN_RECIPE, run_dir.name))
        if out is None:
            return cls(rec, run_dir, resume=True)
        return cls(rec, Path(out), resume=True, source=run_dir)

    # ---- its life --------------------------------------------------------------------------------------
    def start(self) -> dict:
        """Check and prepare (the warm start first), lay out the run dir, and run the kind's runner to the end;
        its summary."""
        self.prepared = self.prepare()
        if self.source is not None:
            self._continue_from(self.source)
        elif not self.resume and rank() == 0:  # under accelerate/torchrun only the main process owns the metadata
            self._write_metadata()
        runner = recipes.KINDS[self.recipe.kind].run_function()
        return runner(self.recipe.config, self.run_dir, resume=self.resume, **self.prepared) or {}

    def prepare(self) -> dict:
        """What the runner gets beyond its config, made before the run dir holds anything of the run. A grpo
        run: its one `DualLoRAConfig` (every check, this machine's too) and its base model, the recipe's warm
        start built first if it is missing."""
        if self.recipe.kind != "grpo":
            return {}
        cfg = self.recipe.config
        args = cfg.training_args(self.run_dir)
        ws = cfg.model.warmstart
        if not ws:
            return {"args": args, "base": cfg.model.name}
        data_dir, overrides = cfg.data.dir, cfg.warmstart_overrides()  # the run's seed, for a per-seed draw
        status = warmstart_status(ws, data_dir=data_dir, overrides=overrides)
        check_world(ws, status, cfg.env.kind)
        # Not under `accelerate launch` with several processes or DeepSpeed: every rank would train it, and its
        # Trainer would inherit the plugin; ensure_warmstart(build=False) then says how to build it beforehand.
        if args.world_size <= 1 and args.deepspeed_plugin is None and not status["cached"] and not status["shipped"]:
            # In a process of its own: the warm start's Trainer would fix accelerate's process-wide state (its
            # mixed precision) before this run's Accelerator exists. Its stdout goes to this process's stderr
            # (file descriptor 2): `--json` keeps stdout to itself.
            done = subprocess.run([sys.executable, "-m", "lfo_cli", "models", "build", str(ws), "--data-dir",
                                   str(data_dir), *(a for o in overrides for a in ("--set", o))], stdout=2, check=False)
            if done.returncode != 0:
                raise BuildFailed(done.returncode)
        return {"args": args, "base": str(ensure_warmstart(ws, data_dir=data_dir, overrides=overrides, build=False))}

    def _write_metadata(self) -> None:
        rec = self.recipe
        self.run_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.run_dir / rr.RECIPE_FILE, yaml.safe_dump(rec.resolved, sort_keys=False))
        meta = run_metadata(seed=getattr(rec.config, "seed", None), config=rec.resolved)
        meta.update({rr.RUN_RECIPE: rec.name, "recipe_chain": rec.chain, "kind": rec.kind})
        data_dir = (rec.resolved.get("data") or {}).get("dir")
        if data_dir is not None:  # the world it trains on: evaluations find it, and refuse another
            kind = (rec.resolved.get("env") or {}).get("kind", DEFAULT_KIND)
            meta[rr.RUN_WORLD] = {"dir": str(Path(data_dir).resolve()), "kind": kind,
                                  "fingerprint": world_class(kind).fingerprint(data_dir)}
        atomic_write_json(self.run_dir / rr.RUN_FILE, meta)

    def _continue_from(self, source: Path) -> None:
        """Copy run ``source`` into the new run dir (without its final summary) with the new recipe, so the
        resume trains further there from the source's last checkpoint; the source stays as it was."""
        out = self.run_dir
        if out.exists() and any(out.iterdir()):
            raise LfoError(f"{out} already exists; --resume RUN --out NEW needs a new dir")
        if not any(source.glob(f"{rr.CHECKPOINT_PREFIX}*")):
            raise LfoError(f"{source} has no checkpoint to continue from")
        tmp = out.with_name(f".{out.name}.partial")
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(source, tmp, ignore=shutil.ignore_patterns(rr.SUMMARY_FILE))
        atomic_write_text(tmp / rr.RECIPE_FILE, yaml.safe_dump(self.recipe.resolved, sort_keys=False))
        meta = read_json(tmp / rr.RUN_FILE) if (tmp / rr.RUN_FILE).is_file() else {}
        meta.update({rr.RUN_CONFIG: self.recipe.resolved, "continued_from": str(source)})
        atomic_write_json(tmp / rr.RUN_FILE, meta)
        out.parent.mkdir(parents=True, exist_ok=True)
        if out.exists():
            out.rmdir()
        tmp.replace(out)

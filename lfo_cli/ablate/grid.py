"""Ablation grids: a YAML file is the whole design of a study (`lfo ablate --grid NAME`).

A grid file (``recipes/grids/NAME.yaml``)::

    description: lambda ablation (the design's ablation 1), CPU-sized
    base: dual_lora_micro            # the recipe every cell starts from
    seeds: [0, 1, 2]                 # every cell runs once per seed
    set:                             # fixed overrides for every cell (mapping or list of "k=v")
      trainer.max_steps: 60
    axes:                            # cartesian product of these values
      wm.coef: [0, 0.1, 0.3, 0.5, 1, 2]
    cells:                           # extra cells, for non-product designs (each a mapping;
      - {id: none, wm.coef: 0}       #   optional `id` names the cell, optional `seeds` (a subset
      - {id: probe, wm.coef: 0.1, seeds: [0]}  # of the grid's) runs it at fewer seeds)
    command: [...]                   # optional: replaces `lfo train` (tests, custom runners)
    resume_command: [...]            # optional: used instead of `command` for a started cell
    resources:                       # optional: what one cell asks of a cluster (`--launcher slurm|ray`)
      cpus: 1                        #   CPUs per cell (the cell's torch threads there), default 1
      gpus: 0                        #   GPUs per cell, default 0
      mem_gb: 16                     #   memory per cell (SLURM), default: the partition's
      time_min: 120                  #   SLURM time limit per cell; a cell past it is requeued and resumes
    estimate:                        # optional: a measured step time, for `--dry-run` before any cell finished
      step_s: 38.2                   #   seconds per training step on the cell's hardware
      source: "docs/gpu.md: ..."     #   where it was measured (printed with the estimate)

Each (cell, seed) is one run: ``lfo train --recipe BASE --set k=v ... --seed S --out RUNS/CELL_ID``.
Override order: grid ``set``, then the cell's values, then ``lfo ablate --set`` (last wins).
Every cell's recipe is resolved with :func:`lfo_cli.recipes.load_recipe` before anything launches (cells.py),
so a typo in an axis key or a bad value exits 2 with one line naming the cell.

``command`` tokens may contain ``{python}``, ``{base}``, ``{out}``, ``{seed}``, ``{cell}``; a token
that is exactly ``{overrides}`` expands to the ``k=v`` overrides and ``{set_args}`` to
``--set k=v ...``. Replacement is literal (no ``str.format``), so Python code with braces is safe.
"""

from __future__ import annotations

import itertools
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from lfo_cli.errors import LfoError
from lfo_cli.recipes import read_yaml_mapping

GRID_DIR = Path(__file__).resolve().parent.parent.parent / "recipes" / "grids"
GRID_KEYS = {"description", "base", "seeds", "set", "axes", "cells", "command", "resume_command", "resources",
             "estimate"}
RESOURCE_KEYS = {"cpus": int, "gpus": int, "mem_gb": float, "time_min": int}
_PLACEHOLDERS = ("{python}", "{base}", "{out}", "{seed}", "{cell}")


@dataclass
class Cell:
    """One run of the study: a cell of the grid at one seed."""

    cell_id: str  # unique, used as the run dir name
    condition: str  # the cell without its seed (shared by its seeds)
    values: dict[str, Any]  # the cell's own key -> value (axes and explicit cell keys)
    seed: int
    overrides: list[str]  # every --set for `lfo train`, in order (grid set, cell, CLI set)
    run_dir: Path
    resolved: dict = field(default_factory=dict)  # the resolved recipe (what recipe.yaml must hold)


@dataclass
class Resources:
    """What one cell asks of a cluster; the local launcher ignores it (it shares this machine's cores)."""

    cpus: int = 1
    gpus: int = 0
    mem_gb: float | None = None
    time_min: int | None = None


@dataclass
class StepEstimate:
    """A step time measured elsewhere (e.g. on a lent GPU), for a grid none of whose cells has finished."""

    step_s: float
    source: str


@dataclass
class Grid:
    name: str
    path: Path
    base: str
    seeds: list[int]
    fixed: list[str]  # the grid's `set`, as k=v
    conditions: list[tuple[str, dict[str, Any]]]  # (condition id, values)
    keys: list[str]  # every key that appears in a cell, in order of appearance
    command: list[str] | None = None
    resume_command: list[str] | None = None
    description: str = ""
    cli_set: list[str] = field(default_factory=list)  # `lfo ablate --set`, applied after the cell's values
    cell_seeds: dict[str, list[int]] = field(default_factory=dict)  # cells run at only some of the grid's seeds
    resources: Resources = field(default_factory=Resources)
    estimate: StepEstimate | None = None


def grid_path(name: str | Path) -> Path:
    """A path to a YAML file, or a name in recipes/grids/."""
    p = Path(name)
    if p.is_file():
        return p
    candidate = GRID_DIR / f"{name}.yaml"
    if "/" not in str(name) and not str(name).endswith((".yaml", ".yml")) and candidate.is_file():
        return candidate
    known = available_grids()
    raise LfoError(f"grid '{name}' not found (a YAML path or one of: {', '.join(known) or 'none'})")


def available_grids(grid_dir: Path = GRID_DIR) -> list[str]:
    return sorted(p.stem for p in grid_dir.glob("*.yaml"))


def grid_descriptions(grid_dir: Path = GRID_DIR) -> dict[str, str]:
    """Grid name -> its file's one-line ``description`` ("" where it has none)."""
    return {name: str(read_yaml_mapping(grid_dir / f"{name}.yaml").get("description") or "")
            for name in available_grids(grid_dir)}


def format_value(value: Any) -> str:
    """A scalar as YAML text that `--set k=TEXT` parses back to the same value."""
    text = yaml.safe_dump(value, default_flow_style=True).strip()
    if text.endswith("\n..."):
        text = text[: -len("\n...")]
    return text.removesuffix("...").strip()


def format_override(key: str, value: Any) -> str:
    """``key=value`` for `lfo train --set`."""
    return f"{key}={format_value(value)}"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "x"


def _check_key(key: Any, where: str) -> str:
    if not isinstance(key, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", key):
        raise LfoError(f"{where}: '{key}' is not a dotted recipe key (e.g. wm.coef)")
    if key == "seed":
        raise LfoError(f"{where}: use the grid's 'seeds' list, not a 'seed' key")
    return key


def _check_scalar(value: Any, where: str) -> Any:
    if isinstance(value, (dict, list)):
        if isinstance(value, list) and all(not isinstance(v, (dict, list)) for v in value):
            return value  # e.g. lora.target_modules: [q_proj, v_proj]
        raise LfoError(f"{where}: values must be scalars (or flat lists), got {value!r}")
    return value


def _overrides_from(obj: Any, where: str) -> list[str]:
    if obj is None:
        return []
    if isinstance(obj, dict):
        return [format_override(_check_key(k, where), _check_scalar(v, f"{where}.{k}")) for k, v in obj.items()]
    if isinstance(obj, list) and all(isinstance(x, str) and "=" in x for x in obj):
        return list(obj)
    raise LfoError(f"{where}: expected a mapping of key: value or a list of 'key=value' strings")


def _command(obj: Any, where: str) -> list[str] | None:
    if obj is None:
        return None
    if not isinstance(obj, list) or not obj or not all(isinstance(x, (str, int, float)) for x in obj):
        raise LfoError(f"{where}: expected a non-empty list of strings (argv)")
    return [str(x) for x in obj]


def _resources(obj: Any, where: str) -> Resources:
    if obj is None:
        return Resources()
    if not isinstance(obj, dict):
        raise LfoError(f"{where}: expected a mapping, e.g. {{cpus: 1, gpus: 1, mem_gb: 32, time_min: 240}}")
    unknown = sorted(set(map(str, obj)) - set(RESOURCE_KEYS))
    if unknown:
        raise LfoError(f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(RESOURCE_KEYS)})")
    out = {}
    for key, kind in RESOURCE_KEYS.items():
        if key not in obj or obj[key] is None:
            continue
        value = obj[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and value != int(value)):
            raise LfoError(f"{where}.{key}: expected a{'n integer' if kind is int else ' number'}, got {value!r}")
        low = {"cpus": ">= 1", "time_min": ">= 1", "gpus": ">= 0", "mem_gb": "> 0"}[key]
        if not (value > 0 if key == "mem_gb" else value >= int(low[-1])):
            raise LfoError(f"{where}.{key}: must be {low}, got {value!r}")
        out[key] = kind(value)
    return Resources(**out)


def _estimate(obj: Any, where: str) -> StepEstimate | None:
    if obj is None:
        return None
    if not isinstance(obj, dict) or set(obj) != {"step_s", "source"}:
        raise LfoError(f"{where}: expected {{step_s: SECONDS, source: WHERE MEASURED}}")
    step = obj["step_s"]
    if isinstance(step, bool) or not isinstance(step, (int, float)) or step <= 0:
        raise LfoError(f"{where}.step_s: a measured step time in seconds (> 0), got {step!r}")
    if not isinstance(obj["source"], str) or not obj["source"].strip():
        raise LfoError(f"{where}.source: say where the step time was measured")
    return StepEstimate(float(step), obj["source"].strip())


def load_grid(name: str | Path, extra_set: list[str] | None = None) -> Grid:
    """Read and check a grid file's structure (recipes are checked by :func:`expand`)."""
    path = grid_path(name)
    data = read_yaml_mapping(path, "grid", " with base, seeds and axes/cells")
    unknown = sorted(set(map(str, data)) - GRID_KEYS)
    if unknown:
        raise LfoError(f"{path}: unknown grid key(s) {', '.join(unknown)} (known: {', '.join(sorted(GRID_KEYS))})")
    base = data.get("base")
    if not isinstance(base, str) or not base:
        raise LfoError(f"{path}: 'base' (a recipe name) is required")
    seeds = data.get("seeds")
    if (not isinstance(seeds, list) or not seeds
            or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds)):
        raise LfoError(f"{path}: 'seeds' must be a non-empty list of integers >= 0")
    if len(set(seeds)) != len(seeds):
        raise LfoError(f"{path}: 'seeds' has duplicates")
    fixed = _overrides_from(data.get("set"), f"{path}: set")

    axes = data.get("axes") or {}
    if not isinstance(axes, dict):
        raise LfoError(f"{path}: 'axes' must be a mapping of key: [values]")
    for key, values in axes.items():
        _check_key(key, f"{path}: axes")
        if not isinstance(values, list) or not values:
            raise LfoError(f"{path}: axes.{key} must be a non-empty list of values")
        for v in values:
            _check_scalar(v, f"{path}: axes.{key}")
        if len({format_value(v) for v in values}) != len(values):
            raise LfoError(f"{path}: axes.{key} has duplicate values")
    cells_raw = data.get("cells") or []
    if not isinstance(cells_raw, list):
        raise LfoError(f"{path}: 'cells' must be a list of mappings")
    if not axes and not cells_raw:
        raise LfoError(f"{path}: the grid has no cells (give non-empty 'axes' or a 'cells' list)")

    conditions: list[tuple[str, dict[str, Any]]] = []
    keys: list[str] = []
    restricted: dict[str, list[int]] = {}
    if axes:
        names = list(axes)
        for combo in itertools.product(*(axes[k] for k in names)):
            conditions.append(("", dict(zip(names, combo, strict=True))))
    for i, cell in enumerate(cells_raw):
        if not isinstance(cell, dict):
            raise LfoError(f"{path}: cells[{i}] must be a mapping of key: value (and optional id)")
        cell = dict(cell)
        cid = cell.pop("id", "")
        if cid and not isinstance(cid, str):
            raise LfoError(f"{path}: cells[{i}].id must be a string")
        only = cell.pop("seeds", None)
        if only is not None:
            if not cid:
                raise LfoError(f"{path}: cells[{i}] with 'seeds' needs an 'id'")
            if not isinstance(only, list) or not only or not set(only) <= set(seeds) or len(set(only)) != len(only):
                raise LfoError(f"{path}: cells[{i}].seeds must be a non-empty subset of the grid's seeds {seeds}")
            restricted[_slug(cid)] = [s for s in seeds if s in only]
        for k, v in cell.items():
            _check_key(k, f"{path}: cells[{i}]")
            _check_scalar(v, f"{path}: cells[{i}].{k}")
        conditions.append((cid, cell))
    for _, values in conditions:
        keys.extend(k for k in values if k not in keys)
    # ids use a key's last component (wm.coef -> coef) unless two keys of the grid share it
    last = [k.rsplit(".", 1)[-1] for k in keys]
    short = {k: (k.rsplit(".", 1)[-1] if last.count(k.rsplit(".", 1)[-1]) == 1 else k) for k in keys}
    named = []
    for cid, values in conditions:
        if not cid:
            cid = "__".join(f"{_slug(short[k])}-{_slug(format_value(v))}" for k, v in values.items()) or "base"
        named.append((_slug(cid), values))
    ids = [c for c, _ in named]
    dupes = sorted({c for c in ids if ids.count(c) > 1})
    if dupes:
        raise LfoError(f"{path}: cells with the same id {', '.join(dupes)} (give them distinct 'id's)")
    return Grid(
        name=path.stem, path=path, base=base, seeds=list(seeds), fixed=fixed, conditions=named, keys=keys,
        command=_command(data.get("command"), f"{path}: command"),
        resume_command=_command(data.get("resume_command"), f"{path}: resume_command"),
        description=str(data.get("description") or ""), cli_set=list(extra_set or []), cell_seeds=restricted,
        resources=_resources(data.get("resources"), f"{path}: resources"),
        estimate=_estimate(data.get("estimate"), f"{path}: estimate"),
    )


def cell_argv(grid: Grid, cell: Cell, resume: bool = False) -> list[str]:
    """The argv that runs one cell: `lfo train ...` (or the grid's own command)."""
    template = (grid.resume_command or grid.command) if resume else grid.command
    if template is None:
        if resume:
            return [sys.executable, "-m", "lfo_cli", "train", "--resume", str(cell.run_dir)]
        argv = [sys.executable, "-m", "lfo_cli", "train", "--recipe", grid.base]
        for ov in cell.overrides:
            argv += ["--set", ov]
        return argv + ["--seed", str(cell.seed), "--out", str(cell.run_dir)]
    subs = {"{python}": sys.executable, "{base}": grid.base, "{out}": str(cell.run_dir),
            "{seed}": str(cell.seed), "{cell}": cell.cell_id}
    argv = []
    for token in template:
        if token == "{overrides}":
            argv += list(cell.overrides)
        elif token == "{set_args}":
            for ov in cell.overrides:
                argv += ["--set", ov]
        else:
            for ph in _PLACEHOLDERS:
                token = token.replace(ph, subs[ph])
            argv.append(token)
    return argv

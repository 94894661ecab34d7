"""Cached warm-started bases under ``$LFO_HOME/warmstart``: the cache key, the path and registering a run.

The key hashes the resolved config, the world's manifest and the base model's identity, so a warm start
is trained once per distinct setup and reused by every recipe that names it.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

from lfo_cli import run_record as rr
from lfo_cli.errors import LfoError
from lfo_cli.io import read_json
from lfo_cli.models import cache, micro, shipped
from lfo_cli.models import prompts as P
from lfo_cli.models.warmstart_config import WarmStartConfig
from lfo_cli.recipes import config_to_dict, load_recipe
from lfo_cli.worlds import DEFAULT_KIND, world_class


def resolve_config(recipe_name_or_cfg: str | WarmStartConfig, overrides: list[str] | None = None) -> tuple[str, WarmStartConfig]:
    """The warm start's short name and config, from a recipe name (with ``overrides``) or a config."""
    if isinstance(recipe_name_or_cfg, WarmStartConfig):
        if overrides:
            raise LfoError("overrides apply to recipe names, not to config objects")
        return "warmstart", recipe_name_or_cfg
    rec = load_recipe(recipe_name_or_cfg, overrides)
    if rec.kind != "warmstart":
        raise LfoError(f"recipe '{recipe_name_or_cfg}' is kind '{rec.kind}', not a warm start")
    return Path(rec.name).stem, rec.config


# Options added after warm starts were cached, with the value that reproduces the old data bit for bit:
# left out of the key at that value, so adding an option does not invalidate every cached base. Data options
# are named as canonical_data flattens them (data.epsilon is data.noise.epsilon); a world's own teacher options
# are its `World.warmstart_key_neutral`. The reply tools' value is the one their default had then.
NEUTRAL_LATER_FIELDS: dict[str, dict[str, Any]] = {
    "env": {"kind": DEFAULT_KIND},
    "data": {"imitate_random": True},
    "train": {"reply_loss_weight": 0.0, "reply_loss_tools": ["make_phone_call"]}}


# Train options that do not change the weights, left out of the key: the thread count (1 and 2 threads give
# the same bytes, tested), the time guard (a build that trips it caches nothing), and logging/checkpoint cadence.
BOOKKEEPING_TRAIN_FIELDS = ("threads", "max_minutes", "logging_steps", "save_steps")


def canonical_data(data: dict[str, Any]) -> dict[str, Any]:
    """The data section as the key hashes it: the teacher's noise (``data.noise.epsilon``, ...) flat among the
    other data options (``data.epsilon``, ...). The key hashes the settings, not their layout, so nesting the
    noise options in a section of their own kept every cached warm start's key."""
    flat = {k: v for k, v in data.items() if k != "noise"}
    noise = data.get("noise", {})
    assert not flat.keys() & noise.keys(), "a noise option would shadow a data option of the same name"
    return {**flat, **noise}


def warmstart_key(cfg: WarmStartConfig) -> str:
    """Hash of the resolved config, the world's files (their manifest) and the base model's identity."""
    world = world_class(cfg.env.kind)
    base = cfg.model.name
    if base == micro.model_name(world):
        base = f"{base}-{micro.cache_key(world)}"
    payload = {
        "config": {k: v for k, v in config_to_dict(cfg).items()},
        "data_manifest": world.data_identity(cfg.data.dir),
        "base": base,
        "template": P.chat_template(),
        "system": world.system_prompt or P.SYSTEM_PROMPT,
    }
    payload["config"]["data"] = canonical_data(payload["config"]["data"])
    payload["config"]["data"].pop("dir", None)  # the content (manifest) matters, not where it lives
    payload["config"]["data"].update(world.warmstart_key_fixed)
    neutrals = {**NEUTRAL_LATER_FIELDS, "data": {**NEUTRAL_LATER_FIELDS.get("data", {}),
                                                      **world.warmstart_key_neutral}}
    for section, fields in neutrals.items():  # options added later, at the value that changes nothing
        for name, neutral in fields.items():
            if payload["config"][section].get(name) == neutral:
                del payload["config"][section][name]
    if not payload["config"]["env"]:  # a section added later: absent from the keys built before it
        del payload["config"]["env"]
    payload["config"]["eval"] = None  # evaluation does not change the checkpoint
    for bookkeeping in BOOKKEEPING_TRAIN_FIELDS:  # nor do these (the thread count: tests/models/test_warmstart_reproducible.py)
        payload["config"]["train"].pop(bookkeeping, None)
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:12]


def warmstart_cache_path(cfg: WarmStartConfig) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in cfg.model.name.strip("/"))[-60:]
    return cache.lfo_home() / "warmstart" / f"{safe}-{warmstart_key(cfg)}"


def entry_state(path: Path) -> tuple[str, dict[str, Any]]:
    """``(state, marker)`` of a warm-start cache entry. States: ``complete`` (every planned SFT step, built
    under this key), ``budget-stopped`` (an older build cut by its wall-clock budget), ``foreign`` (its
    marker records another key: copied or renamed), ``not built``."""
    info = cache.entry_info(path)
    if info is None:
        return "not built", {}
    steps, planned = info.get(rr.TRAIN_STEPS), info.get(rr.TRAIN_PLANNED_STEPS)
    if info.get(rr.TRAIN_STOPPED_BY_BUDGET) or (isinstance(planned, int) and isinstance(steps, int) and steps < planned):
        return "budget-stopped", info
    if info.get("key") != Path(path).name:
        return "foreign", info
    return "complete", info


def check_entry(path: Path, name: str, recipe: str | None = None, overrides: list[str] | None = None) -> dict[str, Any]:
    """The marker of a usable cached warm start, else an LfoError (one line) saying how to rebuild it
    (``recipe``: the name or path the user gave, ``overrides``: its ``--set`` values, for the command)."""
    state, info = entry_state(path)
    rebuild = f"rebuild it with `{cache.build_command(recipe or name, overrides=overrides, force=True)}`"
    if state == "budget-stopped":
        steps = info.get(rr.TRAIN_STEPS)
        raise LfoError(f"warm start '{name}' at {path} stopped at its time budget after {steps} SFT steps: not the "
                       f"model its recipe defines; {rebuild}")
    if state == "foreign":
        raise LfoError(f"warm start '{name}' at {path} is foreign: its marker records key {info.get('key')!r}, not "
                       f"{Path(path).name!r} (copied or renamed from another build); {rebuild}")
    if state == "not built":
        raise LfoError(f"warm start '{name}' is not built ({path})")
    return info


def register_in_cache(cfg: WarmStartConfig, out_dir: Path) -> Path | None:
    """Copy a finished CLI run's ``model/`` into the cache so dual-LoRA recipes reuse it."""
    path = warmstart_cache_path(cfg)
    if cache.is_complete(path) or not (Path(out_dir) / "model").is_dir():
        return None

    def _copy(tmp: Path) -> dict:
        shutil.copytree(Path(out_dir) / "model", tmp / "model")
        summary = read_json(Path(out_dir) / rr.SUMMARY_FILE) if (Path(out_dir) / rr.SUMMARY_FILE).is_file() else {}
        run = read_json(Path(out_dir) / rr.RUN_FILE) if (Path(out_dir) / rr.RUN_FILE).is_file() else {}
        recipe = Path(str(run.get(rr.RUN_RECIPE))).stem if run.get(rr.RUN_RECIPE) else None
        return {**summary, "recipe": recipe, "key": path.name, "copied_from": str(out_dir)}

    return cache.build_once(path, _copy)


def warmstart_status(recipe_name: str, data_dir: str | Path | None = None,
                     overrides: list[str] | None = None) -> dict[str, Any]:
    """Is a warm start built, and what did its build take (for `lfo train --dry-run`): ``cached`` (a usable
    entry), ``state`` (:func:`entry_state`), ``shipped`` (lfo ships this build: installed on first use,
    :mod:`lfo_cli.models.shipped`), ``path``, ``minutes`` (the cached build's SFT + evaluation, when
    recorded), ``max_minutes`` (its SFT's time guard) and ``world`` (the kind of world it imitates in)."""
    name, cfg = resolve_config(recipe_name, overrides)
    if data_dir is not None:
        cfg.data.dir = Path(data_dir)
    path = warmstart_cache_path(cfg)
    state, info = entry_state(path)
    seconds = info.get("total_seconds")
    return {"recipe": name, "world": cfg.env.kind, "path": str(path), "cached": state == "complete", "state": state,
            "shipped": shipped.shipped_entry(path.name) is not None,
            "minutes": round(seconds / 60, 1) if isinstance(seconds, (int, float)) else None,
            "max_minutes": cfg.train.max_minutes}


def _unfinished_build(tmp: Path) -> dict[str, Any]:
    """A warm start's build temp dir (``.NAME.XXXX.tmp``): running, or interrupted (the next build of the
    recipe continues it from its last SFT checkpoint, :func:`lfo_cli.models.cache.build_once`)."""
    key = tmp.name[1:].removesuffix(".tmp").rsplit(".", 1)[0]
    steps = planned = None
    done = [int(p.name.split("-")[1]) for p in (tmp / "checkpoints").glob("checkpoint-*") if p.name.split("-")[1].isdigit()
            and (p / "trainer_state.json").is_file()]
    if done:
        try:
            state = json.loads((tmp / "checkpoints" / f"checkpoint-{max(done)}" / "trainer_state.json").read_text())
            steps, planned = state.get("global_step"), state.get("max_steps")
        except (OSError, ValueError):
            steps = max(done)
    stale = tmp in cache.stale_builds(tmp.parent / key)
    return {"recipe": None, "key": key, "path": str(tmp), "steps": steps, "planned_steps": planned, "threads": None,
            "built_at": None, "minutes": None, "size_bytes": cache.dir_size(tmp),
            "state": "interrupted (the next build continues it)" if stale else "building"}


def list_warmstarts() -> list[dict[str, Any]]:
    """One row per cached warm start under ``$LFO_HOME/warmstart``: recipe, state (:func:`entry_state`), SFT
    steps done and planned, threads, when it was built and how long it took, size; and one per build that is
    running or was interrupted (SFT steps of its last checkpoint). Reads markers and trainer states only."""
    root = cache.lfo_home() / "warmstart"
    rows = [_unfinished_build(tmp) for tmp in sorted(root.glob(".*.tmp")) if tmp.is_dir()] if root.is_dir() else []
    for path in sorted(root.iterdir()) if root.is_dir() else []:
        if path.name.startswith(".") or not path.is_dir():
            continue
        try:
            state, info = entry_state(path)
        except LfoError as exc:  # an unreadable marker
            state, info = f"unreadable ({exc})", {}
        if state == "not built":
            state = "incomplete (no marker)"
        seconds = info.get("total_seconds")
        rows.append({
            "recipe": info.get("recipe"), "key": path.name, "state": state, "path": str(path),
            "steps": info.get(rr.TRAIN_STEPS), "planned_steps": info.get(rr.TRAIN_PLANNED_STEPS),
            "threads": info.get(rr.TRAIN_THREADS), "built_at": info.get("built_at"),
            "minutes": round(seconds / 60, 1) if isinstance(seconds, (int, float)) else None,
            "size_bytes": cache.dir_size(path),
        })
    return rows


def check_world(ws: str, status: dict, kind: str) -> None:
    """A run of world ``kind`` refuses a warm start (its :func:`warmstart_status`) that imitates another world."""
    if status["world"] != kind:
        raise LfoError(f"model.warmstart={ws} imitates the {status['world']} world, but env.kind is {kind}: "
                       "name a warm start of the same world")

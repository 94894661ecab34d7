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

from lfo_cli.errors import LfoError
from lfo_cli.io import read_json
from lfo_cli.models import cache
from lfo_cli.models import prompts as P
from lfo_cli.models.warmstart_config import WarmStartConfig


def resolve_config(recipe_name_or_cfg: str | WarmStartConfig, overrides: list[str] | None = None) -> tuple[str, WarmStartConfig]:
    """The warm start's short name and config, from a recipe name (with ``overrides``) or a config."""
    if isinstance(recipe_name_or_cfg, WarmStartConfig):
        if overrides:
            raise LfoError("overrides apply to recipe names, not to config objects")
        return "warmstart", recipe_name_or_cfg
    from lfo_cli.recipes import load_recipe

    rec = load_recipe(recipe_name_or_cfg, overrides)
    if rec.kind != "warmstart":
        raise LfoError(f"recipe '{recipe_name_or_cfg}' is kind '{rec.kind}', not a warm start")
    return Path(rec.name).stem, rec.config


# Options added after warm starts were cached, with the value that reproduces the old data bit for bit:
# left out of the key at that value, so adding an option does not invalidate every cached base.
NEUTRAL_LATER_FIELDS: dict[str, dict[str, Any]] = {"data": {"slip": 0.0, "imitate_random": True, "field_extra": 0.0}}


def warmstart_key(cfg: WarmStartConfig) -> str:
    """Hash of the resolved config, the data manifest and the base model's identity."""
    from lfo_cli.env.world_files import MANIFEST_FILE
    from lfo_cli.recipes import config_to_dict

    manifest = Path(cfg.data.dir) / MANIFEST_FILE
    base = cfg.model.name
    if base == "micro":
        from lfo_cli.models import micro

        base = f"micro-{micro.cache_key()}"
    payload = {
        "config": {k: v for k, v in config_to_dict(cfg).items()},
        "data_manifest": read_json(manifest) if manifest.is_file() else None,
        "base": base,
        "template": P.chat_template(),
        "system": P.SYSTEM_PROMPT,
    }
    payload["config"]["data"].pop("dir", None)  # the content (manifest) matters, not where it lives
    for section, fields in NEUTRAL_LATER_FIELDS.items():  # options added later, at the value that changes nothing
        for name, neutral in fields.items():
            if payload["config"][section].get(name) == neutral:
                del payload["config"][section][name]
    payload["config"]["eval"] = None  # evaluation does not change the checkpoint
    payload["config"]["train"].pop("threads", None)  # nor does the thread count
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:12]


def warmstart_cache_path(cfg: WarmStartConfig) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in cfg.model.name.strip("/"))[-60:]
    return cache.lfo_home() / "warmstart" / f"{safe}-{warmstart_key(cfg)}"


def register_in_cache(cfg: WarmStartConfig, out_dir: Path) -> Path | None:
    """Copy a finished CLI run's ``model/`` into the cache so dual-LoRA recipes reuse it."""
    path = warmstart_cache_path(cfg)
    if cache.is_complete(path) or not (Path(out_dir) / "model").is_dir():
        return None

    def _copy(tmp: Path) -> dict:
        shutil.copytree(Path(out_dir) / "model", tmp / "model")
        summary = read_json(Path(out_dir) / "summary.json") if (Path(out_dir) / "summary.json").is_file() else {}
        return {"key": path.name, "copied_from": str(out_dir), **summary}

    return cache.build_once(path, _copy)


def warmstart_status(recipe_name: str, data_dir: str | Path | None = None) -> dict[str, Any]:
    """Is a warm start built, and what did its build take (for `lfo train --dry-run`): ``cached``, ``path``,
    ``minutes`` (the cached build's SFT + evaluation, when recorded) and ``max_minutes`` (its SFT's safety stop)."""
    from lfo_cli.models import cache

    name, cfg = resolve_config(recipe_name)
    if data_dir is not None:
        cfg.data.dir = Path(data_dir)
    path = warmstart_cache_path(cfg)
    info = cache.entry_info(path) if cache.is_complete(path) else None
    seconds = (info or {}).get("total_seconds")
    return {"recipe": name, "path": str(path), "cached": info is not None,
            "minutes": round(seconds / 60, 1) if isinstance(seconds, (int, float)) else None,
            "max_minutes": cfg.train.max_minutes}

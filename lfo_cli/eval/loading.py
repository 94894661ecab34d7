"""Load a training run's base model with its policy or world-model adapter (for evaluation)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lfo_cli import run_record as rr
from lfo_cli.errors import LfoError
from lfo_cli.io import read_json
from lfo_cli.models.base_ref import resolve_ref
from lfo_cli.models.registry import default_device, load_model
from lfo_cli.recipes import read_run_recipe
from lfo_cli.worlds import DEFAULT_KIND, World, world_class

POLICY_DIR = "."


def _adapter_dir(run_dir: Path, which: str) -> Path:
    path = run_dir if which == "policy" else run_dir / rr.WORLD_MODEL_DIR
    if not (path / rr.ADAPTER_CONFIG_FILE).is_file():
        raise LfoError(f"{run_dir}: no {which} adapter (expected {path / rr.ADAPTER_CONFIG_FILE}); is the run finished?")
    return path


def run_recipe(run_dir: str | Path) -> dict[str, Any]:
    return read_run_recipe(run_dir)


def load_run_world(run_dir: str | Path, data_dir: str | Path | None = None) -> World:
    """The world a run was trained on (of the recipe's ``env.kind``): ``data_dir`` if given, else the recipe's ``data.dir`` from here, else
    the absolute path recorded at training. A world whose manifest differs from the one recorded in the
    run's ``run.json`` is refused (it would evaluate the run on tasks it never saw, silently)."""
    run_dir = Path(run_dir)
    recorded = {}
    if (run_dir / rr.RUN_FILE).is_file():
        recorded = read_json(run_dir / rr.RUN_FILE).get(rr.RUN_WORLD) or {}
    want = recorded.get("fingerprint")
    recipe = run_recipe(run_dir)
    world = world_class((recipe.get("env") or {}).get("kind", DEFAULT_KIND))
    named = f"world {want}" if want else "a world not recorded in its run.json"
    if data_dir is None:
        relative = Path(recipe.get("data", {}).get("dir", "data"))
        candidates = [relative] + ([Path(recorded["dir"])] if recorded.get("dir") else [])
        data_dir = next((c for c in candidates if world.fingerprint(c) is not None), None)
        if data_dir is None:
            raise LfoError(f"{run_dir} was trained on {named} (data.dir {relative}), which is not found from "
                           f"{Path.cwd()}; pass --data-dir DIR holding that world (`lfo gen-env` writes one)")
        where = f"{data_dir} (the run's data.dir)"
    else:
        where = f"--data-dir {data_dir}"
    found = world.fingerprint(data_dir)
    if want and found is not None and found != want:
        raise LfoError(f"{where} holds world {found}, but {run_dir} was trained on world {want}; "
                       "pass --data-dir DIR holding the run's world")
    return world.load(data_dir)


def base_model_of(run_dir: str | Path, which: str = "policy") -> str:
    """The run's base model on this machine: the path its adapters were trained on when it still exists,
    else the portable reference in summary.json resolved here (`lfo_cli.models.base_ref`)."""
    cfg_path = _adapter_dir(Path(run_dir), which) / rr.ADAPTER_CONFIG_FILE
    try:
        base = json.loads(cfg_path.read_text())["base_model_name_or_path"]
    except (json.JSONDecodeError, KeyError) as exc:
        raise LfoError(f"{cfg_path}: corrupt adapter config ({exc})") from None
    summary = Path(run_dir) / rr.SUMMARY_FILE
    ref = None
    if summary.is_file():
        try:
            ref = json.loads(summary.read_text()).get(rr.BASE_MODEL_REF)
        except (json.JSONDecodeError, AttributeError) as exc:
            raise LfoError(f"{summary}: corrupt summary ({exc})") from None
    return resolve_ref(ref, base) if ref else base


def load_run_model(run_dir: str | Path, which: str = "policy", dtype: str = "float32", base: str | None = None):
    """``(PeftModel, tokenizer)``: the run's base with its `policy` or `world_model` adapter, in eval mode."""
    from peft import PeftModel

    run_dir = Path(run_dir)
    adapter = _adapter_dir(run_dir, which)
    model, tokenizer = load_model(base or base_model_of(run_dir, which), dtype=dtype, device=default_device())
    try:
        peft_model = PeftModel.from_pretrained(model, str(adapter), adapter_name=which)
    except Exception as exc:  # noqa: BLE001 - safetensors/PEFT raise many kinds for a damaged file
        weights = adapter / rr.ADAPTER_WEIGHTS_FILE
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise LfoError(f"{weights if weights.exists() else adapter}: cannot load the {which} adapter "
                       f"(corrupt or truncated? {first})") from None
    peft_model.eval()
    return peft_model, tokenizer

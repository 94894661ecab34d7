"""`lfo export`: a finished run as Hugging Face model files that load without lfo.

* ``merge=True``: the base with the policy adapter merged in, safetensors, plus the tokenizer: a
  standalone model dir that ``AutoModelForCausalLM.from_pretrained(DIR)`` loads (and vLLM serves).
* ``merge=False``: ``DIR/base`` (the base model), ``DIR/policy`` and, when the run has one,
  ``DIR/world_model`` (the adapters as PEFT saved them), and the tokenizer at ``DIR``: the run and its
  base in one movable directory, loaded with ``PeftModel.from_pretrained(base, DIR/policy)``.

The output is built under a temporary name and renamed into place; an existing DIR is refused. Before
the rename every written file is checked (:func:`validate_export`): each adapter's safetensors against the
shapes its adapter config implies on the base, each model dir loads with no missing or unexpected
weight, the tokenizer loads. A bad file fails the export with one line naming it, and nothing is written.
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path
from typing import Any

from lfo_cli import run_record as rr
from lfo_cli.errors import LfoError
from lfo_cli.eval.loading import base_model_of, load_run_model
from lfo_cli.io import atomic_dir, atomic_write_text
from lfo_cli.models.registry import load_model


def export_run(run_dir: str | Path, out: str | Path, *, merge: bool = False) -> dict:
    run_dir, out = Path(run_dir), Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise LfoError(f"{out} already exists; choose a new --out (an export never overwrites)")
    base = base_model_of(run_dir)
    has_wm = (run_dir / rr.WORLD_MODEL_DIR / rr.ADAPTER_CONFIG_FILE).is_file()
    with atomic_dir(out) as tmp:
        if merge:
            model, tokenizer = load_run_model(run_dir, "policy")
            merged = model.merge_and_unload()
            merged.save_pretrained(tmp, safe_serialization=True)
            tokenizer.save_pretrained(tmp)
            files = "config.json, model.safetensors, tokenizer files"
            load = f'AutoModelForCausalLM.from_pretrained("{out}")'
        else:
            model, tokenizer = load_model(base)
            model.save_pretrained(tmp / "base", safe_serialization=True)
            tokenizer.save_pretrained(tmp / "base")
            tokenizer.save_pretrained(tmp)
            for name, src in (("policy", run_dir), ("world_model", run_dir / rr.WORLD_MODEL_DIR)):
                if name == "world_model" and not has_wm:
                    continue
                (tmp / name).mkdir()
                for f in rr.ADAPTER_FILES:
                    shutil.copy2(src / f, tmp / name / f)
                cfg_path = tmp / name / rr.ADAPTER_CONFIG_FILE
                cfg = json.loads(cfg_path.read_text())
                cfg["base_model_name_or_path"] = str((out / "base").resolve())  # right where it was exported
                atomic_write_text(cfg_path, json.dumps(cfg, indent=2) + "\n")
            files = "base/, policy/" + (", world_model/" if has_wm else "") + ", tokenizer files"
            load = f'PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained("{out}/base"), "{out}/policy")'
        validate_export(tmp, merged=merge, adapters={"policy": run_dir} | ({"world_model": run_dir / rr.WORLD_MODEL_DIR}
                                                                        if has_wm and not merge else {}))
        atomic_write_text(tmp / "README.md", f"# {run_dir.name}, exported by `lfo export`\n\nFrom `{run_dir}` "
                          f"(base `{base}`){' with the policy adapter merged' if merge else ''}.\n\n"
                          f"```python\n{load}\n```\n")
    return {"run_dir": str(run_dir), "out": str(out), "merged": merge, "base_model": base, "files": files,
            "world_model": has_wm and not merge, "load": load}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _check_model_dir(path: Path, source: Path) -> Any:
    """``path`` loads as a causal LM with every weight present and of the right shape; returns its config."""
    import logging

    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity(logging.ERROR)  # the loading report is checked here, not printed
    try:
        model, info = AutoModelForCausalLM.from_pretrained(path, output_loading_info=True)
    except Exception as exc:  # noqa: BLE001 - safetensors/transformers raise many kinds for a damaged file
        raise LfoError(f"{source}: the exported model does not load (corrupt or truncated? {_first_line(exc)}); "
                       "nothing was exported") from None
    finally:
        hf_logging.set_verbosity(level)
    bad = {k: v for k in ("missing_keys", "unexpected_keys", "mismatched_keys") if (v := info.get(k))}
    if bad:
        kind, keys = next(iter(bad.items()))
        raise LfoError(f"{source}: {kind.replace('_', ' ')} in the exported weights ({sorted(map(str, keys))[0]}, "
                       f"{len(keys)} in all); nothing was exported")
    return model.config


def _check_adapter(path: Path, base_config: Any, source: Path) -> None:
    """``path``'s adapter weights hold exactly the tensors, with the shapes, that its config gives on the base."""
    import torch
    from peft import PeftConfig, get_peft_model, get_peft_model_state_dict
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    weights = source / rr.ADAPTER_WEIGHTS_FILE
    try:
        tensors = load_file(path / rr.ADAPTER_WEIGHTS_FILE)  # checks the header, and that the data covers it
    except Exception as exc:  # noqa: BLE001
        raise LfoError(f"{weights}: corrupt or truncated adapter weights ({_first_line(exc)}); nothing was exported") from None
    try:
        config = PeftConfig.from_pretrained(str(path))
    except Exception as exc:  # noqa: BLE001
        raise LfoError(f"{source / rr.ADAPTER_CONFIG_FILE}: unreadable adapter config ({_first_line(exc)}); "
                       "nothing was exported") from None
    # Shapes only (meta tensors: no memory, no initialisation); PEFT's note that the config names another
    # base path is expected here and not the user's to act on.
    with torch.device("meta"), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        skeleton = get_peft_model(AutoModelForCausalLM.from_config(base_config), config)
    want = {k: tuple(v.shape) for k, v in get_peft_model_state_dict(skeleton).items()}
    have = {k: tuple(v.shape) for k, v in tensors.items()}
    for problem, keys in (("missing", sorted(set(want) - set(have))), ("unexpected", sorted(set(have) - set(want))),
                          ("wrong shape", sorted(k for k in set(want) & set(have) if want[k] != have[k]))):
        if keys:
            shape = f": {have[keys[0]]} where the config gives {want[keys[0]]}" if problem == "wrong shape" else ""
            raise LfoError(f"{weights}: {problem} tensor {keys[0]}{shape} ({len(keys)} in all); nothing was exported")


def validate_export(out: Path, *, merged: bool, adapters: dict[str, Path]) -> None:
    """Check every file an export wrote into ``out`` (see the module docstring); ``adapters`` maps each
    exported adapter dir's name to the run dir it came from (named in the error)."""
    from transformers import AutoTokenizer

    out = Path(out)
    if merged:
        _check_model_dir(out, next(iter(adapters.values())) / rr.ADAPTER_WEIGHTS_FILE)
    else:
        base_config = _check_model_dir(out / "base", out / "base")
        for name, source in adapters.items():
            _check_adapter(out / name, base_config, source)
    try:
        AutoTokenizer.from_pretrained(str(out))
    except Exception as exc:  # noqa: BLE001
        raise LfoError(f"the exported tokenizer does not load ({_first_line(exc)}); nothing was exported") from None

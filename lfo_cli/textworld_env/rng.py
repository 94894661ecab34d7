"""Keep a world's randomness out of the trainer's: Python's, numpy's and torch's global states are restored."""

from __future__ import annotations

import random
import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def preserved_global_rng() -> Iterator[None]:
    """Whatever the block draws or reseeds, the global RNG states after it are the ones before it (numpy and
    torch only when already imported: this module imports neither)."""
    py = random.getstate()
    np = sys.modules.get("numpy")
    np_state = np.random.get_state() if np is not None else None
    torch = sys.modules.get("torch")
    torch_state = torch.get_rng_state() if torch is not None else None
    try:
        yield
    finally:
        random.setstate(py)
        if np_state is not None:
            sys.modules["numpy"].random.set_state(np_state)
        if torch_state is not None:
            sys.modules["torch"].set_rng_state(torch_state)

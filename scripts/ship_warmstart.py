"""Ship a built warm start with lfo: copy its cache entry's model and build record under
lfo_cli/artifacts/warmstart/KEY with a manifest of SHA-256 hashes (lfo_cli/models/shipped.py), so a fresh
machine installs it instead of training it.

    python scripts/ship_warmstart.py warmstart_demo --data-dir data --commit 91856d1 --machine "2-core x86 VM"

The entry must be complete in $LFO_HOME/warmstart under the key the recipe and world hash to now; the manifest
records the recipe, the `lfo gen-env` command of the world it was built in (so the test can recompute the key),
and where it was built. Commit the directory; tests/models/test_shipped_warmstart.py checks it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lfo_cli.errors import LfoError
from lfo_cli.models import shipped
from lfo_cli.models.warmstart_cache import resolve_config, warmstart_cache_path

# The world `make demo` generates (Makefile); the shipped demo warm start is built in it.
DEMO_WORLD = ["--num-companies", "100", "--num-train-tasks", "500", "--num-val-tasks", "100",
              "--heldout-fraction", "0.5", "--seed", "0"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("recipe")
    ap.add_argument("--data-dir", type=Path, default=Path("data"), help="the world it was built in")
    ap.add_argument("--commit", required=True, help="the commit that built it")
    ap.add_argument("--machine", required=True, help="the machine that built it, in words")
    args = ap.parse_args(argv)
    try:
        _, cfg = resolve_config(args.recipe)
        cfg.data.dir = args.data_dir
        dest = shipped.ship(warmstart_cache_path(cfg), recipe=args.recipe, built_by_commit=args.commit,
                            built_on=args.machine, gen_env=DEMO_WORLD)
    except LfoError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    size = sum(f.stat().st_size for f in dest.rglob("*") if f.is_file())
    print(f"shipped {dest} ({size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

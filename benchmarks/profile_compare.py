"""Before/after from pairs of run profiles (`benchmarks/run_profile.py`): wall-time ratios with a CI, by phase.

Each pair is two profiles of the same recipe and steps run at once on one thread each (so whatever else
the machine did, both saw it), "before" and "after" in the order given:

    python benchmarks/profile_compare.py B1.json A1.json B2.json A2.json [...]

Prints each pair's after/before ratio of the wall time, their geometric mean with a t-interval over the
pairs' log ratios (95%), the phase table (mean seconds per profile), and the projected 90-step run: the
step phases x 9 and the evaluation x (7 validations + 2 held-out checks) / (the profile's 2 + 2), by the
episode counts of ``--val-episodes`` and ``--heldout-episodes`` (observation_micro's 300 and 200).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path


def ratio_ci(ratios: list[float], level: float = 0.95) -> tuple[float, float, float]:
    """Geometric mean of ``ratios`` and a t-interval on their logs (the interval is nan with one pair)."""
    from scipy import stats

    logs = [math.log(r) for r in ratios]
    mean = statistics.fmean(logs)
    if len(logs) < 2:
        return math.exp(mean), math.nan, math.nan
    half = stats.t.ppf(0.5 + level / 2, len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def projected_run(profile: dict, steps: int = 90, evals: int = 7, heldouts: int = 2, val_episodes: int = 300,
                  heldout_episodes: int = 200) -> float:
    """Seconds of a ``steps``-step run from a short profile that evaluated twice (start and end, with held-out)."""
    phases = profile["phases"]
    evaluation = phases.get("evaluation", 0.0)
    per_step = (profile["wall_s"] - evaluation) / profile["steps"]
    measured = 2 * val_episodes + 2 * heldout_episodes
    return per_step * steps + evaluation * (evals * val_episodes + heldouts * heldout_episodes) / measured


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("profiles", nargs="+", type=Path, help="before, after, before, after, ...")
    ap.add_argument("--val-episodes", type=int, default=300)
    ap.add_argument("--heldout-episodes", type=int, default=200)
    a = ap.parse_args(argv)
    if len(a.profiles) % 2:
        ap.error("profiles come in pairs: before after [before after ...]")
    runs = [json.loads(p.read_text()) for p in a.profiles]
    before, after = runs[0::2], runs[1::2]
    walls = [(b["wall_s"], x["wall_s"]) for b, x in zip(before, after, strict=True)]
    proj = [(projected_run(b, val_episodes=a.val_episodes, heldout_episodes=a.heldout_episodes),
             projected_run(x, val_episodes=a.val_episodes, heldout_episodes=a.heldout_episodes))
            for b, x in zip(before, after, strict=True)]
    for i, ((wb, wa), (pb, pa)) in enumerate(zip(walls, proj, strict=True), 1):
        print(f"pair {i}: {wb:.1f} s -> {wa:.1f} s (x{wa / wb:.3f}); projected 90-step run {pb:.0f} -> {pa:.0f} s "
              f"(x{pa / pb:.3f})")
    for name, pairs in (("profile", walls), ("projected 90-step run", proj)):
        mean, lo, hi = ratio_ci([wa / wb for wb, wa in pairs])
        print(f"{name}: after/before x{mean:.3f} [{lo:.3f}, {hi:.3f}] over {len(pairs)} pair(s)")
    phases = sorted({p for r in runs for p in r["phases"]}, key=lambda p: -statistics.fmean(
        [r["phases"].get(p, 0.0) for r in before]))
    width = max(map(len, phases))
    print(f"  {'phase':<{width}}  {'before':>9}  {'after':>9}  ratio")
    for p in phases:
        b = statistics.fmean([r["phases"].get(p, 0.0) for r in before])
        x = statistics.fmean([r["phases"].get(p, 0.0) for r in after])
        print(f"  {p:<{width}}  {b:8.2f}s  {x:8.2f}s  {x / b if b else math.nan:5.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

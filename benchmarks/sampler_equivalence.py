"""Is a checkpoint's sampled success the same under lfo's sampler and under `model.generate`?

Both samplers play the same episodes (``--tasks`` fresh tasks of the training companies at difficulties
1-2, ``--samples`` each, the validation's settings: temperature 1, 16 turns) from the recipe's warm start;
the success difference is tested for equivalence within ``--margin`` by two one-sided paired t-tests
(TOST) over the episodes, and the wall time of each sampler is printed as a ratio (blocks of episodes,
the samplers alternating, so that the machine's load falls on both).

    python benchmarks/sampler_equivalence.py --recipe observation_micro --tasks 500 --samples 2

Writes ``reports/benchmarks/sampler_equivalence_<recipe>_<date>_<commit>.json``.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

from lfo_cli.io import short_commit, write_measurement

REPO = Path(__file__).resolve().parents[1]


def tost_paired(diffs: list[float], margin: float) -> dict:
    """Two one-sided paired t-tests of mean(diffs) in (-margin, +margin); equivalent when both p < 0.05."""
    from scipy import stats

    lower = stats.ttest_1samp(diffs, -margin, alternative="greater").pvalue
    upper = stats.ttest_1samp(diffs, margin, alternative="less").pvalue
    n = len(diffs)
    mean = sum(diffs) / n
    half = stats.t.ppf(0.95, n - 1) * stats.sem(diffs)  # the 90% interval that TOST at 5% checks
    return {"mean_diff": mean, "ci90": [mean - half, mean + half], "p_lower": float(lower), "p_upper": float(upper),
            "p": float(max(lower, upper)), "equivalent": bool(max(lower, upper) < 0.05), "margin": margin, "n": n}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--recipe", default="observation_micro")
    ap.add_argument("--tasks", type=int, default=500)
    ap.add_argument("--samples", type=int, default=2)
    ap.add_argument("--margin", type=float, default=0.03, help="equivalence margin on the success rate")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--blocks", type=int, default=4, help="episode blocks, samplers alternating")
    ap.add_argument("--out-dir", type=Path, default=REPO / "reports" / "benchmarks")
    a = ap.parse_args(argv)

    import torch

    from lfo_cli.env import load_world
    from lfo_cli.env.plugin import CustomerServiceWorld
    from lfo_cli.env.tasks import fresh_training_tasks
    from lfo_cli.models.agent_eval import evaluate_agent
    from lfo_cli.models.registry import load_model
    from lfo_cli.models.warmstart import ensure_warmstart
    from lfo_cli.recipes import load_recipe

    commit = short_commit(REPO)  # the code measured: taken before the run, which may outlast later commits
    torch.set_num_threads(a.threads)
    cfg = load_recipe(a.recipe).config
    base = str(ensure_warmstart(cfg.model.warmstart, data_dir=cfg.data.dir, build=False))
    model, tok = load_model(base, dtype="float32")
    world = load_world(cfg.data.dir)
    pool = [t for t in fresh_training_tasks(world, 8 * a.tasks, seed=a.seed + 1) if t.difficulty <= 2][: a.tasks]
    tasks = [t for t in pool for _ in range(a.samples)]
    # Blocks of episodes, each played by both samplers in alternating order: a change in the machine's load
    # falls on both, so the time ratio is fair on a busy machine too.
    results: dict[str, list[float]] = {"generate": [], "lfo": []}
    seconds = {"generate": 0.0, "lfo": 0.0}
    size = math.ceil(len(tasks) / a.blocks)
    for b in range(a.blocks):
        block = tasks[b * size:(b + 1) * size]
        for sampler in (("generate", "lfo") if b % 2 == 0 else ("lfo", "generate")):
            start = time.perf_counter()
            out = evaluate_agent(model, tok, CustomerServiceWorld(world), block, temperature=1.0, max_turns=16, seed=a.seed + b,
                                 sampler=sampler)
            seconds[sampler] += time.perf_counter() - start
            results[sampler] += [float(e["success"]) for e in out["episodes"]]
        print(f"block {b + 1}/{a.blocks}: " + ", ".join(f"{k} {sum(v) / len(v):.3f} ({seconds[k]:.0f} s)"
                                                       for k, v in results.items()), flush=True)
    diffs = [x - y for x, y in zip(results["lfo"], results["generate"], strict=True)]
    test = tost_paired(diffs, a.margin)
    verdict = "equivalent" if test["equivalent"] else "not shown equivalent"
    print(f"lfo - generate: {test['mean_diff']:+.4f} (90% CI [{test['ci90'][0]:+.4f}, {test['ci90'][1]:+.4f}]), "
          f"TOST p {test['p']:.2g} at margin {a.margin}: {verdict}; time lfo / generate "
          f"x{seconds['lfo'] / seconds['generate']:.3f}")
    result = {"recipe": a.recipe, "episodes": len(tasks), "success": {k: sum(v) / len(v) for k, v in results.items()},
              "seconds": {k: round(v, 1) for k, v in seconds.items()}, "tost": test, "threads": a.threads,
              "commit": commit, "date": time.strftime("%Y-%m-%d")}
    print(f"wrote {write_measurement(a.out_dir, f'sampler_equivalence_{a.recipe}', result)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

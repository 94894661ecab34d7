"""What one more world-model forward costs, in tokens: the calibration of ``FORWARD_COST_TOKENS``.

The world-model batch planner (``lfo_cli.train.wm_batches``) minimises padded tokens plus a fixed cost
per forward, expressed in tokens. This times forward + backward of the world-model loss (the
`world_model` adapter active, as the `separate` coupling runs it; ``--coupling stacked`` for both)
on right-padded batches of several shapes, rows x length, a third of each row being reply tokens,
and fits ``seconds = fixed + per_token x tokens`` (``scipy.stats.linregress``); ``fixed / per_token`` is the
forward cost in tokens. Shapes are timed round-robin, ``--repeats`` times, medians fitted. Timing does
not depend on the weights, so the plain `micro` base is used (no warm start needed).

    python benchmarks/wm_forward_cost.py
    python benchmarks/wm_forward_cost.py --coupling stacked --repeats 11 --json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

SHAPES = [(1, 32), (1, 64), (1, 128), (1, 256), (2, 128), (4, 64), (4, 128), (4, 256), (8, 128), (8, 256),
          (16, 128), (16, 256)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="micro")
    parser.add_argument("--coupling", choices=["separate", "stacked"], default="separate")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    a = parser.parse_args()
    if a.repeats < 1:
        parser.error("--repeats must be >= 1")

    from lfo_cli.perf import tune_malloc

    malloc_tuned = tune_malloc()  # the process `lfo train` runs in

    import torch
    from scipy.stats import linregress
    from transformers import set_seed

    from lfo_cli.models.registry import load_model
    from lfo_cli.train.adapters import LoraSettings, active, attach_dual_lora
    from lfo_cli.train.objectives import objective_class
    from lfo_cli.train.wm_batches import FORWARD_COST_TOKENS, IGNORE_INDEX, WMBatch
    from lfo_cli.train.wm_loss import world_model_forward

    torch.set_num_threads(a.threads)
    set_seed(a.seed)
    model, tok = load_model(a.model)
    model = attach_dual_lora(model, LoraSettings())
    model.train()
    adapters = list(objective_class(a.coupling).predict_adapters)
    vocab = len(tok)

    def batch(rows: int, length: int) -> WMBatch:
        ids = torch.randint(0, vocab, (rows, length))
        labels = ids.clone()
        labels[:, : length * 2 // 3] = IGNORE_INDEX  # the state and action; the reply is the last third
        return WMBatch(ids, torch.ones_like(ids), labels)

    batches = {shape: batch(*shape) for shape in SHAPES}

    def term(b: WMBatch) -> float:
        t0 = time.perf_counter()
        loss = world_model_forward(model, b)[0]
        loss.backward()
        model.zero_grad(set_to_none=True)
        return time.perf_counter() - t0

    samples = {shape: [] for shape in SHAPES}
    with active(model, adapters):  # switched once, as the trainer switches once per world-model term
        for b in batches.values():  # warm-up: first calls pay for caches
            term(b)
        for _ in range(a.repeats):
            for shape in SHAPES:
                samples[shape].append(term(batches[shape]))
    tokens = [rows * length for rows, length in SHAPES]
    seconds = [statistics.median(samples[s]) for s in SHAPES]
    fit = linregress(tokens, seconds)
    fixed, per_token = fit.intercept, fit.slope
    result = {
        "model": a.model, "coupling": a.coupling, "threads": a.threads, "repeats": a.repeats,
        "malloc_tuned": malloc_tuned,
        "shapes": [{"rows": r, "length": n, "ms": round(float(t) * 1e3, 2)} for (r, n), t in zip(SHAPES, seconds, strict=True)],
        "fixed_ms": round(float(fixed) * 1e3, 2), "per_token_us": round(float(per_token) * 1e6, 1),
        "forward_cost_tokens": round(float(fixed / per_token)), "FORWARD_COST_TOKENS": FORWARD_COST_TOKENS,
    }
    if a.json:
        print(json.dumps(result, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"world-model forward + backward on {a.model} ({a.coupling}, {a.threads} threads, "
                        f"median of {a.repeats})")
    for col in ("rows x length", "tokens", "ms", "fit ms"):
        table.add_column(col, justify="right")
    for (rows, length), t in zip(SHAPES, seconds, strict=True):
        table.add_row(f"{rows} x {length}", str(rows * length), f"{t * 1e3:.1f}",
                      f"{(fixed + per_token * rows * length) * 1e3:.1f}")
    Console().print(table)
    print(f"fixed {result['fixed_ms']} ms per forward, {result['per_token_us']} us per token: one forward costs "
          f"as much as ~{result['forward_cost_tokens']} tokens (FORWARD_COST_TOKENS = {FORWARD_COST_TOKENS})")


if __name__ == "__main__":
    main()

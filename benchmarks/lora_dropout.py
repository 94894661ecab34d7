"""LoRA dropout on CPU: ``nn.Dropout`` vs ``lfo_cli.train.dropout.SparseDropout``, same shapes, same p.

Times one training-mode dropout of a (rows x hidden) activation, the input of a LoRA ``A`` matrix,
and the 192 x 192 base projection beside it for scale; prints the ratio nn.Dropout / SparseDropout.
Also checks that both drop the same fraction (p) over the timed calls.

    python benchmarks/lora_dropout.py                   # micro's hidden 192, p 0.05 (the design's)
    python benchmarks/lora_dropout.py --hidden 576 --p 0.1 --json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=[64, 600, 5000], help="tokens in the activation")
    parser.add_argument("--hidden", type=int, default=192)
    parser.add_argument("--p", type=float, default=0.05)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    a = parser.parse_args()
    if not 0 < a.p < 1 or a.repeats < 1 or a.hidden < 1 or min(a.rows) < 1:
        parser.error("need 0 < --p < 1 and positive --repeats, --hidden, --rows")

    import torch

    from lfo_cli.perf import tune_malloc
    from lfo_cli.train.dropout import SparseDropout

    tune_malloc()  # as in `lfo train`
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    plain, sparse = torch.nn.Dropout(a.p).train(), SparseDropout(a.p).train()
    weight = torch.randn(a.hidden, a.hidden)

    def timed(fn, x) -> tuple[float, float]:
        fn(x)
        times, dropped = [], 0.0
        for _ in range(a.repeats):
            t0 = time.perf_counter()
            y = fn(x)
            times.append(time.perf_counter() - t0)
            dropped += float((y == 0).float().mean())
        return statistics.median(times), dropped / a.repeats

    rows = []
    for n in a.rows:
        x = torch.randn(n, a.hidden) + 10.0  # no exact zeros in the input: a zero output is a drop
        t_plain, f_plain = timed(plain, x)
        t_sparse, f_sparse = timed(sparse, x)
        t_mm, _ = timed(lambda x: x @ weight, x)
        rows.append({"rows": n, "elements": n * a.hidden, "nn_dropout_us": round(t_plain * 1e6, 1),
                     "sparse_dropout_us": round(t_sparse * 1e6, 1), "speedup": round(t_plain / t_sparse, 2),
                     "base_matmul_us": round(t_mm * 1e6, 1), "dropped_nn": round(f_plain, 4),
                     "dropped_sparse": round(f_sparse, 4)})
    if a.json:
        print(json.dumps({"hidden": a.hidden, "p": a.p, "threads": a.threads, "rows": rows}, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"training-mode dropout, p {a.p}, hidden {a.hidden}, {a.threads} threads (median of {a.repeats})")
    for col in ("rows", "nn.Dropout us", "SparseDropout us", "ratio", f"{a.hidden}x{a.hidden} matmul us",
                "dropped (nn / sparse)"):
        table.add_column(col)
    for r in rows:
        table.add_row(str(r["rows"]), f"{r['nn_dropout_us']:.0f}", f"{r['sparse_dropout_us']:.0f}",
                      f"{r['speedup']:.2f}x", f"{r['base_matmul_us']:.0f}", f"{r['dropped_nn']:.4f} / {r['dropped_sparse']:.4f}")
    Console().print(table)


if __name__ == "__main__":
    main()

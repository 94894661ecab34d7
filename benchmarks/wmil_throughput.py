"""WMIL throughput: the vectorised trainer vs the design's per-step loop, measured in the same run.

Both train the same BabyModel with REINFORCE on PatternEcho (8 actions, hidden 64, 2 layers):

- vectorised: ``Trainer.train_step`` -- ``--num-envs`` episodes as one (B, T) tensor batch, one update;
- per-step:   ``PerStepTrainer.train_step`` -- one env, python objects, one model call per env step
              (the design's loop), one update per 64 env steps.

Env-steps/s counts actions taken in environments, updates included. Then the wall time to reach
50% PatternEcho training success from scratch (the default MVP configuration, 64 envs per step).

    python benchmarks/wmil_throughput.py                    # ~1 minute
    python benchmarks/wmil_throughput.py --seconds 5 --json

Numbers measured while other processes use the CPU are lower bounds.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def measure(step_fn, env_steps_of, seconds: float, warmup: int = 5) -> dict:
    for _ in range(warmup):
        step_fn()
    start_steps = env_steps_of()
    t0 = time.perf_counter()
    n = 0
    while time.perf_counter() - t0 < seconds:
        step_fn()
        n += 1
    dt = time.perf_counter() - t0
    env_steps = env_steps_of() - start_steps
    return {"updates": n, "env_steps": env_steps, "seconds": dt, "env_steps_per_s": env_steps / dt}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0, help="measurement time per trainer")
    ap.add_argument("--num-envs", type=int, default=1024, help="envs per step of the vectorised trainer")
    ap.add_argument("--threads", type=int, default=1, help="torch threads for both trainers")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true", help="print one JSON document")
    ap.add_argument("--out", type=Path, default=None, help="also write the result JSON + CSV here")
    args = ap.parse_args(argv)

    import torch

    from lfo_cli.wmil.config import WMILConfig
    from lfo_cli.wmil.reference import PerStepTrainer
    from lfo_cli.wmil.trainer import Trainer, train

    torch.set_num_threads(args.threads)
    tmp = Path(tempfile.mkdtemp(prefix="wmil_bench_"))

    vec = Trainer(WMILConfig(num_envs=args.num_envs, threads=args.threads, seed=args.seed), tmp / "vec")
    vec_steps = [0]

    def vec_step():
        vec.train_step()
        vec_steps[0] += args.num_envs * vec.env.horizon

    vectorised = measure(vec_step, lambda: vec_steps[0], args.seconds)
    ref = PerStepTrainer(WMILConfig(num_envs=64, threads=args.threads, seed=args.seed))
    per_step = measure(ref.train_step, lambda: ref.env_steps, args.seconds, warmup=2)

    t0 = time.perf_counter()
    summary = train(WMILConfig(seed=args.seed, threads=args.threads, log_every=10, save_every=10, eval_episodes=64),
                    tmp / "to50", force=True, progress=False, stop_at_success=0.5, quiet=True)
    total = time.perf_counter() - t0
    result = {
        "task": "pattern_echo", "num_actions": 8, "hidden_dim": 64, "num_layers": 2, "threads": args.threads,
        "cpu_count": os.cpu_count(), "load_avg_1m": os.getloadavg()[0],
        "vectorised": {"num_envs": args.num_envs, **vectorised},
        "per_step": {"num_envs": 1, "update_every": 64, **per_step},
        "ratio": vectorised["env_steps_per_s"] / per_step["env_steps_per_s"],
        "time_to_50pct": {"training_wall_s": summary["wall_s"], "steps": summary["steps"],
                          "success": summary["final"]["charts/success"],
                          "call_wall_s_incl_setup_eval": total},
    }
    if args.out:
        from lfo_cli.io import atomic_write_json, atomic_write_text

        args.out.mkdir(parents=True, exist_ok=True)
        atomic_write_json(args.out / "wmil_throughput.json", result)
        atomic_write_text(args.out / "wmil_throughput.csv",
                          "trainer,num_envs,env_steps_per_s\n"
                          f"vectorised,{args.num_envs},{vectorised['env_steps_per_s']:.1f}\n"
                          f"per_step,1,{per_step['env_steps_per_s']:.1f}\n")
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        from rich.console import Console
        from rich.table import Table

        table = Table(title=f"WMIL throughput (PatternEcho, {args.threads} thread(s), load {result['load_avg_1m']:.1f})")
        for col in ("trainer", "envs/step", "updates", "env-steps", "env-steps/s"):
            table.add_column(col, justify="right")
        table.add_row("vectorised", str(args.num_envs), str(vectorised["updates"]), str(vectorised["env_steps"]),
                      f"{vectorised['env_steps_per_s']:,.0f}")
        table.add_row("per-step (design)", "1", str(per_step["updates"]), str(per_step["env_steps"]),
                      f"{per_step['env_steps_per_s']:,.0f}")
        Console(width=max(Console().width, 120)).print(table)
        print(f"ratio vectorised / per-step: {result['ratio']:.1f}x")
        t50 = result["time_to_50pct"]
        print(f"time to 50% PatternEcho success: {t50['training_wall_s']:.2f} s of training "
              f"({t50['steps']} steps, success {t50['success']:.2f}); {t50['call_wall_s_incl_setup_eval']:.2f} s incl. setup+eval")
    return result


if __name__ == "__main__":
    main()

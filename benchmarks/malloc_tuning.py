"""Seconds per SFT step of the micro warm start with and without ``lfo_cli.perf.tune_malloc``.

Each arm runs in a fresh process (malloc settings are per process), builds the same SFTTrainer on the
same tokenized prior trajectories, and times steps with a callback; the first steps are warm-up.
Prints both medians and the ratio (untuned / tuned).

    python benchmarks/malloc_tuning.py                 # 30 steps per arm, batch 8
    python benchmarks/malloc_tuning.py --steps 20 --json
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import time


def worker(steps: int, batch_size: int, data_dir: str) -> dict:
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback, set_seed
    from trl import SFTConfig, SFTTrainer

    from lfo_cli.env.noise import NoiseConfig
    from lfo_cli.env.plugin import CustomerServiceWorld
    from lfo_cli.env.trl_env import CustomerServiceEnv
    from lfo_cli.env.world_files import load_world
    from lfo_cli.models import prompts
    from lfo_cli.models.registry import load_model
    from lfo_cli.models.sft_data import tokenize_trajectories
    from lfo_cli.models.trajectories import collect_trajectories
    from lfo_cli.perf import tune_malloc

    tuned = tune_malloc()  # a no-op under LFO_NO_MALLOC_TUNING=1
    set_seed(0)
    torch.set_num_threads(int(os.environ.get("LFO_BENCH_THREADS", torch.get_num_threads())))
    world = load_world(data_dir)
    model, tok = load_model("micro")
    trajs = collect_trajectories(CustomerServiceWorld(world), world.tasks["train"][: steps * batch_size], policy="prior",
                                 noise=NoiseConfig(epsilon=0.1, field_dropout=0.1), seed=0)
    rows, _ = tokenize_trajectories(tok, trajs, prompts.tool_schemas(CustomerServiceEnv), 1024)
    stamps: list[float] = []

    class _Clock(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            stamps.append(time.perf_counter())

    args = SFTConfig(
        output_dir="/tmp/lfo-malloc-bench", max_steps=steps, per_device_train_batch_size=batch_size,
        learning_rate=1e-3, report_to="none", disable_tqdm=True, use_cpu=True, save_strategy="no",
        logging_steps=10_000, gradient_checkpointing=False, dataloader_num_workers=0, seed=0,
    )
    trainer = SFTTrainer(model=model, args=args, train_dataset=Dataset.from_list(rows), processing_class=tok,
                         callbacks=[_Clock()])
    trainer.train()
    per_step = [b - a for a, b in itertools.pairwise(stamps)][3:]  # drop warm-up steps
    return {"tuned": tuned, "median_step_s": statistics.median(per_step), "steps_timed": len(per_step)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--data-dir", default="data")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        print(json.dumps(worker(a.steps, a.batch_size, a.data_dir)))
        return
    results = {}
    for arm, extra in (("untuned", {"LFO_NO_MALLOC_TUNING": "1"}), ("tuned", {})):
        env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "LFO_NO_MALLOC_TUNING"}
        env.update(extra)
        out = subprocess.run(
            [sys.executable, __file__, "--worker", "--steps", str(a.steps), "--batch-size", str(a.batch_size),
             "--data-dir", a.data_dir],
            env=env, capture_output=True, text=True, check=True,
        )
        results[arm] = json.loads(out.stdout.strip().splitlines()[-1])
    ratio = results["untuned"]["median_step_s"] / results["tuned"]["median_step_s"]
    summary = {**results, "speedup_ratio": round(ratio, 3)}
    if a.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"untuned: {results['untuned']['median_step_s']:.3f} s/step   "
              f"tuned: {results['tuned']['median_step_s']:.3f} s/step (mallopt applied: {results['tuned']['tuned']})")
        print(f"speed-up (untuned / tuned): {ratio:.2f}x")


if __name__ == "__main__":
    main()

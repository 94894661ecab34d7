"""Environment throughput: tool calls per second on one core.

Usage: python benchmarks/env_throughput.py [--episodes N] [--seed S] [--json]

Drives a realistic mix of episodes (oracle, probe, prior and random policies in equal numbers, all
difficulties, train/val/transfer tasks) and times ``Episode.step`` alone (the environment's cost,
what a trainer pays per tool call) and the whole loop including the scripted policies and resets.
The process is pinned to one CPU when the OS allows it. Numbers measured on a shared machine are
lower bounds: other processes compete for the same core.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lfo_cli.env import Episode, generate_world, make_policy  # noqa: E402
from lfo_cli.env.policies import PublicTask  # noqa: E402

TARGET = 20_000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=4000, help="episodes per policy")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    pinned = None
    if hasattr(os, "sched_setaffinity"):
        cpu = sorted(os.sched_getaffinity(0))[-1]
        os.sched_setaffinity(0, {cpu})
        pinned = cpu
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")

    world = generate_world(num_companies=100, num_train_tasks=500, num_val_tasks=100, heldout_fraction=0.5,
                           seed=args.seed)
    tasks = world.all_tasks()
    ep = Episode(world)
    step = ep.step
    per_policy = {}
    total_calls, env_time, wall0 = 0, 0.0, time.perf_counter()
    import random

    for name in ("oracle", "probe", "prior", "random"):
        policy = make_policy(name, world)
        calls, t_env = 0, 0.0
        for i in range(args.episodes):
            task = tasks[i % len(tasks)]
            ep.reset(task, i)
            policy.begin(task if policy.uses_hidden_knowledge else PublicTask.of(task), random.Random(i))
            obs = None
            while not ep.done:
                action = policy.act(obs)
                if action is None:
                    break
                t0 = time.perf_counter()
                obs = step(action.tool, action.args)
                t_env += time.perf_counter() - t0
                calls += 1
        per_policy[name] = {"calls": calls, "env_calls_per_s": calls / t_env}
        total_calls += calls
        env_time += t_env
    wall = time.perf_counter() - wall0
    result = {
        "tool_calls": total_calls,
        "env_calls_per_s": total_calls / env_time,
        "end_to_end_calls_per_s": total_calls / wall,
        "per_policy": per_policy,
        "target_calls_per_s": TARGET,
        "meets_target": total_calls / env_time >= TARGET,
        "pinned_cpu": pinned,
        "load_avg_1min_at_start": load,
        "cpus_on_machine": os.cpu_count(),
        "python": platform.python_version(),
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"tool calls: {total_calls:,} over {4 * args.episodes:,} episodes (oracle/probe/prior/random mix), "
          f"pinned to CPU {pinned}, 1-min load average at start {load:.2f} on {os.cpu_count()} CPUs")
    for name, r in per_policy.items():
        print(f"  {name:7s} {r['calls']:>8,} calls  {r['env_calls_per_s']:>10,.0f} calls/s (env.step only)")
    print(f"env.step throughput: {result['env_calls_per_s']:,.0f} tool calls/s on one core "
          f"({result['env_calls_per_s'] / TARGET:.1f}x the {TARGET:,}/s target)")
    print(f"end-to-end (policies + resets + env): {result['end_to_end_calls_per_s']:,.0f} tool calls/s")
    if load > 1.0:
        print("note: the machine was busy (load > 1): these numbers are lower bounds")


if __name__ == "__main__":
    main()

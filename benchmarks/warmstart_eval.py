"""A model on a world's splits next to the world's random teacher: is a warm start inside the pilot bar?

    python benchmarks/warmstart_eval.py --world textworld --data-dir data_tw \
        --model ~/.cache/lfo/warmstart/micro_textworld-KEY/model --splits train,val,heldout --tasks 50 --samples 2

Per split: the model's success over ``--tasks`` tasks x ``--samples`` episodes at temperature 1.0 (Wilson 95%
interval), its score share where the world records one, and the success of the world's ``random`` teacher
on the same tasks (:meth:`lfo_cli.worlds.World.teacher_rollouts`, one rollout each). `--json` prints the rows.
"""

from __future__ import annotations

import argparse
import json
import sys


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--world", default="customer_service", help="env.kind of the world")
    p.add_argument("--data-dir", default="data", help="the world's files (lfo gen-env)")
    p.add_argument("--model", required=True, help="a model dir (a warm start's model/) or a registry name")
    p.add_argument("--splits", default="train,val,heldout", help="comma-separated splits of the world")
    p.add_argument("--tasks", type=int, default=50, help="first tasks of each split")
    p.add_argument("--samples", type=int, default=2, help="episodes per task")
    p.add_argument("--max-turns", type=int, default=20, help="tool calls per episode")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)

    from lfo_cli.errors import LfoError
    from lfo_cli.models.agent_eval import evaluate_agent
    from lfo_cli.models.registry import load_model
    from lfo_cli.stats import wilson_interval
    from lfo_cli.worlds import load_world

    try:
        world = load_world(a.world, a.data_dir)
        splits = [s for s in a.splits.split(",") if s]
        pools = {s: world.tasks(s)[: a.tasks] for s in splits}
        model, tokenizer = load_model(a.model)
    except LfoError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    rows = []
    for split, tasks in pools.items():
        episodes = evaluate_agent(model, tokenizer, world, [t for t in tasks for _ in range(a.samples)],
                                  temperature=1.0, max_turns=a.max_turns, seed=a.seed)["episodes"]
        wins = sum(e["success"] for e in episodes)
        lo, hi = wilson_interval(wins, len(episodes))
        random = world.teacher_rollouts(tasks, policy="random", seed=a.seed)
        row = {"split": split, "episodes": len(episodes), "success": wins / len(episodes), "ci95": [lo, hi],
               "random_success": sum(r["reward"] >= 1.0 for r in random) / len(random)}
        shares = [e["score_share"] for e in episodes if "score_share" in e]
        if shares:
            row["score_share"] = sum(shares) / len(shares)
        rows.append(row)
        if not a.json:
            print(f"{split}: success {row['success']:.1%} [{lo:.1%}, {hi:.1%}] over {len(episodes)} episodes; "
                  f"random teacher {row['random_success']:.1%}", flush=True)
    if a.json:
        print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Does a warm-started model read its tasks, or remember them? Success on train vs val tasks.

RL trains on the world's `train` tasks. A warm start that imitated on those same tasks can succeed
there by recalling the customers' values instead of copying them from the form's reply; validation
tasks (same companies, new customers) then show the skill. This plays the first ``--tasks`` tasks of
the chosen difficulties of each split with each model (temperature 1.0, same sampling seed) and
prints success by split and difficulty. ``--splits ... fresh`` adds newly drawn tasks of the training
companies (``fresh_training_tasks``, seeded, never in any split): as many unseen tasks as you ask for,
e.g. to compare two warm starts with tighter intervals than the 20 val tasks per difficulty allow.

    python benchmarks/memorisation_gap.py ~/.cache/lfo/warmstart/micro-*/model
    python benchmarks/memorisation_gap.py runs/ws_micro/model runs/ws_fresh/model --difficulties 1 3 --seed 1 --json
    python benchmarks/memorisation_gap.py A/model B/model --splits fresh --difficulties 1 --tasks 200
"""

from __future__ import annotations

import argparse
import json


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="+", help="model directories (a warm start's model/)")
    parser.add_argument("--data-dir", default="data")
    parser.add_argument("--difficulties", type=int, nargs="+", default=[1, 3])
    parser.add_argument("--tasks", type=int, default=60, help="tasks per split (the first N of those difficulties)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--splits", nargs="+", default=["train", "val"], choices=["train", "val", "transfer", "fresh"])
    parser.add_argument("--json", action="store_true")
    a = parser.parse_args()

    from lfo_cli.env import load_world
    from lfo_cli.env.plugin import CustomerServiceWorld
    from lfo_cli.env.tasks import fresh_training_tasks
    from lfo_cli.models.agent_eval import evaluate_agent, summarize_eval
    from lfo_cli.models.registry import load_model

    world = load_world(a.data_dir)
    pools = {s: list(world.tasks.get(s, [])) for s in a.splits if s != "fresh"}
    if "fresh" in a.splits:  # enough draws that every difficulty has a.tasks of its own
        pools["fresh"] = fresh_training_tasks(world, a.tasks * 5 * len(a.difficulties), seed=a.seed, split="bench")
    rows = []
    for path in a.models:
        model, tokenizer = load_model(path)
        for split in a.splits:
            tasks = [t for t in pools[split] if t.difficulty in a.difficulties][: a.tasks]
            s = summarize_eval(evaluate_agent(model, tokenizer, CustomerServiceWorld(world), tasks, seed=a.seed))
            row = {"model": path, "split": split, "valid_tool_call_rate": round(s["eval/valid_tool_call_rate"], 3)}
            for d in a.difficulties:
                row[f"success_d{d}"] = s.get(f"eval/success_d{d}")
                row[f"episodes_d{d}"] = s.get(f"eval/episodes_d{d}")
            rows.append(row)
    if a.json:
        print(json.dumps(rows, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"success by split (temperature 1.0, seed {a.seed})")
    for col in rows[0]:
        table.add_column(col)
    for row in rows:
        table.add_row(*[f"{v:.0%}" if isinstance(v, float) and k.startswith("success") else str(v) for k, v in row.items()])
    Console().print(table)


if __name__ == "__main__":
    main()

"""How often does a warm start's form go beyond the industry prior? The exploration RL needs at difficulty 2.

With one form per episode, RL can only reinforce an exception field (a field a company's department
requires beyond its industry's prior) that sampled rollouts sometimes request. This plays the model
at the sampling temperature on fresh tasks of a study's companies (``data.companies`` as in a recipe)
and reports, per difficulty: success, mean form size, the share of forms holding the task's exception
field (d2: the department called is the exception), the share holding some other department's
exception field, and the share of forms with a field outside the called department's prior at all.

    python benchmarks/form_exploration.py --companies 4 --tasks 100 --samples 4
    python benchmarks/form_exploration.py --model PATH --companies 8 --temperature 1.2 --json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="model dir (default: the cached warmstart_micro_long)")
    ap.add_argument("--warmstart", default="warmstart_micro_long", help="warm-start recipe when --model is not given")
    ap.add_argument("--data", default="data")
    ap.add_argument("--companies", type=int, default=4, help="k training companies, drawn as data.companies=k draws them")
    ap.add_argument("--tasks", type=int, default=100, help="fresh tasks per difficulty")
    ap.add_argument("--difficulties", default="1,2")
    ap.add_argument("--samples", type=int, default=4, help="episodes per task")
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    from lfo_cli.env import catalogue as cat
    from lfo_cli.env import load_world
    from lfo_cli.env.plugin import CustomerServiceWorld
    from lfo_cli.env.specificity import exception_fields, form_specificity
    from lfo_cli.env.tasks import fresh_training_tasks, select_companies
    from lfo_cli.errors import LfoError
    from lfo_cli.models.agent_eval import evaluate_agent, stratified_tasks
    from lfo_cli.models.registry import load_model
    from lfo_cli.models.warmstart import ensure_warmstart

    try:
        world = load_world(args.data)
        difficulties = sorted({int(d) for d in args.difficulties.split(",")})
        companies = select_companies(world, args.companies)
        pool = fresh_training_tasks(world, args.tasks * 5, seed=world.seed + 1000 + args.seed,
                                    split="exploration", company_ids=companies)
        world.register_tasks(pool)
        tasks = stratified_tasks([t for t in pool if t.difficulty in difficulties], args.tasks * len(difficulties))
        model_path = args.model or str(ensure_warmstart(args.warmstart, data_dir=args.data))
        model, tokenizer = load_model(model_path)
    except LfoError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    started = time.time()
    episodes = evaluate_agent(model, tokenizer, CustomerServiceWorld(world), [t for t in tasks for _ in range(args.samples)],
                              temperature=args.temperature, seed=args.seed)["episodes"]
    seconds = time.time() - started
    rows = {}
    by = defaultdict(list)
    for e in episodes:
        by[e["difficulty"]].append(e)
    for d, eps in sorted(by.items()):
        beyond = []
        for e in eps:
            task = world.task(e["task_id"])
            if e.get("form_fields"):
                prior = set(cat.DEPARTMENT_SPECS[(task.industry, task.steps[0].department)].requires)
                beyond.append(bool(set(e["form_fields"]) - prior))
        spec = form_specificity(world, eps)
        rows[f"d{d}"] = {
            "episodes": len(eps),
            "success": sum(e["success"] for e in eps) / len(eps),
            "forms": sum(bool(e.get("form_fields")) for e in eps) / len(eps),
            "beyond_prior": sum(beyond) / len(beyond) if beyond else None,
            **spec,
        }
    exceptions = {world.companies[c].name: exception_fields(world.companies[c]) for c in companies}
    out = {"model": model_path, "companies": exceptions, "temperature": args.temperature, "seconds": round(seconds, 1),
           "by_difficulty": rows}
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"{len(episodes)} episodes in {seconds:.0f} s on {len(companies)} companies (temperature {args.temperature})")
    for name, depts in exceptions.items():
        print(f"  {name}: " + "; ".join(f"{d} needs {', '.join(f)}" for d, f in depts.items()))
    cols = ("episodes", "success", "forms", "form_size", "beyond_prior", "exception_field_own", "exception_field_other")
    print("diff  " + "  ".join(f"{c:>22}" for c in cols))
    for d, r in rows.items():
        print(f"{d:5} " + "  ".join(f"{r.get(c) if r.get(c) is not None else float('nan'):>22.3f}" for c in cols))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

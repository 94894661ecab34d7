"""Zero-shot transfer: a run's policy on the world's held-out tasks (`World.heldout_split`, never trained on)
vs validation tasks.

Every checkpoint compared is evaluated on the same tasks, in the same order, with the same sampling
seed, so differences between checkpoints are paired. Success rates carry Wilson 95% intervals.

Output schema (``RUN/evals/transfer_eval-<parameters>.json``, see ``eval_file_name``; also ``--json``)::

    {"run_dir": str, "backend": "transformers" | "vllm", "samples": int, "seed": int, "temperature": float,
     "difficulties": [int] | null,  # the difficulties evaluated (null: all)
     "parameters": {...},      # every argument of the evaluation (split, samples, temperature, seed, ...)
     "splits": {SPLIT: {"n": int, "successes": int, "success": float, "ci_low": float, "ci_high": float,
                        "k": int, "tasks": int, "pass_k": float,   # tau-bench pass^k over the k samples of a task
                        "by_difficulty": {"1": {"n", "successes", "success", "ci_low", "ci_high", "pass_k"}, ...},
                        "behaviour": {NAME: float, ..., "valid_tool_call_rate": float},  # World.episode_metrics
                                      # (the names validation logs under val/), means over the split's episodes
                        "outcomes": [[task_id, 0 | 1], ...]}},   # per episode, in evaluation order
     "gap": float | null,          # val success - transfer success (the training tasks' advantage)
     "base": {SPLIT: <split row as above>} | null,   # --against-base: the run's base model (its warm
                                                     # start) without the adapter, same tasks and seeds
     "vs_base": {SPLIT: {"n", "mean_diff", "diff_low", "diff_high", "wins", "losses",
                         "wilcoxon_p", "ttest_p"}} | null}   # policy - base, paired per episode;
                                                     # a statistic that is undefined (no discordant episode) is null

``--against-base`` answers "did RL move the policy?" on one protocol: both models play the same
(task, sample) episodes with the same sampling seeds, and the difference is tested per episode
(``lfo_cli.stats.paired_test``: bootstrap CI of the mean difference, Wilcoxon signed-rank,
which on 0/1 outcomes is the sign test on the discordant pairs).
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from lfo_cli import run_record as rr
from lfo_cli.errors import LfoError
from lfo_cli.eval.loading import load_run_model, load_run_world, run_recipe
from lfo_cli.eval.vllm_backend import vllm_generate_fn
from lfo_cli.models.agent_eval import episode_outcomes, evaluate_agent, valid_call_rate
from lfo_cli.stats import paired_test, wilson_interval
from lfo_cli.worlds import World


def rate_row(successes: int, n: int) -> dict[str, Any]:
    lo, hi = wilson_interval(successes, n) if n else (0.0, 0.0)
    return {"n": n, "successes": successes, "success": successes / n if n else 0.0, "ci_low": lo, "ci_high": hi}


def pass_hat_k(episodes: list[dict[str, Any]]) -> dict[str, Any]:
    """tau-bench's pass^k: the share of tasks whose k samples all succeed (k = samples per task, the same
    for every task), next to pass^1 (the share of episodes that succeed). ``k`` is null when tasks differ
    in their number of samples."""
    by_task: dict[str, list[bool]] = defaultdict(list)
    for e in episodes:
        by_task[e["task_id"]].append(bool(e["success"]))
    ks = {len(v) for v in by_task.values()}
    k = ks.pop() if len(ks) == 1 else None
    return {"k": k, "tasks": len(by_task), "pass_1": sum(map(sum, by_task.values())) / max(len(episodes), 1),
            "pass_k": (sum(all(v) for v in by_task.values()) / len(by_task)) if by_task and k else None}


def summarise_split(result: dict[str, Any], world: World) -> dict[str, Any]:
    episodes, turns = result["episodes"], result["turns"]
    row = rate_row(sum(e["success"] for e in episodes), len(episodes))
    row.update({key: v for key, v in pass_hat_k(episodes).items() if key != "pass_1"})
    by = defaultdict(list)
    for e in episodes:
        by[e["difficulty"]].append(e)
    row["by_difficulty"] = {str(d): {**rate_row(sum(e["success"] for e in v), len(v)),
                                     "pass_k": pass_hat_k(v)["pass_k"]} for d, v in sorted(by.items())}
    behaviour = world.episode_metrics(episodes)  # the world's own measures, named as validation names them
    if turns:
        behaviour[rr.VALID_TOOL_CALL_RATE] = valid_call_rate(turns)
    row["behaviour"] = behaviour
    row["outcomes"] = episode_outcomes(result)
    return row


def eval_parameters(splits: tuple[str, ...], *, samples: int, max_tasks: int | None, temperature: float, seed: int,
                    backend: str, data_dir: str | Path | None, difficulties: tuple[int, ...] | None,
                    against_base: bool) -> dict[str, Any]:
    """Every argument that changes an evaluation's result, as recorded in its file."""
    return {"splits": list(splits), "samples": samples, "max_tasks": max_tasks, "temperature": temperature,
            "seed": seed, "backend": backend, "data_dir": str(data_dir) if data_dir else None,
            "difficulties": sorted(difficulties) if difficulties else None, "against_base": against_base}


def eval_file_name(parameters: dict[str, Any]) -> str:
    """The file an evaluation is saved as, named by its parameters (so another evaluation never overwrites it),
    e.g. ``transfer_eval-transfer+val-k1-T1-seed0.json``; ``data_dir`` is recorded in the file, not the name."""
    p = parameters
    parts = [rr.TRANSFER_EVAL_STEM, "+".join(p["splits"]), f"k{p['samples']}", f"T{p['temperature']:g}", f"seed{p['seed']}"]
    if p["difficulties"]:
        parts.append("d" + "".join(str(d) for d in p["difficulties"]))
    if p["max_tasks"]:
        parts.append(f"n{p['max_tasks']}")
    if p["against_base"]:
        parts.append("vsbase")
    if p["backend"] != "transformers":
        parts.append(p["backend"])
    if p.get("data_dir"):
        import hashlib

        parts.append("data" + hashlib.sha256(str(p["data_dir"]).encode()).hexdigest()[:6])
    return "-".join(parts) + ".json"


def transfer_eval(run_dir: str | Path, splits: tuple[str, ...] = ("transfer", "val"), *, samples: int = 1,
                  max_tasks: int | None = None, temperature: float = 1.0, seed: int = 0,
                  backend: str = "transformers", data_dir: str | Path | None = None,
                  difficulties: tuple[int, ...] | None = None, against_base: bool = False,
                  progress=None) -> dict[str, Any]:
    run_dir = Path(run_dir)
    recipe = run_recipe(run_dir)
    world = load_run_world(run_dir, data_dir)
    max_turns = int(recipe.get("trainer", {}).get("max_tool_calling_iterations", 16))
    if against_base and backend == "vllm":
        raise LfoError("--against-base runs on the transformers backend (it switches the adapter off in place)")
    generate_fn = None
    if backend == "vllm":
        generate_fn = vllm_generate_fn(run_dir)
        model, tokenizer = None, generate_fn.tokenizer
    else:
        model, tokenizer = load_run_model(run_dir, "policy")
    out: dict[str, Any] = {"run_dir": str(run_dir), "backend": backend, "samples": samples, "seed": seed,
                           "temperature": temperature, "difficulties": sorted(difficulties) if difficulties else None,
                           "parameters": eval_parameters(splits, samples=samples, max_tasks=max_tasks,
                                                         temperature=temperature, seed=seed, backend=backend,
                                                         data_dir=data_dir, difficulties=difficulties,
                                                         against_base=against_base),
                           "splits": {}, "base": {} if against_base else None,
                           "vs_base": {} if against_base else None}
    for split in splits:
        # "transfer" is the world's held-out split (the customer-service world's own name for it)
        tasks = [t for t in world.tasks(world.heldout_split if split == "transfer" else split) if not difficulties or t.difficulty in difficulties][: max_tasks or None]
        if not tasks:
            raise LfoError(f"no {split} tasks at difficulty {sorted(difficulties or ())}")
        repeated = [t for t in tasks for _ in range(samples)]
        common = {"temperature": temperature, "max_turns": max_turns, "seed": seed, "progress": progress}
        result = evaluate_agent(model, tokenizer, world, repeated, generate_fn=generate_fn, **common)
        out["splits"][split] = summarise_split(result, world)
        if against_base:
            with model.disable_adapter():  # the warm-started base RL began from: the same episodes and seeds
                out["base"][split] = summarise_split(evaluate_agent(model, tokenizer, world, repeated, **common), world)
            pairs = [[p[1] for p in out["splits"][split]["outcomes"]], [b[1] for b in out["base"][split]["outcomes"]]]
            test = paired_test(*pairs, seed=seed).as_dict()  # undefined statistics (no discordant episode): null
            out["vs_base"][split] = {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in test.items()}
    if "val" in out["splits"] and "transfer" in out["splits"]:
        out["gap"] = out["splits"]["val"]["success"] - out["splits"]["transfer"]["success"]
    else:
        out["gap"] = None
    return out

"""A GRPO run's numbers: validation metrics from an evaluation, final vs start (paired), curve trends.

All return plain dicts of ``val/...``-style keys; the run's ``summary.json`` is made of them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lfo_cli import run_record as rr
from lfo_cli.io import iter_jsonl, read_json
from lfo_cli.models.agent_eval import summarize_eval
from lfo_cli.stats import paired_test
from lfo_cli.worlds import World


def vs_start(run_dir: Path, step: int, seed: int = 0, prefix: str = rr.VAL,
             world: type[World] | World | None = None) -> dict[str, float]:
    """Final validation vs step 0 (the warm start), paired per episode: `val/vs_start/...` (``prefix``
    "heldout": the held-out evaluation's files); with ``world``, also each of its ``paired_skills`` the files'
    episodes tell (`val/vs_start/SKILL/...`). Empty when either evaluation is missing (eval.every = 0) or they
    cover different episodes."""
    import math

    paths = [Path(run_dir) / rr.VALIDATION_DIR / rr.validation_file(s, prefix) for s in (0, step)]
    if step <= 0 or not all(p.is_file() for p in paths):
        return {}
    files = [read_json(p) for p in paths]
    start, final = (f[rr.VALIDATION_OUTCOMES] for f in files)
    if [t for t, _ in start] != [t for t, _ in final]:
        return {}

    def compare(b: list, a: list, difficulty: int | None = None, skill: str | None = None) -> dict[str, float]:
        test = paired_test(a, b, seed=seed).as_dict()
        test.pop("ttest_p")  # 0/1 outcomes: the Wilcoxon (sign) test is the one to read
        row = {rr.START_SUCCESS: sum(b) / len(b), rr.FINAL_SUCCESS: sum(a) / len(a), **test}
        return {rr.vs_start_key(prefix, k, difficulty, skill): v for k, v in row.items()
                if not (isinstance(v, float) and math.isnan(v))}

    out = compare([o for _, o in start], [o for _, o in final])
    episodes = [f.get(rr.VALIDATION_EPISODES) or [] for f in files]
    if len(episodes[0]) == len(start):  # per difficulty, where the files say which episode is which
        for d in sorted({e["difficulty"] for e in episodes[0]}):
            keep = [i for i, e in enumerate(episodes[0]) if e["difficulty"] == d]
            out.update(compare([start[i][1] for i in keep], [final[i][1] for i in keep], d))
    if world is not None and all(len(e) == len(start) for e in episodes):  # the sub-skills both files tell
        for skill in world.paired_skills:
            shown = [[world.episode_skills(e).get(skill) for e in eps] for eps in episodes]
            if all(v is not None for v in shown[0] + shown[1]):
                out.update(compare([int(v) for v in shown[0]], [int(v) for v in shown[1]], skill=skill))
    return out


def trends(run_dir: Path, window: int = 10) -> dict[str, float]:
    """Mean of the first and last `window` logged values of the training curves (`wm/token_acc/first10`,
    `.../last10`): does the world model learn, does train reward move."""
    path = Path(run_dir) / rr.METRICS_FILE
    if not path.is_file():
        return {}
    rows = list(iter_jsonl(path))
    out: dict[str, float] = {}
    for key in rr.TREND_METRICS:
        values = [float(r[key]) for r in rows if key in r]
        if len(values) >= 2:
            w = min(window, len(values) // 2)
            out[f"{key}/first{window}"] = sum(values[:w]) / w
            out[f"{key}/last{window}"] = sum(values[-w:]) / w
    return out


def validation_metrics(result: dict[str, Any], prefix: str = rr.VAL, world: World | None = None) -> dict[str, float]:
    """`val/...` metrics from an evaluate_agent result: success overall and by difficulty, turns, the
    valid-call rate, and with ``world`` the world's own measures (:meth:`lfo_cli.worlds.World.episode_metrics`:
    for the customer-service world, where the first call went, behaviour, probes and form measures)."""
    episodes, turns = result["episodes"], result["turns"]
    row: dict[str, float] = {}
    if episodes:
        row[rr.metric(prefix, rr.SUCCESS)] = sum(e["success"] for e in episodes) / len(episodes)
        row[rr.metric(prefix, rr.TURNS)] = sum(e["turns"] for e in episodes) / len(episodes)
        for d in sorted({e["difficulty"] for e in episodes}):
            sub = [e for e in episodes if e["difficulty"] == d]
            row[rr.success_at(prefix, d)] = sum(e["success"] for e in sub) / len(sub)
    if any(not t.get("final_reply") for t in turns):  # "Done." is not a call
        # the warm start's definition (summarize_eval), so both evaluations read alike
        row[rr.metric(prefix, rr.VALID_TOOL_CALL_RATE)] = summarize_eval(result)[rr.EVAL_VALID_TOOL_CALL_RATE]
    if world is not None:
        row.update({rr.metric(prefix, k): v for k, v in world.episode_metrics(episodes).items()})
    return row

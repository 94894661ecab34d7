"""A GRPO run's numbers: validation metrics from an evaluation, final vs start (paired), curve trends.

All return plain dicts of ``val/...``-style keys; the run's ``summary.json`` is made of them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lfo_cli import run_record as rr
from lfo_cli.env.specificity import form_specificity
from lfo_cli.io import iter_jsonl, read_json
from lfo_cli.models.agent_eval import summarize_eval
from lfo_cli.stats import paired_test


def vs_start(run_dir: Path, step: int, seed: int = 0, prefix: str = rr.VAL) -> dict[str, float]:
    """Final validation vs step 0 (the warm start), paired per episode: `val/vs_start/...` (``prefix``
    "heldout": the held-out evaluation's files). Empty when either evaluation is missing (eval.every = 0)
    or they cover different episodes."""
    import math

    paths = [Path(run_dir) / rr.VALIDATION_DIR / rr.validation_file(s, prefix) for s in (0, step)]
    if step <= 0 or not all(p.is_file() for p in paths):
        return {}
    files = [read_json(p) for p in paths]
    start, final = (f[rr.VALIDATION_OUTCOMES] for f in files)
    if [t for t, _ in start] != [t for t, _ in final]:
        return {}

    def compare(keep: list[int], difficulty: int | None = None) -> dict[str, float]:
        a, b = [final[i][1] for i in keep], [start[i][1] for i in keep]
        test = paired_test(a, b, seed=seed).as_dict()
        test.pop("ttest_p")  # 0/1 outcomes: the Wilcoxon (sign) test is the one to read
        row = {rr.START_SUCCESS: sum(b) / len(b), rr.FINAL_SUCCESS: sum(a) / len(a), **test}
        return {rr.vs_start_key(prefix, k, difficulty): v for k, v in row.items()
                if not (isinstance(v, float) and math.isnan(v))}

    out = compare(list(range(len(start))))
    episodes = files[0].get(rr.VALIDATION_EPISODES) or []
    if len(episodes) == len(start):  # per difficulty, where the files say which episode is which
        for d in sorted({e["difficulty"] for e in episodes}):
            out.update(compare([i for i, e in enumerate(episodes) if e["difficulty"] == d], d))
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


def validation_metrics(result: dict[str, Any], prefix: str = rr.VAL, world=None) -> dict[str, float]:
    """`val/...` metrics from an evaluate_agent result (success overall and by difficulty, behaviour;
    with ``world``, the form measures of :func:`lfo_cli.env.specificity.form_specificity`)."""
    episodes, turns = result["episodes"], result["turns"]
    row: dict[str, float] = {}
    if episodes:
        row[rr.metric(prefix, rr.SUCCESS)] = sum(e["success"] for e in episodes) / len(episodes)
        row[rr.metric(prefix, rr.TURNS)] = sum(e["turns"] for e in episodes) / len(episodes)
        for d in sorted({e["difficulty"] for e in episodes}):
            sub = [e for e in episodes if e["difficulty"] == d]
            row[rr.success_at(prefix, d)] = sum(e["success"] for e in sub) / len(sub)
    summary = summarize_eval(result)  # the warm start's definitions, so both evaluations read alike
    if any(not t.get("final_reply") for t in turns):  # "Done." is not a call
        row[rr.metric(prefix, rr.VALID_TOOL_CALL_RATE)] = summary[rr.EVAL_VALID_TOOL_CALL_RATE]
    if rr.EVAL_FIRST_CALL_RIGHT in summary:  # the department decision, apart from copying
        row[rr.metric(prefix, rr.FIRST_CALL_RIGHT)] = summary[rr.EVAL_FIRST_CALL_RIGHT]
    for key, name in (("auth_before_first_call", rr.AUTH_BEFORE_CALL), ("department_order_correct", rr.ORDER_CORRECT),
                      ("phone_calls", rr.CALLS_PER_TASK), ("forms_submitted", rr.FORMS),
                      ("invalid_tool_calls", rr.INVALID_CALLS)):
        values = [float(e[key]) for e in episodes if key in e]
        if values:
            row[rr.metric(prefix, name)] = sum(values) / len(values)
    # Reading the rep (the reading study's mechanism): how often the policy probes (a call with no identity
    # field, answered by naming what the department needs), and how often its form then holds every named field.
    probes = [e["probe_calls"] > 0 for e in episodes if "probe_calls" in e]
    if probes:
        row[rr.metric(prefix, rr.PROBE_RATE)] = sum(probes) / len(probes)
    held = [bool(e["form_holds_named"]) for e in episodes if e.get("form_holds_named") is not None]
    if held:
        row[rr.metric(prefix, rr.FORM_HOLDS_NAMED)] = sum(held) / len(held)
    if world is not None and episodes and all("form_fields" in e for e in episodes):
        row.update({rr.metric(prefix, k): v for k, v in form_specificity(world, episodes).items()})
    return row


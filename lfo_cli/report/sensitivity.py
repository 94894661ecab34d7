"""A declared study's sensitivity section in `lfo report`: how much its verdicts rest on one seed, on where each arm
started and on resumed runs.

- **Leave one seed out**: every arm's primary comparison recomputed with one seed left out of the whole study
  (every arm loses that pair, so Holm's family stays the same size), for each seed in turn, judged by the one
  verdict rule (:mod:`lfo_cli.report.verdict`); a seed whose removal changes an arm's verdict is named.
- **Start and gain**: the paired step-0 difference of the primary outcome (what a warm start gave before any RL)
  and the paired difference of each run's gain over its own step 0 (for ``statistic: auc`` the area under the
  gain curve, otherwise the last evaluation minus step 0), the gain judged by the same rule.
- **Resumed runs**: which runs were resumed from a checkpoint (``summary.json``'s ``resumed_from``).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

from lfo_cli import run_record as rr
from lfo_cli import stats
from lfo_cli.eval import comparison
from lfo_cli.report import verdict
from lfo_cli.report.declared_runs import ArmRun
from lfo_cli.report.format import est, finite, num
from lfo_cli.report.plan import Plan

WARMSTARTS = "warmstarts"  # beside a study's runs/: the warm starts its runs drew (summary.json each)
WARMSTART_SKILL = rr.EVAL_SUCCESS_RATE  # a warm start's own validation success, from its build's evaluation
Pairs = dict[str, list[tuple[object, ArmRun, ArmRun]]]  # arm -> [(seed, the arm's run, the reference's run)]


def leave_one_out(diffs: dict[str, dict], *, alpha: float, size: int) -> list[dict]:
    """One row per (arm, seed left out): the family's verdicts recomputed without that seed's pairs.
    ``diffs`` maps an arm to {seed: its paired difference}."""
    full = verdict.family({a: list(d.values()) for a, d in diffs.items()}, alpha=alpha, size=size)
    seeds = sorted({s for d in diffs.values() for s in d}, key=lambda s: (s is None, str(s)))
    rows = []
    for s in seeds:
        got = verdict.family({a: [v for k, v in d.items() if k != s] for a, d in diffs.items()}, alpha=alpha, size=size)
        for arm, v in got.items():
            rows.append({"arm": arm, "left_out": s, "pairs": v.n, "diff": v.diff, "low": v.low, "high": v.high,
                         "p_holm": v.p, "verdict": v.phrase(), "side": v.side,
                         "changes_verdict": v.side != full[arm].side or v.tested != full[arm].tested})
    return rows


def _gain(a: ArmRun) -> float:
    return a.gain_auc if a.statistic != "final" else a.primary_final - a.primary_start


def sensitivity_section(rep, plan: Plan, pairs: Pairs, runs: dict[str, list[ArmRun]], verdicts: dict, size: int,
                        pd) -> dict:
    """Append the section to ``rep.md`` and its tables to ``rep.writer``; returns its summary."""
    W = rep.writer
    diffs = {arm: {s: t.primary - b.primary for s, t, b in ps if finite(t.primary - b.primary)}
             for arm, ps in pairs.items()}
    loo = leave_one_out(diffs, alpha=plan.alpha, size=size)
    W.csv("sensitivity_leave_one_out.csv", pd.DataFrame(loo, columns=["arm", "left_out", "pairs", "diff", "low", "high",
                                                                       "p_holm", "verdict", "side", "changes_verdict"]))
    lines = ["### Sensitivity\n", "**Leave one seed out.** Each arm's primary comparison with one seed's pairs left out of every arm, for "
             "each seed in turn, judged by the same rule (Holm over the same family).\n",
             "| arm | verdict, every seed | difference, one seed left out (min .. max) | verdicts, one seed left out | "
             "seeds whose removal changes the verdict |", "|---|---|---|---|---|"]
    flips = {}
    for arm in pairs:
        rows = [r for r in loo if r["arm"] == arm]
        ds = [r["diff"] for r in rows if finite(r["diff"])]
        count = Counter(r["verdict"].split(" (")[0] for r in rows)
        flips[arm] = [r["left_out"] for r in rows if r["changes_verdict"]]
        lines.append(f"| {arm} | {verdicts[arm].phrase()} | "
                     + (f"{num(min(ds))} .. {num(max(ds))}" if ds else "n/a") + " | "
                     + ", ".join(f"{w} {n}x" for w, n in sorted(count.items())) + " | "
                     + (", ".join(str(s) for s in flips[arm]) or "none") + " |")
    flagged = [f"leaving out {'seed ' if len(f) == 1 else 'any one of seeds '}{', '.join(str(s) for s in f)} changes "
               f"`{arm}`'s verdict" for arm, f in flips.items() if f]
    lines.append("\n" + ("**A verdict rests on one seed**: " + "; ".join(flagged) + ". Data: "
                         if flagged else "No single seed changes a verdict. Data: ")
                 + "`sensitivity_leave_one_out.csv`.\n")

    # start and gain, paired
    gains = {arm: [_gain(t) - _gain(b) for _, t, b in ps] for arm, ps in pairs.items()}
    gain_v = verdict.family({a: [g for g in v if finite(g)] for a, v in gains.items()}, alpha=plan.alpha, size=size)
    what = "the area under its gain curve" if plan.statistic != "final" else "its last evaluation minus step 0"
    lines += [f"**Start and gain.** Step 0 of `{plan.primary}` (the warm start, before any RL) and each run's gain "
              f"over its own step 0 ({what}), arm minus reference, paired by seed; the gain is judged by the same rule.\n",
              "| arm | pairs | step-0 difference [95% CI] | gain difference [95% CI] | gain verdict |",
              "|---|---|---|---|---|"]
    rows = []
    for arm, ps in pairs.items():
        start = comparison.paired_diff_ci([t.primary_start for _, t, _ in ps], [b.primary_start for _, _, b in ps])
        gain = comparison.paired_diff_ci([_gain(t) for _, t, _ in ps], [_gain(b) for _, _, b in ps])
        v = gain_v[arm]
        lines.append(f"| {arm} | {start.n} | {est(start)} | {est(gain)} | {v.phrase()} |")
        rows.append({"arm": arm, "pairs": start.n, "start_diff": start.value, "start_low": start.low,
                     "start_high": start.high, "gain_diff": gain.value, "gain_low": gain.low, "gain_high": gain.high,
                     "gain_p_holm": v.p, "gain_verdict": v.phrase()})
    W.csv("sensitivity_start_gain.csv", pd.DataFrame(rows, columns=["arm", "pairs", "start_diff", "start_low",
                                                                    "start_high", "gain_diff", "gain_low", "gain_high",
                                                                    "gain_p_holm", "gain_verdict"]))
    lines.append("\nData: `sensitivity_start_gain.csv`.\n")

    folder = plan.path.parent.parent / WARMSTARTS if plan.path else None
    if folder is not None and folder.is_dir():
        lines += _covariate(plan, pairs, folder, size, pd, W)

    # resumed runs
    resumed = [(arm, r) for arm, rs in runs.items() for r in rs if r.run.summary.get("resumed_from")]
    lines.append("**Resumed runs**: " + ("; ".join(
        f"`{arm}` seed {r.seed} (from {str(r.run.summary['resumed_from']).rstrip('/').rsplit('/', 1)[-1]})"
        for arm, r in resumed) if resumed else "none") + " (a resumed run continues from its checkpoint with the "
        "same data order and RNG state: docs/training.md, \"Run dir\").\n")
    rep.md.append("\n".join(lines))
    return {"leave_one_out_flips": {a: f for a, f in flips.items() if f},
            "gain_verdicts": {a: v.phrase() for a, v in gain_v.items()},
            "resumed": [f"{arm} seed {r.seed}" for arm, r in resumed]}



def warmstart_skill(run, folder: Path) -> float:
    """The validation success the run's warm start scored in its own build (``WARMSTART_SKILL`` of its
    ``summary.json`` under ``folder``, found by the warm-start key in the run's ``base_model_ref``); NaN when the
    run names no warm start or its files are not there."""
    ref = str((run.summary.get(rr.BASE_MODEL_REF) or {}).get("lfo_home", ""))
    parts = ref.split("/")
    if len(parts) < 2 or not (folder / parts[1] / rr.SUMMARY_FILE).is_file():
        return math.nan
    try:
        value = json.loads((folder / parts[1] / rr.SUMMARY_FILE).read_text(encoding="utf-8")).get(WARMSTART_SKILL)
    except (OSError, ValueError):
        return math.nan
    return float(value) if finite(value) else math.nan


def adjusted_difference(d: list[float], c: list[float]) -> dict:
    """The paired difference at equal covariates: the intercept of d_i = a + b c_i (least squares), with its
    t-interval and t-test (n - 2 degrees of freedom). NaN when fewer than 3 pairs or the covariate does not vary."""
    from scipy import stats as st

    nan = {"n": len(d), "diff": math.nan, "low": math.nan, "high": math.nan, "p": math.nan, "slope": math.nan}
    if len(d) < 3 or len(set(c)) < 2:
        return nan
    fit = st.linregress(c, d)
    se, df = float(fit.intercept_stderr), len(d) - 2
    if not (finite(se) and se > 0):
        return nan
    q = float(st.t.ppf(0.975, df))
    p = float(2 * st.t.sf(abs(fit.intercept) / se, df))
    return {"n": len(d), "diff": float(fit.intercept), "low": float(fit.intercept - q * se),
            "high": float(fit.intercept + q * se), "p": p, "slope": float(fit.slope)}


def _covariate(plan: Plan, pairs: Pairs, folder: Path, size: int, pd, W) -> list[str]:
    """Warm-start draws separated from training noise: each arm's primary difference regressed on the difference of
    the two runs' warm starts' own validation success; the intercept is the difference at equal warm starts."""
    rows = []
    for arm, ps in pairs.items():
        c = [warmstart_skill(t.run, folder) - warmstart_skill(b.run, folder) for _, t, b in ps]
        keep = [(t.primary - b.primary, x) for (_, t, b), x in zip(ps, c, strict=True) if finite(x)]
        skill = comparison.paired_diff_ci([k[1] for k in keep], [0.0] * len(keep))
        rows.append({"arm": arm, "skill_diff": skill.value, "skill_low": skill.low, "skill_high": skill.high,
                     **adjusted_difference([k[0] for k in keep], [k[1] for k in keep])})
    if not any(finite(r["diff"]) for r in rows):
        return []
    holm = stats.holm([r["p"] if finite(r["p"]) else 1.0 for r in rows] + [1.0] * (size - len(rows)))
    lines = [f"**Warm-start draws as a covariate** (not declared: a sensitivity analysis). Each run's warm start was "
             f"its own draw; its skill is the validation success it scored in its own build (`{WARMSTART_SKILL}` in "
             f"`{WARMSTARTS}/`, episodes other than the held-out ones the study scores). Each arm's paired difference "
             "is regressed on the pair's difference in that skill; the intercept is the difference at equal warm "
             "starts, with a t-interval on n - 2 degrees of freedom, its p Holm-adjusted over the family. Where an arm "
             "changes how its warm start is built, the skill difference is part of its effect: the intercept is then "
             "what RL made of equal starts, not the arm's whole effect.\n",
             "| arm | pairs | warm-start skill difference [95% CI] | difference at equal warm starts [95% CI] | slope "
             "(per unit of warm-start success) | verdict |", "|---|---|---|---|---|---|"]
    for r, adj in zip(rows, holm, strict=False):
        r["p_holm"] = adj if finite(r["p"]) else math.nan
        v = verdict.Verdict(n=r["n"], diff=r["diff"], low=r["low"], high=r["high"], p_raw=r["p"], p=r["p_holm"],
                            wilcoxon_p_raw=math.nan, wilcoxon_p=math.nan, family=size, alpha=plan.alpha,
                            why_untested="" if finite(r["p"]) else "fewer than 3 pairs or one warm-start skill")
        r["verdict"] = v.phrase()
        lines.append(f"| {r['arm']} | {r['n']} | "
                     f"{est({'value': r['skill_diff'], 'low': r['skill_low'], 'high': r['skill_high']})} | "
                     f"{est({'value': r['diff'], 'low': r['low'], 'high': r['high']})} | "
                     f"{num(r['slope'])} | {r['verdict']} |")
    W.csv("sensitivity_warmstart_covariate.csv", pd.DataFrame(rows))
    return lines + ["\nData: `sensitivity_warmstart_covariate.csv`.\n"]

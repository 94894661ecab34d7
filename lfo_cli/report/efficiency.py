"""Sample efficiency in `lfo report`: tasks to threshold, the ratio baseline / dual and paired tests.

The design's headline claim: dual-LoRA needs fewer tasks than the baseline to reach a validation
success threshold. Censored seeds (never reached) count at their last evaluation, so a mean may be a
bound; a difference is called an effect by the one verdict rule (:mod:`lfo_cli.report.verdict`).
"""

from __future__ import annotations

from lfo_cli import run_record as rr
from lfo_cli import stats
from lfo_cli.report import verdict
from lfo_cli.report.document import Report
from lfo_cli.report.format import est, num, pval
from lfo_cli.report.format import finite as _finite
from lfo_cli.report.run_stats import SMOOTH_WINDOW, THRESHOLDS, Conditions


def _matches(a: dict, b: dict, varying: list[str]) -> bool:
    """Same condition apart from world-model keys (a baseline's partner)."""
    return all(a.get(k) == b.get(k) for k in varying if not k.startswith("wm."))


def efficiency_section(rep: Report, cs: Conditions, eff_df, eff_rows: list[dict], pd) -> list[tuple[str, str]]:
    """The sample-efficiency section; returns the (baseline, dual) condition pairs it compared."""
    W = rep.writer
    conds, by_cond, role, cvals, varying = cs.conds, cs.by_cond, cs.role, cs.cvals, cs.varying
    rep.md.append("### Sample efficiency\n")
    rep.md.append(f"Tasks seen until the validation success curve, smoothed by a trailing mean of the last "
                  f"{SMOOTH_WINDOW} evaluations, first reaches the threshold. Mean over seeds, 95% percentile "
                  "bootstrap CI. A seed that never reaches it is censored at its last evaluated tasks_seen: then the "
                  "mean is a lower bound (\">=\"); \"not reached\" means no seed reached it.\n")
    lines = ["| condition | n | " + " | ".join(f"tasks to {int(t * 100)}%" for t in THRESHOLDS) + " |",
             "|---|---|" + "---|" * len(THRESHOLDS)]
    for c in conds:
        cells = []
        for t in THRESHOLDS:
            r = eff_df[(eff_df.condition == c) & (eff_df.threshold == t)].iloc[0]
            if r.reached == 0:
                cells.append(f"not reached (0/{r.n}; max {num(r.max_tasks_seen)} tasks)")
            elif r.reached < r.n:
                cells.append(f">= {num(r.mean_tasks)} ({r.reached}/{r.n} reached)")
            else:
                cells.append(est({"value": r.mean_tasks, "low": r.ci_low, "high": r.ci_high, "n": r.n}))
        lines.append(f"| {c} | {len(by_cond[c])} | " + " | ".join(cells) + " |")
    rep.md.append("\n".join(lines) + "\n\nData: `sample_efficiency.csv`, per run: `training_runs.csv`.")

    pairs = [(b, d) for b in conds if role[b] == "baseline" for d in conds
             if role[d] == "dual" and _matches(cvals[b], cvals[d], varying)]
    ratio_rows, test_rows, headline, auc_diffs = [], [], [], {}
    for b, d in pairs:
        sb, sd = by_cond[b], by_cond[d]
        for t in THRESHOLDS:
            res = stats.censored_ratio([s.to[t] for s in sb], [s.limit for s in sb], [s.to[t] for s in sd],
                                       [s.limit for s in sd])
            ratio_rows.append({"baseline": b, "dual": d, "threshold": t, **res.as_dict()})
        pb = {s.run.seed: s for s in sb}
        pd_ = {s.run.seed: s for s in sd}
        common = sorted(set(pb) & set(pd_), key=lambda x: (x is None, x))
        for metric, get in (("auc", lambda s: s.auc), ("final_success", lambda s: s.final.get(rr.VAL_SUCCESS))):
            pairs_ok = [(get(pd_[k]), get(pb[k])) for k in common if _finite(get(pd_[k])) and _finite(get(pb[k]))]
            res = stats.paired_test([a for a, _ in pairs_ok], [b_ for _, b_ in pairs_ok])
            if metric == "auc":
                auc_diffs[(b, d)] = [a - b_ for a, b_ in pairs_ok]
            test_rows.append({"baseline": b, "dual": d, "metric": metric, "comparison": "dual - baseline",
                              **res.as_dict()})
    ratio_df = pd.DataFrame(ratio_rows)
    tests_df = pd.DataFrame(test_rows)
    rep.md.append("#### Ratio baseline / dual (the design's headline claim)\n")
    if not pairs:
        why = (f"no baseline ({rr.WM_COEF}=0) runs" if not any(role[c] == "baseline" for c in conds) else
               "no dual-LoRA runs" if not any(role[c] == "dual" for c in conds) else
               "no baseline matches a dual condition in the non-world-model settings")
        rep.md.append(f"Not computed: {why}.")
        rep.notes.append(f"Sample-efficiency ratio: {why}.")
    else:
        W.csv("sample_efficiency_ratio.csv", ratio_df)
        W.csv("paired_tests.csv", tests_df)
        rep.md.append("mean(tasks to threshold, baseline seeds) / mean(tasks to threshold, dual seeds); the two groups "
                      "are resampled independently (percentile bootstrap, 9,999 resamples). >1 means dual-LoRA needs "
                      "fewer tasks.\n")
        lines = ["| baseline | dual | threshold | ratio [95% CI] | reading |", "|---|---|---|---|---|"]
        for row in ratio_rows:
            lines.append(f"| {row['baseline']} | {row['dual']} | {int(row['threshold'] * 100)}% | "
                         f"{est({'value': row['value'], 'low': row['low'], 'high': row['high'], 'n': 2})} | "
                         f"{_ratio_reading(row)} |")
        rep.md.append("\n".join(lines))
        rep.md.append("\nPaired by seed (same seed = same validation tasks and sampling seeds), dual - baseline, "
                      "Wilcoxon signed-rank (exact; with n pairs it cannot fall below 2 / 2^n) and paired t-test, raw "
                      "p-values; the verdicts in the summary follow the one verdict rule (docs/report.md): the t-test, "
                      "Holm-adjusted over these comparisons.\n")
        lines = ["| baseline | dual | metric | n pairs | mean diff [95% CI] | wins/losses | Wilcoxon p | t-test p |",
                 "|---|---|---|---|---|---|---|---|"]
        for row in test_rows:
            lines.append(f"| {row['baseline']} | {row['dual']} | {row['metric']} | {row['n']} | "
                         f"{est({'value': row['mean_diff'], 'low': row['diff_low'], 'high': row['diff_high'], 'n': row['n']})} | "
                         f"{row['wins']}/{row['losses']} | {pval(row['wilcoxon_p'])} | {pval(row['ttest_p'])} |")
        rep.md.append("\n".join(lines) + "\n\nData: `sample_efficiency_ratio.csv`, `paired_tests.csv`.")
        verdicts = verdict.family(auc_diffs)  # the one rule: Holm over the headline's comparisons
        for b, d in pairs:
            r70 = next(r for r in ratio_rows if r["baseline"] == b and r["dual"] == d and r["threshold"] == 0.7)
            auc = next(r for r in test_rows if r["baseline"] == b and r["dual"] == d and r["metric"] == "auc")
            headline.append({"baseline": b, "dual": d, "ratio_70": r70, "auc_diff": auc,
                             "sentence": _headline_sentence(b, d, r70, auc, verdicts[(b, d)], by_cond)})
    rep.summary["sample_efficiency"] = {"conditions": eff_rows, "ratios": ratio_rows, "paired_tests": test_rows}
    rep.summary["headline"] = headline
    return pairs


def _ratio_reading(row: dict) -> str:
    kind = row["kind"]
    lo, hi = row["low"], row["high"]
    if kind == "not_reached":
        return row["note"]
    if kind in ("insufficient",):
        return "insufficient runs: " + row["note"]
    effect = ("no detectable difference (CI includes 1)" if _finite(lo) and lo <= 1 <= hi else
              "dual-LoRA needs fewer tasks" if _finite(lo) and lo > 1 else
              "dual-LoRA needs more tasks" if _finite(hi) and hi < 1 else "no CI")
    if kind == "estimate":
        return effect
    return f"{kind.replace('_', ' ')}: {row['note']}"


def verdict_words(v: verdict.Verdict, higher: str, lower: str) -> str:
    """A paired dual - baseline comparison in words, by the one verdict rule (:mod:`lfo_cli.report.verdict`)."""
    return f"{v.word(higher, lower)} ({v.p_words()}" + "".join(f"; {n}" for n in v.notes()) + ")"


def _headline_sentence(b: str, d: str, r70: dict, auc: dict, v: verdict.Verdict, by_cond) -> str:
    nb, nd = len(by_cond[b]), len(by_cond[d])
    if r70["kind"] == "not_reached":
        who = ("no seed of either condition" if r70["reached_num"] == 0 and r70["reached_den"] == 0 else
               "no baseline seed" if r70["reached_num"] == 0 else "no dual-LoRA seed")
        ratio = f"{who} reached 70% validation success, so the tasks-to-70% ratio is not defined"
    elif not _finite(r70["value"]):
        ratio = f"the tasks-to-70% ratio is not defined ({r70['note']})"
    else:
        ci = f" [95% CI {num(r70['low'])}, {num(r70['high'])}]" if _finite(r70["low"]) else " (no CI)"
        bound = {"estimate": "", "lower_bound": " (a lower bound: some baseline seeds never reached 70%)",
                 "upper_bound": " (an upper bound: some dual seeds never reached 70%)",
                 "undetermined": " (censored seeds in both groups: direction of bias unknown)",
                 "insufficient": " (fewer than 2 seeds in a group)"}[r70["kind"]]
        ratio = f"tasks-to-70% ratio baseline/dual = {num(r70['value'])}{ci}{bound}"
    if auc["n"] >= 2 and _finite(auc["diff_low"]):
        words = verdict_words(v, "dual-LoRA learned faster", "dual-LoRA learned slower")
        a = (f"learning-curve AUC dual - baseline = {num(auc['mean_diff'])} [95% CI {num(auc['diff_low'])}, "
             f"{num(auc['diff_high'])}], {auc['n']} paired seeds: {words}")
    else:
        a = f"learning-curve AUC difference: insufficient paired seeds (n = {auc['n']})"
    return f"{d} vs {b} ({nd} vs {nb} seeds): {ratio}; {a}."


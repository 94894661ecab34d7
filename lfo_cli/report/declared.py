"""A declared study in `lfo report`: the plan committed before a grid (``plan.yaml`` beside its runs) and the
comparisons it names, arm by arm against its reference arm, paired by seed.

``plan.yaml`` (in a folder given to ``lfo report``; docs/study.md shows the reading study's)::

    title: The reading study
    primary: heldout/success/d2      # the outcome
    statistic: auc                   # per run: final (its last evaluation, the default) or auc (mean over the run)
    secondary: val/success/d2        # its AUC vs tasks seen: learning speed on the training companies
    smallest_effect: 0.06            # the declared smallest detectable effect on the primary outcome
    alpha: 0.05                      # family-wise over the arms (Holm)
    mechanism: [heldout/probe_rate, heldout/form_holds_named]
    by: departments                  # the primary outcome per value of this episode field (optional)
    reference: baseline
    positive_control: positive-control
    positive_control_effect: higher  # or lower: a control chosen to slow learning
    equivalence_margin: 0.03         # an equivalence study: TOST per arm at this margin (optional)
    arms:                            # name -> the config values that make a run one of its seeds
      baseline: {wm.coef: 0, env.probe_bonus: 0}
      positive-control: {wm.coef: 0, env.probe_bonus: 0.2}

Per arm against the reference (seeds both ran to the end, evaluated at the same tasks seen): the primary
statistic's paired difference with a t-interval, the paired t-test's and Wilcoxon's p-values and both
Holm-adjusted over the plan's arms (an arm without a test counts as p = 1); the probability of improvement;
the secondary AUC difference; the tasks-to-threshold ratio on the primary outcome (threshold: the reference's
mean start + half its mean gain) or its bound; step 0 of the primary outcome and the AUC of its gain over step 0
(for arms that start from another warm start); the median world-model / RL gradient ratio; the mechanism
metrics, start and end; with ``by`` (an episode field of the validation files, e.g. ``departments``), the primary
outcome per value of its first element at the last evaluation. Every arm's verdict, the positive control's included,
follows the one rule of :mod:`lfo_cli.report.verdict` (the Holm-adjusted paired t-test decides); the control is
*detected* when its verdict lies on the side it was chosen for (``positive_control_effect``), otherwise the report
says the design lacked power for that effect. :mod:`lfo_cli.report.sensitivity` adds leave-one-seed-out verdicts,
the paired step-0 and gain differences, warm-start skill as a covariate and the resumed runs. With
``equivalence_margin`` each arm is also tested for equivalence with the reference (TOST: equivalent when the paired
(1 - 2 alpha) t-interval lies inside +-margin; different when the (1 - alpha) interval excludes 0).
"""

from __future__ import annotations

import math
import statistics

from lfo_cli import stats
from lfo_cli.eval import comparison
from lfo_cli.report import verdict
from lfo_cli.report.declared_runs import ArmRun, arm_run, breakdown
from lfo_cli.report.format import est, finite, num, pval
from lfo_cli.report.load import Run
from lfo_cli.report.plan import PLAN_FILE, Plan
from lfo_cli.report.run_stats import draw_band, mean_band
from lfo_cli.report.sensitivity import sensitivity_section
from lfo_cli.report.study import ratio_text

THRESHOLD_FRACTION = 0.5  # tasks-to-threshold: the reference's mean start + this x its mean gain


# ---------------------------------------------------------------------------------------------
# The section
# ---------------------------------------------------------------------------------------------
def applies(plan: Plan | None, train: list[Run]) -> bool:
    return plan is not None and any(plan.arm_of(r) for r in train)


def declared_section(rep, plan: Plan, train: list[Run], pd, plt) -> None:
    """Append the section to ``rep.md``, its tables and figure to ``rep.writer``; ``rep.summary["declared"]``."""
    W = rep.writer
    runs: dict[str, list[ArmRun]] = {a: [] for a in plan.arms}
    unmatched = unfinished = unmeasured = 0
    for r in train:
        arm = plan.arm_of(r)
        if arm is None:
            unmatched += 1
        elif r.status != "complete":  # a run cut short has fewer evaluations: its mean over the run is another measure
            unfinished += 1
        elif (a := arm_run(r, plan)) is None:
            unmeasured += 1
        else:
            runs[arm].append(a)
    for v in runs.values():
        v.sort(key=lambda a: (a.seed is None, a.seed if isinstance(a.seed, int) else -1, a.run.name))
    ref = plan.reference
    arms = [a for a in plan.arms if a != ref and runs[a]]
    # Holm's family: every declared arm but the reference; one without a test (no runs, < 2 pairs) counts as p = 1
    family = max(1, len(plan.arms) - 1)
    P = plan.primary
    rep.md.append(f"## {plan.title}: the declared comparisons\n")
    rep.md.append(f"The plan: `{plan.path.name if plan.path else PLAN_FILE}`. Primary outcome `{P}`, "
                  + ("at each run's last evaluation" if plan.statistic == "final" else
                     "its mean over each run (the area under its curve vs tasks seen, step 0 to the last evaluation)")
                  + f"; every arm against `{ref}`, paired by seed; family-wise alpha {plan.alpha:g} "
                  f"over the {family} declared arm(s) (Holm; an arm without a test counts as p = 1)"
                  + (f"; declared smallest detectable effect {num(plan.smallest_effect)}" if plan.smallest_effect
                     else "") + ". Runs per arm: " + ", ".join(f"{a} {len(v)}" for a, v in runs.items())
                  + (f"; {unmatched} run(s) outside the plan's arms are left out" if unmatched else "")
                  + (f"; {unfinished} unfinished run(s) are left out" if unfinished else "")
                  + (f"; {unmeasured} finished run(s) without an evaluation of `{P}` are left out" if unmeasured else "")
                  + ".\n")
    if not runs[ref]:
        rep.md.append(f"Skipped: no finished run of the reference arm `{ref}` with an evaluation of `{P}`.\n")
        rep.summary["declared"] = {"title": plan.title, "reference": ref, "comparisons": []}
        return

    _curves(rep, plan, runs, pd, plt)
    by_seed = {a: {r.seed: r for r in v} for a, v in runs.items()}
    base = runs[ref]
    threshold = comparison.reachable_threshold([r.primary_start for r in base], [r.primary_final for r in base],
                                               fraction=THRESHOLD_FRACTION)
    rows, diffs, final_diffs, pairs = [], {}, {}, {}
    for arm in arms:
        common = sorted(set(by_seed[ref]) & set(by_seed[arm]), key=lambda s: (s is None, s))
        # a pair is compared over the same evaluations (tasks seen) on both sides, or not at all: for `final`, the
        # last one; the secondary AUC spans each run's own evaluations of its metric
        same = ((lambda a, b: a.x == b.x) if plan.statistic != "final" else (lambda a, b: a.x[-1:] == b.x[-1:]))
        seeds = [s for s in common if same(by_seed[arm][s], by_seed[ref][s])]
        b = [by_seed[ref][s] for s in seeds]
        t = [by_seed[arm][s] for s in seeds]
        diff = comparison.paired_diff_ci([r.primary for r in t], [r.primary for r in b])
        d = [x.primary - y.primary for x, y in zip(t, b, strict=True)]
        diffs[arm] = d
        pairs[arm] = list(zip(seeds, t, b, strict=True))
        sd = statistics.stdev(d) if len(d) >= 2 else math.nan
        sd = sd if sd > 1e-12 else math.nan  # every pair moved by the same amount: no spread to size an effect by
        auc = comparison.paired_diff_ci([r.secondary_auc for r in t], [r.secondary_auc for r in b])
        poi = comparison.probability_of_improvement([r.primary for r in runs[arm]], [r.primary for r in base])
        ratio = _ratio(b, t, threshold)
        rows.append({
            "arm": arm, "reference": ref, "pairs": diff.n, "pairs_dropped": len(common) - len(seeds),
            "primary_diff": diff.value, "primary_low": diff.low, "primary_high": diff.high,
            # the tests' p-values come from the verdict rule below (every arm first: Holm needs the family)
            "ttest_p": math.nan, "wilcoxon_p": math.nan, "wins": sum(round(x, 12) > 0 for x in d),
            "losses": sum(round(x, 12) < 0 for x in d),
            "p_improvement": poi.value, "p_improvement_low": poi.low, "p_improvement_high": poi.high,
            "secondary_auc_diff": auc.value, "secondary_auc_low": auc.low, "secondary_auc_high": auc.high,
            "ratio": ratio.get("ratio"), "ratio_low": ratio.get("low"), "ratio_high": ratio.get("high"),
            "ratio_kind": ratio.get("kind", ""), "ratio_text": ratio_text(ratio),
            "start": _mean([r.primary_start for r in runs[arm]]), "gain_auc": _mean([r.gain_auc for r in runs[arm]]),
            "wm_over_rl_median": _median([r.wm_over_rl for r in runs[arm]]),
            "mde": comparison.min_detectable_effect(sd, len(d), alpha=plan.alpha / family),
        })
        if plan.equivalence_margin is not None:  # a declared equivalence study: TOST on the primary statistic
            eq = comparison.tost_paired(d, plan.equivalence_margin, plan.alpha)
            rows[-1].update({"equivalence_margin": plan.equivalence_margin, "tost_low": eq.low, "tost_high": eq.high,
                             "tost_p": eq.p, "equivalent": eq.equivalent})
        if plan.statistic != "final":  # the outcome's level at the last evaluation, beside its mean over the run
            fin = comparison.paired_diff_ci([r.primary_final for r in t], [r.primary_final for r in b])
            final_diffs[arm] = [x.primary_final - y.primary_final for x, y in zip(t, b, strict=True)]
            rows[-1].update({"final_diff": fin.value, "final_low": fin.low, "final_high": fin.high,
                             "final_ttest_p": math.nan, "final_wilcoxon_p": math.nan})
    # the one verdict rule (lfo_cli.report.verdict): the Holm-adjusted paired t-test over the declared arms decides
    verdicts = verdict.family(diffs, alpha=plan.alpha, size=family)
    finals = verdict.family(final_diffs, alpha=plan.alpha, size=family) if final_diffs else {}
    for r in rows:
        v = verdicts[r["arm"]]
        r.update({"ttest_p": v.p_raw, "wilcoxon_p": v.wilcoxon_p_raw, "ttest_p_holm": v.p, "wilcoxon_p_holm": v.wilcoxon_p,
                  "wilcoxon_floor": verdict.wilcoxon_floor(v.n, v.family), **v.as_dict()})
        if r["arm"] in finals:
            f = finals[r["arm"]]
            r.update({"final_ttest_p": f.p_raw, "final_wilcoxon_p": f.wilcoxon_p_raw, "final_ttest_p_holm": f.p,
                      "final_wilcoxon_p_holm": f.wilcoxon_p})
    ref_row = {"start": _mean([r.primary_start for r in base]), "gain_auc": _mean([r.gain_auc for r in base]),
               "wm_over_rl_median": _median([r.wm_over_rl for r in base])}
    W.csv("declared_comparisons.csv", pd.DataFrame(rows, columns=list(rows[0]) if rows else ["arm"]))
    sentences = _comparison_table(rep, plan, rows, ref_row, threshold, verdicts)
    _runs_table(rep, plan, runs, pd)
    if plan.by:
        _breakdown(rep, plan, runs, pd)
    control = _positive_control(plan, rows, verdicts)
    if control:
        rep.md.append(control + "\n")
    if plan.equivalence_margin is not None:
        sentences += _equivalence(rep, plan, rows)
    sensitivity = sensitivity_section(rep, plan, pairs, runs, verdicts, family, pd) if pairs else {}
    rep.summary["declared"] = {"title": plan.title, "reference": ref, "primary": P, "threshold": threshold,
                               "comparisons": rows, "sentences": sentences, "positive_control": control,
                               "sensitivity": sensitivity}


def _equivalence(rep, plan: Plan, rows: list[dict]) -> list[str]:
    """The declared equivalence test, arm by arm: equivalent when the paired (1 - 2 alpha) t-interval lies inside
    +-margin (TOST); different when the (1 - alpha) interval excludes 0; otherwise neither is shown."""
    m = plan.equivalence_margin
    level = round(100 * (1 - 2 * plan.alpha))
    out = []
    for r in rows:
        if not finite(r["tost_p"]):
            word = f"not tested ({r['pairs']} pair(s), or no spread between them)"
        elif r["equivalent"]:
            word = f"**equivalent** within +-{num(m)}"
        elif finite(r["primary_low"]) and (r["primary_low"] > 0 or r["primary_high"] < 0):
            word = "**different**: the 95% interval excludes 0"
        else:
            word = f"neither equivalence within +-{num(m)} nor a difference is shown"
        interval = est({"value": r["primary_diff"], "low": r["tost_low"], "high": r["tost_high"], "n": r["pairs"]})
        out.append(f"`{r['arm']}` vs `{r['reference']}`: {interval} ({level}% t-interval, {r['pairs']} pairs), "
                   f"TOST p {pval(r['tost_p'])}: {word}.")
    rep.md.append(f"**Equivalence** (declared margin +-{num(m)} on the primary statistic; two one-sided paired "
                  f"t-tests at alpha {plan.alpha:g}):\n")
    rep.md.extend(f"- {line}" for line in out)
    rep.md.append("")
    return out


def _mean(xs) -> float:
    v = [x for x in xs if finite(x)]
    return sum(v) / len(v) if v else math.nan


def _median(xs) -> float:
    v = [x for x in xs if finite(x)]
    return statistics.median(v) if v else math.nan


def _ratio(b: list[ArmRun], t: list[ArmRun], threshold: float) -> dict:
    if not b:
        return {"ratio": math.nan, "n": 0, "note": "no seed paired with the reference"}
    if not finite(threshold):
        return {"ratio": math.nan, "n": 0, "note": "no threshold: the reference did not gain"}
    # held-out evaluations are few (start, end and every heldout_every steps): no smoothing window
    to = [[stats.tasks_to_threshold(r.x, r.y, threshold, window=1) for r in side] for side in (b, t)]
    return comparison.paired_ratio_ci(
        [h if h is not None else max(r.x) for h, r in zip(to[0], b, strict=True)],
        [h if h is not None else max(r.x) for h, r in zip(to[1], t, strict=True)],
        censored_baseline=[h is None for h in to[0]], censored_treatment=[h is None for h in to[1]]).as_dict()


def _curves(rep, plan: Plan, runs: dict[str, list[ArmRun]], pd, plt) -> None:
    rows = [{"arm": arm, "metric": metric, **row}
            for arm, rs in runs.items()
            for metric, get in (("primary", lambda r: (r.x, r.y)), ("secondary", lambda r: (r.sec_x, r.sec_y)))
            for row in mean_band(get(r) for r in rs)]
    df = pd.DataFrame(rows, columns=["arm", "metric", "tasks_seen", "mean", "ci_low", "ci_high", "n"])
    rep.writer.csv("declared_curves.csv", df)
    panels = [("primary", plan.primary)] + ([("secondary", plan.secondary)] if plan.secondary else [])
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4.2), squeeze=False)
    for ax, (metric, title) in zip(axes[0], panels, strict=True):
        for i, arm in enumerate(runs):
            sub = df[(df.arm == arm) & (df.metric == metric)]
            if sub.empty:
                continue
            draw_band(ax, sub, f"C{i % 10}", f"{arm} (n={len(runs[arm])})", dashed=arm == plan.reference)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("tasks seen (training prompts)")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    rep.writer.figure("declared_curves.png", fig)
    rep.md.append("![declared curves](declared_curves.png)\n\nMean over seeds with a 95% percentile-bootstrap band. "
                  "Data: `declared_curves.csv`.\n")


def _comparison_table(rep, plan: Plan, rows: list[dict], ref_row: dict, threshold: float,
                      verdicts: dict[str, verdict.Verdict]) -> list[str]:
    final_col = plan.statistic != "final"
    e = lambda r, k: est({"value": r[f"{k}_diff" if k != "p_improvement" else k], "low": r[f"{k}_low"],  # noqa: E731
                          "high": r[f"{k}_high"], "n": r["pairs"]})
    lines = [f"Threshold for tasks-to-threshold (the reference's mean start + {THRESHOLD_FRACTION} x its mean gain "
             f"in `{plan.primary}`): **{num(threshold)}**. Intervals: t-intervals over seed pairs; p-values: paired "
             "t-test and Wilcoxon signed-rank, each Holm-adjusted over the arms (raw in `declared_comparisons.csv`); "
             "P(better): probability of improvement of the primary outcome, percentile bootstrap. *Smallest "
             "detectable*: the difference this many pairs detect with 80% power at the declared alpha / number of arms, "
             "from the observed paired spread.\n",
             f"| arm | pairs | {_label(plan)} diff [95% CI] | p (t, Holm) | p (Wilcoxon, Holm) | wins / losses | "
             "P(better) | " + (f"{plan.secondary} AUC diff | " if plan.secondary else "")
             + (f"`{plan.primary}` at the last evaluation diff [95% CI] (p t, Wilcoxon; Holm) | " if final_col else "")
             + "tasks-to-threshold ratio reference/arm | step 0 | AUC of gain | median wm/rl | smallest detectable | "
               "verdict |",
             "|---|---|---|---|---|---|---|" + ("---|" if plan.secondary else "") + ("---|" if final_col else "")
             + "---|---|---|---|---|---|",
             f"| {plan.reference} (reference) | - | - | - | - | - | - | " + ("- | " if plan.secondary else "")
             + ("- | " if final_col else "")
             + f"- | {num(ref_row['start'])} | {num(ref_row['gain_auc'])} | {num(ref_row['wm_over_rl_median'])} | - | - |"]
    for r in rows:
        lines.append(
            f"| {r['arm']} | {r['pairs']} | {e(r, 'primary')} | {pval(r['ttest_p_holm'])} | {_wilcoxon(verdicts[r['arm']])} | "
            f"{r['wins']} / {r['losses']} | {e(r, 'p_improvement')} | "
            + (f"{e(r, 'secondary_auc')} | " if plan.secondary else "")
            + (f"{e(r, 'final')} ({pval(r['final_ttest_p_holm'])}, {pval(r['final_wilcoxon_p_holm'])}) | "
               if final_col else "")
            + f"{r['ratio_text']} | {num(r['start'])} | {num(r['gain_auc'])} | {num(r['wm_over_rl_median'])} | "
            f"{num(r['mde'])} | {verdicts[r['arm']].phrase()} |")
    sentences = []
    for r in rows:
        v = verdicts[r["arm"]]
        dropped = (f" ({r['pairs_dropped']} pair(s) left out: their evaluations differ from the reference's)"
                   if r["pairs_dropped"] else "")
        if not v.tested:
            sentences.append(f"{r['arm']}: {v.phrase()} on {_label(plan)}{dropped}.")
            continue
        diff = est({'value': r['primary_diff'], 'low': r['primary_low'], 'high': r['primary_high'], 'n': r['pairs']})
        power = f"; this design detects about {num(r['mde'])} with 80% power" if v.side == 0 else ""
        notes = "".join(f"; {n}" for n in v.notes())
        sentences.append(f"{r['arm']}: {v.phrase()} on {_label(plan)}: difference {diff} over {r['pairs']} pairs"
                         f"{notes}{power}{dropped}.")
    compared = {r["arm"] for r in rows}
    sentences += [f"{a}: no finished run to compare; it counts as p = 1 in Holm's family."
                  for a in plan.arms if a != plan.reference and a not in compared]
    rep.md.append("\n".join(lines) + "\n\n" + "\n".join(f"- {s}" for s in sentences) + "\n")
    return sentences


def _runs_table(rep, plan: Plan, runs: dict[str, list[ArmRun]], pd) -> None:
    rows = []
    for arm, rs in runs.items():
        for r in rs:
            row = {"arm": arm, "seed": r.seed, "run": r.run.name, "status": r.run.status, "final_step": r.final_step,
                   "primary_start": r.primary_start, "primary_final": r.primary_final, "primary": r.primary,
                   "secondary_auc": r.secondary_auc, "gain_auc": r.gain_auc,
                   "wm_over_rl_median": r.wm_over_rl if r.wm_over_rl is not None else math.nan}
            for m in plan.mechanism:
                row[f"{m}_start"] = r.start.get(m, math.nan)
                row[f"{m}_final"] = r.final.get(m, math.nan)
            rows.append(row)
    rep.writer.csv("declared_runs.csv", pd.DataFrame(rows))
    if not plan.mechanism:
        return
    lines = ["### The mechanism\n", "Start -> last evaluation, mean over each arm's seeds.\n",
             "| arm | n | " + " | ".join(f"`{m}`" for m in plan.mechanism) + " |",
             "|---|---|" + "---|" * len(plan.mechanism)]
    for arm, rs in runs.items():
        if rs:
            lines.append(f"| {arm} | {len(rs)} | " + " | ".join(
                f"{num(_mean([r.start.get(m) for r in rs]))} -> {num(_mean([r.final.get(m) for r in rs]))}"
                for m in plan.mechanism) + " |")
    rep.md.append("\n".join(lines) + "\n\nPer run: `declared_runs.csv`.\n")


def _breakdown(rep, plan: Plan, runs: dict[str, list[ArmRun]], pd) -> None:
    rows = []
    missing = 0
    for arm, rs in runs.items():
        for r in rs:
            got = breakdown(r, plan)
            if got is None:
                missing += 1
                continue
            for name, (won, n) in got.items():
                rows.append({"arm": arm, "seed": r.seed, plan.by: name, "successes": won, "episodes": n})
    rep.md.append(f"### `{plan.primary}` by `{plan.by}` (last evaluation)\n")
    if not rows:
        rep.md.append(f"Not recorded: the runs' validation files do not keep each episode's `{plan.by}`.\n")
        return
    df = pd.DataFrame(rows)
    rep.writer.csv(f"declared_by_{plan.by}.csv", df)
    pooled = df.groupby([plan.by, "arm"], sort=True)[["successes", "episodes"]].sum().reset_index()
    arms = [a for a in runs if a in set(pooled.arm)]
    lines = ["Success over every seed's episodes with that value (episodes in brackets).\n",
             f"| {plan.by} | " + " | ".join(arms) + " |", "|---|" + "---|" * len(arms)]
    for value, sub in pooled.groupby(plan.by, sort=True):
        cells = {r.arm: f"{r.successes / r.episodes:.2f} ({r.episodes})" for r in sub.itertuples()}
        lines.append(f"| {value} | " + " | ".join(cells.get(a, "-") for a in arms) + " |")
    note = f" {missing} run(s) without `{plan.by}` in their files are left out." if missing else ""
    rep.md.append("\n".join(lines) + f"\n\nData: `declared_by_{plan.by}.csv` (per seed).{note}\n")


def _label(plan: Plan) -> str:
    return f"`{plan.primary}`" + (" (AUC)" if plan.statistic == "auc" else "")


def _wilcoxon(v: verdict.Verdict) -> str:
    """Wilcoxon's Holm-adjusted p, or why it cannot pass at this many pairs (its floor at or above alpha)."""
    if v.tested and not v.wilcoxon_reachable:
        return f"cannot reach {v.alpha:g} (floor {pval(verdict.wilcoxon_floor(v.n, v.family))})"
    return pval(v.wilcoxon_p)


def _positive_control(plan: Plan, rows: list[dict], verdicts: dict[str, verdict.Verdict]) -> str | None:
    """The positive control, judged by the rule every arm faces (inside the Holm family)."""
    if not plan.positive_control:
        return None
    name = f"**Positive control** (`{plan.positive_control}`, chosen to make {_label(plan)} {plan.positive_control_effect})"
    row = next((r for r in rows if r["arm"] == plan.positive_control), None)
    if row is None or row["pairs"] < 2:
        return f"{name}: not enough paired seeds to judge."
    v = verdicts[row["arm"]]
    ci = est({"value": row["primary_diff"], "low": row["primary_low"], "high": row["primary_high"], "n": row["pairs"]})
    phrase = v.control_phrase(plan.positive_control_effect)
    notes = "".join(f"; {n}" for n in v.notes())
    if phrase.startswith("detected"):
        return f"{name}: {phrase}, {ci}{notes}: the design sees an effect of that size under the test every arm faces."
    if phrase.startswith("moved"):
        return (f"{name}: {phrase}, {ci}{notes}: not a control in this regime, so the design's power is not shown "
                "by it.")
    return (f"{name}: {phrase}, {ci}{notes}: the design lacked power for an effect of that size under the test every "
            "arm faces, so a null for another arm bounds its effect only as loosely.")

"""The observation-study section of `lfo report`: does a world-model loss help the policy learn difficulty 2, what
only the tools' replies reveal? (The world words it: :attr:`lfo_cli.worlds.World.study_words`.)

Read from each training run's `metrics.jsonl` (validation rows) and `summary.json`; written only when
the runs validated at difficulty 2 and a baseline (wm.coef 0) is among them. Every treatment
condition is compared with the baseline **paired by seed** (a seed fixes the training tasks, their
order and the validation episodes), with the statistics of :mod:`lfo_cli.eval.comparison`:

- AUC of d2 validation success vs tasks seen (censoring-free learning speed): paired mean difference
  with a t-interval, and the probability of improvement P(treatment > baseline) (Agarwal et al. 2021);
- final d2 success: paired difference with a t-interval;
- tasks to the *reachable threshold* (declared before the grid: the baseline's mean start + half its
  mean gain on d2): the ratio baseline / treatment, geometric mean of per-seed ratios with a t-interval
  on log ratios; a run that never reaches it is censored at its last evaluation and counted;
- the smallest AUC difference the study could have detected (80% power, from the paired spread);
- the world's own measures of what the policy learned (:attr:`World.study_words`: in the customer-service world,
  the form's specificity), and the held-out control / transfer (d1, d2), start vs end.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from lfo_cli import run_record as rr
from lfo_cli import stats
from lfo_cli.eval import comparison
from lfo_cli.report import verdict
from lfo_cli.report.final_metrics import world_of
from lfo_cli.report.format import est, finite, num
from lfo_cli.report.load import Run
from lfo_cli.report.run_stats import SMOOTH_WINDOW, draw_band, mean_band

D2 = rr.VAL_SUCCESS_D2
THRESHOLD_FRACTION = 0.5  # the reachable threshold: baseline start + this x the baseline's mean gain
ABSOLUTE = (0.5, 0.7, 0.9)
HELDOUT = (rr.HELDOUT_SUCCESS_D1, rr.HELDOUT_SUCCESS_D2)
WM_SEMANTIC = rr.VAL_WM_SEMANTIC_ACC
WM_TOKEN = rr.WM_TOKEN_ACC
WARMSTART = "model.warmstart"  # the recipe key naming the warm start a run trains from
RQ4_TOKEN_WINDOW = 5  # training steps of wm/token_acc averaged up to each evaluation (RQ4's fallback measure)


@dataclass
class StudyRun:
    run: Run
    x: list[float]  # tasks seen at each validation
    d2: list[float]
    overall: list[float]
    start: dict[str, float]  # the step-0 validation row
    final: dict[str, float]  # the last validation row (held-out metrics from the last row that has them)
    rows: list[dict] = field(default_factory=list)  # the validation rows with d2, by step
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def seed(self):
        return self.run.seed

    @property
    def auc(self) -> float | None:
        return stats.curve_auc(self.x, self.d2) if self.x else None

    @property
    def gain_auc(self) -> float | None:
        """The AUC of the gain over the run's own step 0 (the AUC minus its start): how much it learned,
        whatever it started from. None without a step-0 evaluation."""
        return self.auc - self.d2[0] if self.auc is not None and self.start else None

    @property
    def limit(self) -> float:
        return max(self.x) if self.x else math.nan


def study_run(run: Run) -> StudyRun | None:
    rows = sorted((r for r in run.rows if D2 in r and rr.TASKS_SEEN in r), key=lambda r: r[rr.STEP])
    if not rows:
        return None
    held = [r for r in run.rows if any(k in r for k in HELDOUT)]
    final = dict(rows[-1])
    if held and held[-1][rr.STEP] != rows[0][rr.STEP]:
        final.update({k: v for k, v in held[-1].items() if k.startswith(rr.HELDOUT_PREFIX)})
    start = dict(rows[0]) if rows[0][rr.STEP] == 0 else {}
    return StudyRun(run, [float(r[rr.TASKS_SEEN]) for r in rows], [float(r[D2]) for r in rows],
                    [float(r.get(rr.VAL_SUCCESS, math.nan)) for r in rows], start, final, rows)


def applies(train: list[Run]) -> bool:
    """The section is written when runs validated at d2 and a baseline is among them."""
    return any(r.role == "baseline" for r in train) and any(any(D2 in row for row in r.rows) for r in train)


def ratio_text(ratio: dict) -> str:
    """A tasks-to-threshold ratio with its interval, read through its censoring: a condition that never
    reached the threshold in any pair gives only a bound (its runs are counted at their last evaluation)."""
    value, n = ratio.get("ratio"), ratio.get("n", 0)
    if not finite(value):
        return f"undefined ({ratio.get('note') or 'no pairs'})"
    kind = ratio.get("kind", "")
    if kind == "upper_bound" and ratio.get("n_censored_treatment") == n:
        return f"<= {num(value)} (the condition never reached it)"
    if kind == "lower_bound" and ratio.get("n_censored_baseline") == n:
        return f">= {num(value)} (the baseline never reached it)"
    text = {"upper_bound": "<= ", "lower_bound": ">= "}.get(kind, "") + est(
        {"value": value, "low": ratio.get("low"), "high": ratio.get("high"), "n": n})
    return text + (" (runs censored on both sides: bias of unknown direction)" if kind == "undetermined" else "")


def _words(v: verdict.Verdict, over_start: bool, subject: str) -> str:
    """A d2 comparison's verdict in words (``over_start``: judged by the gain over each run's own step 0; ``subject``:
    what the world calls learning d2, :attr:`lfo_cli.worlds.StudyWords.d2_subject`)."""
    if over_start:
        return v.word("gains more on d2 than the baseline, each over its own start",
                      "gains less on d2 than the baseline, each over its own start",
                      "no difference detected in its gain over its own start")
    return v.word(f"learns {subject} faster than the baseline", f"learns {subject} slower than the baseline",
                  "no effect detected on d2 learning speed")


def _sentence(cond: str, v: verdict.Verdict, auc: dict, poi: dict, ratio: dict, mde: float, final: dict | None = None,
              start: dict | None = None, gain: dict | None = None, *, subject: str = "d2") -> str:
    """One condition's d2 verdict. A condition that starts from another warm start (``start``: the paired
    step-0 difference, given only then) is judged by its gain over its own step 0 (``gain``), since its
    AUC counts the head start as learning."""
    if not finite(auc.get("value")) or auc.get("n", 0) < 2 or not v.tested:
        return f"{cond} vs baseline: insufficient paired seeds for a comparison."
    why = v.p_words() + "".join(f"; {n}" for n in v.notes())
    if start is not None and gain is not None:
        text = (f"{cond} vs baseline: starts from another warm start (step-0 d2 difference {est(start)}) and "
                f"{_words(v, True, subject)} ({why}; AUC of the gain over step 0, difference {est(gain)}; d2 AUC "
                f"difference with the head start {est(auc)} over {auc['n']} seed pairs; P(better) {num(poi.get('value'))}")
    else:
        text = (f"{cond} vs baseline: {_words(v, False, subject)} ({why}; d2 AUC difference {est(auc)} over {auc['n']} seed pairs; "
                f"P(better) {num(poi.get('value'))}")
    if final and finite(final.get("value")) and finite(final.get("low")) and (final["low"] > 0 or final["high"] < 0):
        text += f"; final d2 success difference {est(final)}"
    if finite(ratio.get("ratio")):
        text += f"; tasks-to-threshold ratio baseline/{cond} {ratio_text(ratio)}"
    text += f"). The smallest AUC difference this design detects with 80% power: {num(mde)}."
    return text


def study_section(rep, train: list[Run], conds: list[str], pd, plt) -> None:
    """Append the section to ``rep.md`` and its files to ``rep.writer``; ``rep.summary["study"]``."""
    W = rep.writer
    runs = {c: sorted((s for r in train if r.condition == c and (s := study_run(r)) is not None),
                      key=lambda s: (s.seed is None, s.seed if isinstance(s.seed, int) else -1, s.run.name))
            for c in conds}
    runs = {c: v for c, v in runs.items() if v}
    baselines = ([c for c in runs if runs[c][0].run.reference] or
                 [c for c in runs if runs[c][0].run.role == "baseline"])
    words = world_of(train).study_words
    d2_what = f" ({words.d2})" if words.d2 else ""
    rep.md.append(f"## The observation study: difficulty 2{d2_what}\n" if not any(r.arm for r in train) else
                  f"## {words.training[:1].upper()}{words.training[1:]}' difficulty 2{d2_what}\n")
    specificity = tuple(key for key, _ in words.columns)
    if not baselines:
        rep.md.append(f"Skipped: no baseline ({rr.WM_COEF} 0) run validated at difficulty 2.")
        return
    base = baselines[0]
    declared = runs[base][0].run.reference  # a declared plan's reference: every other arm is compared with it
    treatments = [c for c in runs if c != base and (runs[c][0].run.arm is not None if declared
                                                     else runs[c][0].run.role != "baseline")]

    # ---- curves: d2 and overall success vs tasks seen, mean and band over seeds -----------------
    rows = [{"condition": c, "metric": metric, **row}
            for c, ss in runs.items()
            for metric, get in (("d2", lambda s: s.d2), ("overall", lambda s: s.overall))
            for row in mean_band((s.x, get(s)) for s in ss)]
    curves = pd.DataFrame(rows, columns=["condition", "metric", "tasks_seen", "mean", "ci_low", "ci_high", "n"])
    W.csv("study_curves.csv", curves)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=False)
    for ax, metric, title in ((axes[0], "d2", f"d2 success{d2_what}"), (axes[1], "overall", "success, d1 and d2")):
        for i, c in enumerate(runs):
            sub = curves[(curves.condition == c) & (curves.metric == metric)]
            draw_band(ax, sub, f"C{i % 10}", f"{c} (n={len(runs[c])})", dashed=c == base)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("tasks seen (training prompts)")
        ax.set_ylabel("validation success")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    W.figure("study_curves.png", fig)
    rep.md.append(f"![study curves](study_curves.png)\n\nValidation success on {words.validation} vs tasks seen; mean "
                  "over seeds with a 95% percentile-bootstrap band. Data: `study_curves.csv`.\n")

    # ---- the reachable threshold and per-run table ------------------------------------------------
    threshold = comparison.reachable_threshold([s.start.get(D2) for s in runs[base]], [s.final.get(D2) for s in runs[base]],
                                               fraction=THRESHOLD_FRACTION)
    per_run = []
    for c, ss in runs.items():
        for s in ss:
            to = stats.tasks_to_threshold(s.x, s.d2, threshold, window=SMOOTH_WINDOW) if finite(threshold) else None
            s.extra["to"] = to
            row = {"condition": c, "seed": s.seed, "run": s.run.name, "status": s.run.status, "evaluations": len(s.x),
                   "last_tasks_seen": s.limit, "d2_start": s.start.get(D2, math.nan), "d2_final": s.final.get(D2, math.nan),
                   "d2_auc": s.auc if s.auc is not None else math.nan,
                   "tasks_to_threshold": to if to is not None else math.nan, "censored": finite(threshold) and to is None}
            for t in ABSOLUTE:
                hit = stats.tasks_to_threshold(s.x, s.d2, t, window=SMOOTH_WINDOW)
                row[f"tasks_to_{int(t * 100)}"] = hit if hit is not None else math.nan
            for k in (*specificity, *HELDOUT):
                name = k.split("/", 1)[0] + "_" + k.rsplit("/", 1)[-1] if k.startswith(rr.HELDOUT_PREFIX) else k.split("/")[-1]
                row[f"{name}_start"] = s.start.get(k, math.nan)
                row[f"{name}_final"] = s.final.get(k, math.nan)
            per_run.append(row)
    per_run_df = pd.DataFrame(per_run)
    W.csv("study_runs.csv", per_run_df)

    # ---- comparisons with the baseline ----------------------------------------------------------
    by_seed = {c: {s.seed: s for s in ss} for c, ss in runs.items()}
    comp_rows, sentences, measured, args = [], [], {}, {}
    for c in treatments:
        seeds = sorted(set(by_seed[base]) & set(by_seed[c]), key=lambda x: (x is None, x))
        b = [by_seed[base][k] for k in seeds]
        t = [by_seed[c][k] for k in seeds]
        auc = comparison.paired_diff_ci([s.auc for s in t], [s.auc for s in b]).as_dict()
        fin = comparison.paired_diff_ci([s.final.get(D2) for s in t], [s.final.get(D2) for s in b]).as_dict()
        poi = comparison.probability_of_improvement([s.auc for s in runs[c]], [s.auc for s in runs[base]]).as_dict()
        # another warm start (the recipe's `model.warmstart`): a step 0 of its own, which the AUC counts as learned
        other_start = any(a.run.config.get(WARMSTART) != z.run.config.get(WARMSTART) for a, z in zip(t, b, strict=True))
        start = comparison.paired_diff_ci([s.start.get(D2) for s in t], [s.start.get(D2) for s in b]).as_dict() \
            if other_start else None
        gain = comparison.paired_diff_ci([s.gain_auc for s in t], [s.gain_auc for s in b]).as_dict() \
            if other_start else None
        diffs = [a.auc - z.auc for a, z in zip(t, b, strict=True) if a.auc is not None and z.auc is not None]
        sd = float(pd.Series(diffs).std(ddof=1)) if len(diffs) >= 2 else math.nan
        mde = comparison.min_detectable_effect(sd, len(diffs)) if finite(sd) else math.nan
        ratio = comparison.paired_ratio_ci(
            [s.extra["to"] if s.extra["to"] is not None else s.limit for s in b],
            [s.extra["to"] if s.extra["to"] is not None else s.limit for s in t],
            censored_baseline=[s.extra["to"] is None for s in b], censored_treatment=[s.extra["to"] is None for s in t],
        ).as_dict() if finite(threshold) and seeds else {"ratio": math.nan, "low": math.nan, "high": math.nan, "n": 0,
                                                         "n_censored_baseline": 0, "n_censored_treatment": 0, "kind": "",
                                                         "note": "threshold undefined: the baseline did not gain on d2"}
        comp_rows.append({"condition": c, "baseline": base, "pairs": len(seeds),
                          "auc_diff": auc["value"], "auc_low": auc["low"], "auc_high": auc["high"],
                          "p_improvement": poi["value"], "p_improvement_low": poi["low"], "p_improvement_high": poi["high"],
                          "final_diff": fin["value"], "final_low": fin["low"], "final_high": fin["high"],
                          "ratio": ratio["ratio"], "ratio_low": ratio["low"], "ratio_high": ratio["high"],
                          "censored_baseline": ratio["n_censored_baseline"], "censored_treatment": ratio["n_censored_treatment"],
                          "ratio_kind": ratio.get("kind", ""), "ratio_note": ratio.get("note", ""),
                          "ratio_text": ratio_text(ratio), "auc_mde": mde,
                          **({"start_diff": start["value"], "start_low": start["low"], "start_high": start["high"],
                              "gain_auc_diff": gain["value"], "gain_auc_low": gain["low"], "gain_auc_high": gain["high"]}
                             if start is not None else {})})
        measured[c] = ([a.gain_auc - z.gain_auc for a, z in zip(t, b, strict=True)
                        if a.gain_auc is not None and z.gain_auc is not None] if other_start else diffs)
        args[c] = (auc, poi, ratio, mde, fin, start, gain)
    # the one verdict rule (lfo_cli.report.verdict): Holm over this table's comparisons with the baseline; an arm
    # from another warm start is judged by its gain over its own step 0
    verdicts = verdict.family(measured)
    for r in comp_rows:
        v = verdicts[r["condition"]]
        r.update({"p": v.p_raw, "p_holm": v.p, "wilcoxon_p_holm": v.wilcoxon_p, **v.as_dict()})
        sentences.append(_sentence(r["condition"], v, *args[r["condition"]], subject=words.d2_subject))
    head_start = any("start_diff" in r for r in comp_rows)  # the columns exist only where some arm starts elsewhere
    comp_df = pd.DataFrame(comp_rows)
    W.csv("study_comparisons.csv", comp_df)
    rep.md.append(f"### Each condition vs the baseline ({base}), paired by seed\n")
    rule = "the reference's" if declared else "declared before the grid: baseline"
    rep.md.append(f"Reachable threshold ({rule} mean d2 start + {THRESHOLD_FRACTION} x its "
                  f"mean d2 gain): **{num(threshold)}**. Intervals: t-intervals over seed pairs (the ratio's on log "
                  "ratios; at 4-5 seeds a percentile bootstrap covers only ~80-85% of the time, see "
                  "`lfo_cli/eval/comparison.py`); P(better): probability of improvement of the d2 AUC with a "
                  "percentile-bootstrap interval. Verdict: the one rule (docs/report.md): the paired t-test on the d2 "
                  "AUC (on the AUC of the gain for a condition from another warm start), Holm-adjusted over this "
                  "table's conditions.\n")
    if head_start:
        rep.md.append("A condition that starts from another warm start has a step-0 d2 of its own, which its AUC counts "
                      "as if learned: its learning is the *AUC of the gain* over its own step 0 (AUC minus step 0), "
                      "compared in the last two columns and in its sentence.\n")
    extra = " step-0 d2 diff [95% CI] | AUC of gain diff [95% CI] |" if head_start else ""
    lines = ["| condition | pairs | d2 AUC diff [95% CI] | P(better) | final d2 diff [95% CI] | tasks-to-threshold ratio "
             "baseline/condition [95% CI] | censored (baseline, condition) | smallest detectable AUC diff |" + extra
             + " verdict |", "|---|---|---|---|---|---|---|---|" + "---|---|" * head_start + "---|"]

    def other(r: dict, key: str) -> str:
        return est({"value": r[f"{key}_diff"], "low": r[f"{key}_low"], "high": r[f"{key}_high"], "n": r["pairs"]}) \
            if f"{key}_diff" in r else "same start"

    for r in comp_rows:
        cells = f" {other(r, 'start')} | {other(r, 'gain_auc')} |" if head_start else ""
        lines.append(f"| {r['condition']} | {r['pairs']} | "
                     f"{est({'value': r['auc_diff'], 'low': r['auc_low'], 'high': r['auc_high'], 'n': r['pairs']})} | "
                     f"{est({'value': r['p_improvement'], 'low': r['p_improvement_low'], 'high': r['p_improvement_high'], 'n': r['pairs']})} | "
                     f"{est({'value': r['final_diff'], 'low': r['final_low'], 'high': r['final_high'], 'n': r['pairs']})} | "
                     f"{r['ratio_text']} | {r['censored_baseline']}, {r['censored_treatment']} | {num(r['auc_mde'])} |"
                     + cells + f" {r['verdict']} |")
    rep.md.append("\n".join(lines) + "\n\n" + "\n".join(f"- {s}" for s in sentences) +
                  "\n\nData: `study_comparisons.csv`; per run: `study_runs.csv`.\n")

    # ---- absolute thresholds, specificity, held-out control --------------------------------------
    lines = ["| condition | n | d2 success | " + " | ".join(f"tasks to {int(t * 100)}% (d2)" for t in ABSOLUTE) +
             "".join(f" | {label}" for _, label in words.columns) + " | held-out d1 | held-out d2 |",
             "|---|---|---|" + "---|" * (len(ABSOLUTE) + len(words.columns) + 2)]
    spec_rows = []
    for c, ss in runs.items():
        cells = []
        for t in ABSOLUTE:
            hits = [stats.tasks_to_threshold(s.x, s.d2, t, window=SMOOTH_WINDOW) for s in ss]
            got = [h for h in hits if h is not None]
            cells.append("not reached" if not got else f"{num(sum(got) / len(got))} ({len(got)}/{len(ss)} reached)")

        def span(key: str, ss=ss, c=c) -> str:
            a = stats.bootstrap_mean_ci([s.start.get(key) for s in ss], n_resamples=1999)
            z = stats.bootstrap_mean_ci([s.final.get(key) for s in ss], n_resamples=1999)
            spec_rows.append({"condition": c, "metric": key, "start": a.value, "final": z.value, "final_low": z.low,
                              "final_high": z.high, "n": z.n})
            return f"{num(a.value)} -> {num(z.value)}"

        lines.append(f"| {c} | {len(ss)} | {span(D2)} | " + " | ".join(cells) + " | "
                     + " | ".join(span(k) for k in (*specificity, *HELDOUT)) + " |")
    W.csv("study_specificity.csv", pd.DataFrame(spec_rows))
    rep.md.append(f"### Thresholds, {words.specificity} and the held-out control\n" if words.specificity else
                  "### Thresholds and the held-out control\n")
    rep.md.append("Start -> end means over seeds." + (f" {words.note}" if words.note else "") + "\n")
    rep.md.append("\n".join(lines) + "\n\nData: `study_specificity.csv`, `study_runs.csv`.\n")

    # ---- RQ4: world-model accuracy vs the policy's next d2 gain --------------------------------------
    measure, points = rq4_points(runs)
    rep.md.append("### World-model accuracy vs the policy's learning (the design's research question 4)\n")
    corr = stats.pearson_with_ci([p["wm_acc"] for p in points], [p["next_d2_gain"] for p in points])
    if points:
        W.csv("study_wm_vs_gain.csv", pd.DataFrame(points))
    what = {WM_SEMANTIC: words.semantic_probe,
            WM_TOKEN: f"The world model's teacher-forced token accuracy on {words.replies} (mean of the "
                      f"{RQ4_TOKEN_WINDOW} training steps up to each evaluation; `{WM_SEMANTIC}`, the semantic probe, "
                      "was the same at nearly every evaluation, e.g. 0 where greedy generation degenerates, so it "
                      "cannot correlate with anything)"}[measure] if measure else ""
    if corr.n >= 4 and finite(corr.r):
        rep.md.append(f"{what}, against the policy's d2 gain until the next evaluation, over every run and evaluation "
                      f"with a world model: Pearson r = {num(corr.r)} [{num(corr.low)}, {num(corr.high)}], p "
                      f"{num(corr.p)}, n = {corr.n} points (points of one run are not independent: read the interval "
                      "as optimistic). Data: `study_wm_vs_gain.csv`.\n")
    else:
        rep.md.append(f"Insufficient points ({corr.n}) with a world-model accuracy (`{WM_SEMANTIC}` or `{WM_TOKEN}`) "
                      "for a correlation.\n")
    rep.summary["study"] = {"baseline": base, "threshold": threshold, "comparisons": comp_rows, "sentences": sentences,
                            "wm_vs_gain": {**corr.as_dict(), "measure": measure}}


def rq4_points(runs: dict[str, list[StudyRun]]) -> tuple[str | None, list[dict]]:
    """(measure, points) for RQ4: at each evaluation with a next one, the world model's accuracy and the
    policy's d2 gain until that next evaluation. The semantic probe when it varies across the points;
    otherwise (all but a few points at one value, e.g. 0 where greedy generation degenerates) the
    teacher-forced token accuracy of the training steps up to the evaluation."""
    def collect(value_at) -> list[dict]:
        pts = []
        for c, ss in runs.items():
            for s in ss:
                for now, nxt in zip(s.rows, s.rows[1:], strict=False):
                    v = value_at(s, now)
                    if finite(v):
                        pts.append({"condition": c, "seed": s.seed, "step": now[rr.STEP], "tasks_seen": now[rr.TASKS_SEEN],
                                    "wm_acc": v, "next_d2_gain": nxt[D2] - now[D2]})
        return pts

    semantic = collect(lambda s, row: row.get(WM_SEMANTIC))
    if semantic:  # varies enough to correlate: at least 4 points, and a tenth, away from its most common value
        off_mode = len(semantic) - Counter(p["wm_acc"] for p in semantic).most_common(1)[0][1]
        if off_mode >= max(4, len(semantic) / 10):
            return WM_SEMANTIC, semantic

    def token_acc(s: StudyRun, row: dict) -> float | None:
        vals = [r[WM_TOKEN] for r in s.run.rows if WM_TOKEN in r and r.get(rr.STEP, 0) <= row[rr.STEP]]
        vals = vals[-RQ4_TOKEN_WINDOW:]
        return sum(vals) / len(vals) if vals else None

    tokens = collect(token_acc)
    return (WM_TOKEN if tokens else (WM_SEMANTIC if semantic else None)), tokens or semantic

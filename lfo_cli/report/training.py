"""The training-runs part of `lfo report`: learning curves, per-run and per-condition tables, then the
sections that read them (sample efficiency, ablations, diagnostics, final metrics, transfer)."""

from __future__ import annotations

import math

from lfo_cli import run_record as rr
from lfo_cli import stats
from lfo_cli.report.ablations import ablation_tables, lambda_section
from lfo_cli.report.diagnostics import correlation_section, grad_norm_section, reward_section
from lfo_cli.report.document import Report
from lfo_cli.report.efficiency import efficiency_section
from lfo_cli.report.final_metrics import (
    final_metric_section,
    has_difficulty_levels,
    transfer_section,
    world_of,
)
from lfo_cli.report.format import finite as _finite
from lfo_cli.report.load import Run
from lfo_cli.report.run_stats import BAND_RESAMPLES, THRESHOLDS, Conditions, group_conditions

# every world's behaviour measures, after the world's own (World.behaviour_metrics)
BEHAVIOUR = (rr.VAL_INVALID_CALLS, rr.VAL_VALID_TOOL_CALL_RATE, rr.VAL_TURNS)


def training_sections(rep: Report, train: list[Run], varying: list[str], corr_window, pd, plt) -> None:
    cs = group_conditions(train, varying)
    conds, rs, by_cond, role = cs.conds, cs.rs, cs.by_cond, cs.role
    complete = sum(r.status == "complete" for r in train)
    rep.md.append(f"## Training runs\n\n{len(train)} runs ({complete} complete) in {len(conds)} condition(s); "
                  f"conditions differ in: {', '.join(varying) or 'nothing (one condition)'}. "
                  f"Per-run metrics: `runs.csv`; every logged value: `tidy.csv.gz`.")
    _learning_curves(rep, cs, pd, plt)
    cond_df, eff_df, eff_rows = _run_tables(rep, cs, pd)
    pairs = efficiency_section(rep, cs, eff_df, eff_rows, pd)
    lambda_section(rep, cs, cond_df, pd, plt)
    ablation_tables(rep, cs, cond_df, eff_df, pd)
    reward_section(rep, cs, pd, plt)
    correlation_section(rep, cs, corr_window, pd, plt)
    grad_norm_section(rep, cs, pd, plt)
    # ---- success by difficulty, behaviour --------------------------------------------------------
    if has_difficulty_levels(train):  # a world of one level: the table would repeat the overall success
        final_metric_section(rep, conds, by_cond, sorted({k for s in rs.values() for k in s.final
                                                           if k.startswith(rr.VAL_SUCCESS_AT)}),
                              "success_by_difficulty", "Success by difficulty (final evaluation)", pd, plt,
                              label=lambda k: k.rsplit("/", 1)[-1])
    behaviour = [rr.metric(rr.VAL, m) for m in world_of(train).behaviour_metrics] + list(BEHAVIOUR)
    final_metric_section(rep, conds, by_cond, [k for k in behaviour if any(k in s.final for s in rs.values())],
                          "behaviour", "Behaviour (final evaluation)", pd, plt, label=lambda k: k.split("/", 1)[-1])

    # ---- transfer -----------------------------------------------------------------------------
    transfer_section(rep, conds, by_cond, role, pairs, pd, plt)


def _learning_curves(rep: Report, cs: Conditions, pd, plt) -> None:
    W = rep.writer
    conds, by_cond, role = cs.conds, cs.by_cond, cs.role
    curve_rows = []
    for c in conds:
        points: dict[float, list[float]] = {}
        for s in by_cond[c]:
            for _, x, y in s.curve:
                points.setdefault(x, []).append(y)
        for x in sorted(points):
            e = stats.bootstrap_mean_ci(points[x], n_resamples=BAND_RESAMPLES)
            curve_rows.append({"condition": c, "tasks_seen": x, "mean": e.value, "ci_low": e.low, "ci_high": e.high,
                               "n": e.n})
    curves = pd.DataFrame(curve_rows, columns=["condition", "tasks_seen", "mean", "ci_low", "ci_high", "n"])
    rep.md.append("### Learning curves\n")
    if curves.empty:
        rep.notes.append(f"Learning curves: no run logged `{rr.VAL_SUCCESS}` with `{rr.TASKS_SEEN}`.")
        rep.md.append(f"Skipped: no run logged validation success (`{rr.VAL_SUCCESS}`) with `{rr.TASKS_SEEN}`.")
    else:
        W.csv("learning_curves.csv", curves)
        fig, ax = plt.subplots(figsize=(7.5, 4.5))
        for i, c in enumerate(conds):
            sub = curves[curves.condition == c]
            if sub.empty:
                continue
            color = f"C{i % 10}"
            ax.plot(sub.tasks_seen, sub["mean"], marker="o", ms=3, color=color, label=f"{c} (n={len(by_cond[c])})",
                    linestyle="--" if role[c] == "baseline" else "-")
            band = sub.dropna(subset=["ci_low", "ci_high"])
            if not band.empty:
                ax.fill_between(band.tasks_seen, band.ci_low, band.ci_high, color=color, alpha=0.15, linewidth=0)
        for t in THRESHOLDS:
            ax.axhline(t, color="grey", linewidth=0.6, linestyle=":")
        ax.set_xlabel("tasks seen (training prompts)")
        ax.set_ylabel("validation success")
        ax.set_ylim(-0.02, 1.02)
        ax.set_title("Validation success vs tasks seen: mean over seeds, 95% bootstrap band")
        ax.legend(fontsize=7)
        fig.tight_layout()
        W.figure("learning_curves.png", fig)
        rep.md.append("![learning curves](learning_curves.png)\n\nData: `learning_curves.csv`. Bands: percentile "
                      "bootstrap of the mean over seeds at each evaluation (none where only one seed has the point).")


def _run_tables(rep: Report, cs: Conditions, pd):
    """training_runs.csv, conditions.csv and sample_efficiency.csv; returns the last two (and its rows)."""
    W = rep.writer
    conds, by_cond, role, cvals, varying = cs.conds, cs.by_cond, cs.role, cs.cvals, cs.varying
    per_run = []
    for c in conds:
        for s in by_cond[c]:
            per_run.append({"run": s.run.name, "condition": c, "seed": s.run.seed, "status": s.run.status,
                            "evaluations": len(s.curve), "last_tasks_seen": s.limit,
                            "start_success": s.curve[0][2] if s.curve and s.curve[0][0] == 0 else math.nan,
                            "final_success": s.final.get(rr.VAL_SUCCESS, math.nan),
                            # final - step 0 (the warm start) on the same episodes, paired (`lfo train` summary)
                            "vs_start": s.run.summary.get(rr.VAL_VS_START_MEAN_DIFF, math.nan),
                            "vs_start_p": s.run.summary.get(rr.VAL_VS_START_WILCOXON_P, math.nan),
                            "auc": s.auc if s.auc is not None else math.nan,
                            **{f"tasks_to_{int(t * 100)}": (s.to[t] if s.to[t] is not None else math.nan)
                               for t in THRESHOLDS},
                            "wm_token_acc_final": s.wm_acc_final if s.wm_acc_final is not None else math.nan})
    per_run_df = pd.DataFrame(per_run)
    W.csv("training_runs.csv", per_run_df)

    cond_rows, eff_rows = [], []
    for c in conds:
        ss = by_cond[c]
        fs = stats.bootstrap_mean_ci([s.final.get(rr.VAL_SUCCESS) for s in ss])
        auc = stats.bootstrap_mean_ci([s.auc for s in ss])
        acc = stats.bootstrap_mean_ci([s.wm_acc_final for s in ss])
        row = {"condition": c, "role": role[c], **{k: cvals[c].get(k, "") for k in varying}, "n": len(ss),
               "final_success": fs.value, "final_success_low": fs.low, "final_success_high": fs.high,
               "auc": auc.value, "auc_low": auc.low, "auc_high": auc.high,
               "wm_token_acc": acc.value, "wm_token_acc_low": acc.low, "wm_token_acc_high": acc.high}
        for t in THRESHOLDS:
            vals = [s.to[t] for s in ss]
            reached = [v for v in vals if v is not None]
            subst = [v if v is not None else s.limit for v, s in zip(vals, ss, strict=True)]
            e = stats.bootstrap_mean_ci(subst) if all(_finite(v) for v in subst) else stats.Estimate(math.nan, math.nan, math.nan, 0)
            tag = int(t * 100)
            row[f"to{tag}_reached"] = f"{len(reached)}/{len(ss)}"
            eff_rows.append({"condition": c, "threshold": t, "n": len(ss), "reached": len(reached),
                             "mean_tasks": e.value if reached else math.nan, "ci_low": e.low if reached else math.nan,
                             "ci_high": e.high if reached else math.nan,
                             "bound": "" if len(reached) == len(ss) else (">= (censored)" if reached else "not reached"),
                             "max_tasks_seen": max((s.limit for s in ss), default=math.nan)})
        cond_rows.append(row)
    cond_df = pd.DataFrame(cond_rows)
    W.csv("conditions.csv", cond_df)
    eff_df = pd.DataFrame(eff_rows)
    W.csv("sample_efficiency.csv", eff_df)
    return cond_df, eff_df, eff_rows

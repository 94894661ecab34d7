"""The WMIL part of `lfo report` (`lfo wmil` runs): training success vs environment steps, by condition."""

from __future__ import annotations

from lfo_cli import run_record as rr
from lfo_cli import stats
from lfo_cli.report.document import Report
from lfo_cli.report.format import est, md_table, num
from lfo_cli.report.format import finite as _finite
from lfo_cli.report.load import Run, condition_order
from lfo_cli.report.run_stats import BAND_RESAMPLES, SMOOTH_WINDOW, seed_key


def wmil_section(rep: Report, runs: list[Run], varying: list[str], pd, plt) -> None:
    W = rep.writer
    conds = condition_order(runs, "wmil", varying)
    by_cond = {c: [r for r in sorted(runs, key=seed_key) if r.condition == c] for c in conds}
    rep.md.append(f"## WMIL runs (`lfo wmil`)\n\n{len(runs)} runs in {len(conds)} condition(s); conditions differ in: "
                  f"{', '.join(varying) or 'nothing'}.")
    curve_rows, table = [], []
    for c in conds:
        points: dict[float, list[float]] = {}
        finals, evals, aucs, to50, to90 = [], [], [], [], []
        limit = []
        for r in by_cond[c]:
            xy = [(float(row[rr.WMIL_ENV_STEPS]), float(row[rr.WMIL_SUCCESS])) for row in r.rows
                  if rr.WMIL_ENV_STEPS in row and rr.WMIL_SUCCESS in row]
            for x, y in xy:
                points.setdefault(x, []).append(y)
            xs, ys = [x for x, _ in xy], [y for _, y in xy]
            if xy:
                finals.append(ys[-1])
                aucs.append(stats.curve_auc(xs, ys))
                to50.append(stats.tasks_to_threshold(xs, ys, 0.5, SMOOTH_WINDOW))
                to90.append(stats.tasks_to_threshold(xs, ys, 0.9, SMOOTH_WINDOW))
                limit.append(max(xs))
            ev = (r.summary.get(rr.WMIL_EVAL) or {}).get("overall", {}) if isinstance(r.summary.get(rr.WMIL_EVAL), dict) else {}
            if _finite(ev.get("success")):
                evals.append(float(ev["success"]))
        for x in sorted(points):
            e = stats.bootstrap_mean_ci(points[x], n_resamples=BAND_RESAMPLES)
            curve_rows.append({"condition": c, "env_steps": x, "mean": e.value, "ci_low": e.low, "ci_high": e.high,
                               "n": e.n})

        def steps_to(vals, limit=limit):
            reached = [v for v in vals if v is not None]
            if not vals:
                return "n/a"
            if not reached:
                return f"not reached (0/{len(vals)})"
            if len(reached) < len(vals):
                subst = [v if v is not None else lim for v, lim in zip(vals, limit, strict=True)]
                return f">= {num(sum(subst) / len(subst))} ({len(reached)}/{len(vals)})"
            return est(stats.bootstrap_mean_ci(reached))

        table.append({"condition": c, "n": len(by_cond[c]), "eval success": est(stats.bootstrap_mean_ci(evals)),
                      "final train success": est(stats.bootstrap_mean_ci(finals)),
                      "train AUC": est(stats.bootstrap_mean_ci(aucs)),
                      "env steps to 50%": steps_to(to50), "env steps to 90%": steps_to(to90)})
    tab = pd.DataFrame(table)
    W.csv("wmil_conditions.csv", tab)
    if curve_rows:
        cur = pd.DataFrame(curve_rows)
        W.csv("wmil_curves.csv", cur)
        fig, ax = plt.subplots(figsize=(7.5, 4.2))
        for i, c in enumerate(conds):
            sub = cur[cur.condition == c]
            ax.plot(sub.env_steps, sub["mean"], color=f"C{i % 10}", label=f"{c} (n={len(by_cond[c])})")
            band = sub.dropna(subset=["ci_low", "ci_high"])
            if not band.empty:
                ax.fill_between(band.env_steps, band.ci_low, band.ci_high, color=f"C{i % 10}", alpha=0.15, linewidth=0)
        ax.set_xlabel("environment steps")
        ax.set_ylabel("training success")
        ax.set_ylim(-0.02, 1.02)
        ax.set_title("WMIL: training success vs environment steps (mean over seeds, 95% band)", fontsize=9)
        ax.legend(fontsize=6)
        fig.tight_layout()
        W.figure("wmil_curves.png", fig)
        rep.md.append("![wmil curves](wmil_curves.png)\n\nData: `wmil_curves.csv`.")
    else:
        rep.md.append(f"No WMIL run logged {rr.WMIL_SUCCESS} with {rr.WMIL_ENV_STEPS}: curves skipped.")
    rep.md.append(f"{md_table(tab)}\n\nEval success: the run's final evaluation ({rr.SUMMARY_FILE}); env steps to X%: "
                  f"first point where the trailing mean of {SMOOTH_WINDOW} logged training-success values reaches X. "
                  "Data: `wmil_conditions.csv`.")
    rep.summary["wmil"] = table


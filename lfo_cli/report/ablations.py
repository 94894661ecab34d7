"""Ablation sections of `lfo report`: the world-model loss weight lambda, and one table per other axis."""

from __future__ import annotations

from lfo_cli import run_record as rr
from lfo_cli.report.document import Report
from lfo_cli.report.format import est, md_table, num
from lfo_cli.report.format import finite as _finite
from lfo_cli.report.load import BLANK
from lfo_cli.report.run_stats import Conditions

AXES = ("wm.predict", "lora.r", "wm.schedule", "wm.coupling", "wm.intrinsic", "model.name")
AXIS_TITLES = {"wm.predict": "What the world model predicts (the design's ablation 2)", "lora.r": "LoRA rank (the design's ablation 3)",
               "wm.schedule": "Training schedule (the design's ablation 4)", "wm.coupling": "Coupling",
               "wm.intrinsic": "Intrinsic reward (the design's discarded first version)", "model.name": "Base model"}


def lambda_section(rep: Report, cs: Conditions, cond_df, pd, plt) -> None:
    W = rep.writer
    conds, role, cvals, varying = cs.conds, cs.role, cs.cvals, cs.varying
    rep.md.append("### World-model loss weight lambda (the design's ablation 1)\n")
    coefs = sorted({cvals[c].get(rr.WM_COEF) for c in conds if _finite(cvals[c].get(rr.WM_COEF))})
    if rr.WM_COEF in varying and len(coefs) >= 2:
        others = [k for k in varying if k != rr.WM_COEF]
        lam_rows = []
        for c in conds:
            row = cond_df[cond_df.condition == c].iloc[0]
            group = ", ".join(f"{k}={cvals[c].get(k)}" for k in others if not k.startswith("wm.") or role[c] == "dual")
            for m in ("final_success", "auc", "wm_token_acc"):
                lam_rows.append({"group": group or "all", rr.WM_COEF: float(cvals[c][rr.WM_COEF]), "metric": m,
                                 "mean": row[m], "ci_low": row[f"{m}_low"], "ci_high": row[f"{m}_high"], "n": row["n"]})
        lam = pd.DataFrame(lam_rows).sort_values(["group", "metric", rr.WM_COEF], kind="stable")
        W.csv("lambda.csv", lam)
        fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
        for ax, m, title in zip(axes, ("final_success", "auc", "wm_token_acc"),
                                ("final validation success", "learning-curve AUC (mean success)",
                                 "final world-model token accuracy"), strict=True):
            for i, (g, sub) in enumerate(lam[lam.metric == m].groupby("group", sort=True)):
                sub = sub.dropna(subset=["mean"])
                if sub.empty:
                    continue
                err = [(sub["mean"] - sub.ci_low).fillna(0).clip(lower=0), (sub.ci_high - sub["mean"]).fillna(0).clip(lower=0)]
                ax.errorbar(sub[rr.WM_COEF], sub["mean"], yerr=err, marker="o", capsize=3, color=f"C{i % 10}", label=g)
            ax.set_xscale("symlog", linthresh=0.1)
            ax.set_xlabel(f"{rr.WM_COEF} (lambda)")
            ax.set_title(title, fontsize=9)
        axes[0].legend(fontsize=6)
        fig.tight_layout()
        W.figure("lambda.png", fig)
        best = cond_df[cond_df.role.notna()].sort_values(["auc", "condition"], ascending=[False, True]).iloc[0]
        rep.md.append("![lambda](lambda.png)\n\nData: `lambda.csv` (mean over seeds, 95% bootstrap CI). Highest "
                      f"mean AUC: {best.condition} ({est({'value': best.auc, 'low': best.auc_low, 'high': best.auc_high, 'n': best.n})}); "
                      "compare the CIs before calling it best.")
        rep.summary["lambda"] = lam_rows
    else:
        rep.md.append(f"Skipped: fewer than two {rr.WM_COEF} values among the runs.")
        rep.notes.append(f"Lambda curve: fewer than two {rr.WM_COEF} values among the runs.")


def ablation_tables(rep: Report, cs: Conditions, cond_df, eff_df, pd) -> None:
    W = rep.writer
    conds, cvals, varying = cs.conds, cs.cvals, cs.varying
    for key in AXES:
        if key not in varying:
            continue
        rows = []
        for c in conds:
            r = cond_df[cond_df.condition == c].iloc[0]
            value = cvals[c].get(key)
            if key == "wm.predict" and value == BLANK:
                value = f"none ({rr.WM_COEF}=0)"
            eff = eff_df[(eff_df.condition == c) & (eff_df.threshold == 0.7)].iloc[0]
            rows.append({key: value, "condition": c, "n": r.n,
                         "final success": est({"value": r.final_success, "low": r.final_success_low,
                                               "high": r.final_success_high, "n": r.n}),
                         "AUC": est({"value": r.auc, "low": r.auc_low, "high": r.auc_high, "n": r.n}),
                         "tasks to 70%": (num(eff.mean_tasks) if eff.reached == eff.n else
                                          f">= {num(eff.mean_tasks)} ({eff.reached}/{eff.n})" if eff.reached else "not reached"),
                         "WM token acc": est({"value": r.wm_token_acc, "low": r.wm_token_acc_low,
                                              "high": r.wm_token_acc_high, "n": r.n})})
        df = pd.DataFrame(rows)
        df["_k"] = [str(v) for v in df[key]]
        df = df.sort_values(["_k", "condition"], kind="stable").drop(columns="_k")
        name = f"ablation_{key.replace('.', '_')}.csv"
        W.csv(name, df)
        rep.md.append(f"### {AXIS_TITLES[key]}\n\n{md_table(df)}\n\nData: `{name}` (numbers: `conditions.csv`).")

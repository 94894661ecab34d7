"""Training diagnostics in `lfo report`: reward and learning signal, world-model accuracy vs later policy learning,
gradient norms."""

from __future__ import annotations

from lfo_cli import run_record as rr
from lfo_cli import stats
from lfo_cli.report.document import Report
from lfo_cli.report.format import finite as _finite
from lfo_cli.report.format import num, pval
from lfo_cli.report.run_stats import Conditions

GRAD_KEYS = (rr.GRAD_POLICY, rr.GRAD_WM, rr.GRAD_POLICY_FROM_WM, rr.GRAD_CLIP_COEF)
SPLIT_KEYS = (rr.GRAD_POLICY_FROM_RL, rr.GRAD_WM_OVER_RL)  # the policy gradient's RL part, and WM's against it
SIGNAL_KEYS = (rr.REWARD, rr.FRAC_REWARD_ZERO_STD)  # GRPO's reward and the share of groups without reward variance
WARNING_KEYS = (rr.WARN_POLICY_DOMINATES, rr.WARN_WM_DOMINATES)


def per_step_means(cs: Conditions, keys) -> list[dict]:
    """Mean over each condition's seeds of every logged value of ``keys``, per step."""
    rows = []
    for c in cs.conds:
        acc: dict[tuple[str, float], list[float]] = {}
        for s in cs.by_cond[c]:
            for row in s.run.rows:
                for k in keys:
                    if k in row:
                        acc.setdefault((k, float(row[rr.STEP])), []).append(float(row[k]))
        for (k, step), vals in sorted(acc.items()):
            rows.append({"condition": c, "metric": k, "step": step, "mean": sum(vals) / len(vals), "n": len(vals)})
    return rows


def step_panels(rep: Report, cs: Conditions, rows: list[dict], keys, stem: str, pd, plt) -> list[str]:
    """One panel per metric with at least two logged steps (a one-point panel shows nothing), each condition a
    line; writes STEM.csv and STEM.png. Returns the metrics drawn."""
    g = pd.DataFrame(rows, columns=["condition", "metric", "step", "mean", "n"])
    drawn = [k for k in keys if (g.metric == k).any() and g[g.metric == k].step.nunique() >= 2]
    if not drawn:
        return []
    rep.writer.csv(f"{stem}.csv", g)
    fig, axes = plt.subplots(1, len(drawn), figsize=(3.6 * len(drawn) + 1, 3.6), squeeze=False)
    for ax, k in zip(axes[0], drawn, strict=True):
        for i, c in enumerate(cs.conds):
            sub = g[(g.condition == c) & (g.metric == k)]
            if not sub.empty:
                ax.plot(sub.step, sub["mean"], color=f"C{i % 10}", label=c, linewidth=1)
        ax.set_title(k, fontsize=9)
        ax.set_xlabel("step")
    axes[0][0].legend(fontsize=6)
    fig.tight_layout()
    rep.writer.figure(f"{stem}.png", fig)
    return drawn


def reward_section(rep: Report, cs: Conditions, pd, plt) -> None:
    """Mean reward and the share of groups with no reward variance (whose advantages, and so policy
    gradient, are zero), per step."""
    rep.md.append("### Reward and learning signal\n")
    drawn = step_panels(rep, cs, per_step_means(cs, SIGNAL_KEYS), SIGNAL_KEYS, "reward", pd, plt)
    if not drawn:
        rep.md.append("Skipped: fewer than two logged steps of reward.")
        return
    rep.md.append("![reward](reward.png)\n\nMean over seeds per step: the reward, and the share of prompt groups whose "
                  "rollouts all got the same reward (GRPO's advantage, and the policy gradient, are zero there). "
                  "Data `reward.csv`.")


def correlation_section(rep: Report, cs: Conditions, corr_window: int | None, pd, plt) -> None:
    W = rep.writer
    conds, by_cond, role = cs.conds, cs.by_cond, cs.role
    rep.md.append("### World-model accuracy vs subsequent policy learning (the design's correlation analysis)\n")
    dual_runs = [s for c in conds if role[c] == "dual" for s in by_cond[c]]
    max_steps = [max((row[rr.STEP] for row in s.run.rows), default=0) for s in dual_runs]
    window = corr_window or (min(50, max(1, int(sorted(max_steps)[len(max_steps) // 2] // 5))) if max_steps else 50)
    pts = []
    for s in dual_runs:
        wm = [(float(r[rr.STEP]), float(r[rr.WM_TOKEN_ACC])) for r in s.run.rows if rr.WM_TOKEN_ACC in r]
        for step, acc, slope in stats.learning_rate_windows(s.curve, wm, window):
            pts.append({"run": s.run.name, "condition": s.run.condition, "step": step, "wm_token_acc": acc,
                        "success_per_1000_tasks": slope * 1000})
    corr = stats.pearson_with_ci([p["wm_token_acc"] for p in pts], [p["success_per_1000_tasks"] for p in pts])
    rep.summary["correlation"] = {"window_steps": window, **corr.as_dict()}
    if pts:
        pts_df = pd.DataFrame(pts).sort_values(["run", "step"], kind="stable")
        W.csv("wm_vs_learning_rate.csv", pts_df)
        fig, ax = plt.subplots(figsize=(6, 4.2))
        for i, (c, sub) in enumerate(pts_df.groupby("condition", sort=True)):
            ax.scatter(sub.wm_token_acc, sub.success_per_1000_tasks, s=14, color=f"C{i % 10}", label=c)
        ax.set_xlabel(f"WM token accuracy (mean over the {window} steps up to N)")
        ax.set_ylabel(f"Δ val success per 1000 tasks (next >= {window} steps)")
        ax.set_title(f"Pearson r = {num(corr.r)} [{num(corr.low)}, {num(corr.high)}], n = {corr.n}", fontsize=9)
        ax.legend(fontsize=6)
        fig.tight_layout()
        W.figure("wm_vs_learning_rate.png", fig)
        rep.md.append("![wm vs learning rate](wm_vs_learning_rate.png)\n")
    if corr.n >= 4 and _finite(corr.r):
        rep.md.append(f"Pearson r = {num(corr.r)}, 95% CI [{num(corr.low)}, {num(corr.high)}], p = {pval(corr.p)}, "
                      f"n = {corr.n} (step, run) points from {len(dual_runs)} dual-LoRA runs, window {window} steps. "
                      "Points from one run are not independent, so this CI is optimistic. Data: `wm_vs_learning_rate.csv`.")
    else:
        msg = (f"Insufficient data: {corr.n} (step, run) point(s) with both a world-model accuracy and a later "
               f"evaluation >= {window} steps on (need 4 and non-constant values; try --corr-window).")
        rep.md.append(msg)
        rep.notes.append("Correlation: " + msg)


def grad_norm_section(rep: Report, cs: Conditions, pd, plt) -> None:
    conds, by_cond = cs.conds, cs.by_cond
    rep.md.append("### Gradient norms per adapter\n")
    g_rows = per_step_means(cs, GRAD_KEYS)
    drawn = step_panels(rep, cs, g_rows, GRAD_KEYS, "grad_norms", pd, plt) if g_rows else []
    if drawn:
        g = pd.DataFrame(g_rows)
        pf = g[g.metric == rr.GRAD_POLICY_FROM_WM]
        lines = []
        for c in conds:
            sub = pf[pf.condition == c]
            if not sub.empty:
                line = (f"- {c}: mean {rr.GRAD_POLICY_FROM_WM} {num(float(sub['mean'].mean()))} "
                        f"(max {num(float(sub['mean'].max()))}) over {len(sub)} logged steps")
                if by_cond[c][0].run.role == "dual" and float(sub["mean"].abs().max()) == 0.0:
                    line += (": exactly 0 at every probe, so this arm's world-model loss has no gradient path "
                             "into the policy; it can reach the policy only through global gradient clipping "
                             "and the random stream, and a difference from the baseline is not evidence that "
                             "predicting replies helps")
                lines.append(line)
        warn = [(c, k, float(sum(float(row[k]) for s in by_cond[c] for row in s.run.rows if k in row)))
                for c in conds for k in WARNING_KEYS]
        warn = [w for w in warn if w[2] > 0]
        rep.md.append("![grad norms](grad_norms.png)\n\nMean over seeds per step, before the global clip; "
                      f"`{rr.GRAD_CLIP_COEF}` is the factor the clip scaled both adapters by (1 = not clipped). "
                      "Data `grad_norms.csv`.\n\n" + "\n".join(lines))
        if warn:
            rep.md.append("The design's warning rule (policy/WM gradient ratio > 10x either way) fired: " +
                          "; ".join(f"{c}: {k.split('/')[-1]} {num(n)} times" for c, k, n in warn) + ".")
    else:
        rep.md.append(f"Skipped: no run logged two or more steps of {rr.GRAD_POLICY}, {rr.GRAD_WM} or "
                      f"{rr.GRAD_POLICY_FROM_WM}.")
        rep.notes.append("Gradient norms: not logged by any run.")
    if any(SPLIT_KEYS[1] in row for s in cs.rs.values() for row in s.run.rows):
        split_section(rep, cs, pd, plt)


def split_section(rep: Report, cs: Conditions, pd, plt) -> None:
    """How much world-model gradient the policy gets against RL's (runs that log ``grad_norm/wm_over_rl``)."""
    import statistics

    rep.md.append("### The policy's gradient: world model against RL\n")
    drawn = step_panels(rep, cs, per_step_means(cs, SPLIT_KEYS), SPLIT_KEYS, "wm_over_rl", pd, plt)
    lines = []
    for c in cs.conds:
        values = [float(row[SPLIT_KEYS[1]]) for s in cs.by_cond[c] for row in s.run.rows if SPLIT_KEYS[1] in row]
        if values:
            lines.append(f"- {c}: median {num(statistics.median(values))} (range {num(min(values))}-{num(max(values))}) "
                         f"over {len(values)} probed steps")
    figure = "![wm over rl](wm_over_rl.png)\n\n" if drawn else ""
    rep.md.append(figure + f"`{rr.GRAD_WM_OVER_RL}`: the world-model term's gradient into the policy adapter over the "
                  "RL part of the policy's gradient (the whole pre-clip gradient minus the world-model part), on "
                  "probed steps where some group had reward variance. Above 1 the world model, not RL, steers the "
                  "policy. Data `wm_over_rl.csv`.\n\n" + "\n".join(lines))

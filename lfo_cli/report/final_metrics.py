"""Final-evaluation sections of `lfo report`: metrics by condition (success by difficulty, behaviour)
and transfer to the world's held-out tasks, with the paired dual - baseline test."""

from __future__ import annotations

from lfo_cli import run_record as rr
from lfo_cli import stats
from lfo_cli.errors import LfoError
from lfo_cli.report import verdict
from lfo_cli.report.document import Report
from lfo_cli.report.efficiency import verdict_words
from lfo_cli.report.format import est, md_table, num
from lfo_cli.report.format import finite as _finite
from lfo_cli.report.load import LATER_DEFAULTS
from lfo_cli.worlds.base import World
from lfo_cli.worlds.registry import world_class


def final_metric_section(rep: Report, conds, by_cond, keys, stem, title, pd, plt, label) -> None:
    rep.md.append(f"### {title}\n")
    if not keys:
        rep.md.append("Skipped: no run logged these metrics.")
        rep.notes.append(f"{title}: not logged by any run.")
        return
    rows = []
    for c in conds:
        for k in keys:
            e = stats.bootstrap_mean_ci([s.final.get(k) for s in by_cond[c]])
            rows.append({"condition": c, "metric": k, "mean": e.value, "ci_low": e.low, "ci_high": e.high, "n": e.n})
    df = pd.DataFrame(rows)
    rep.writer.csv(f"{stem}.csv", df)
    n = len(keys)
    fig, axes = plt.subplots(1, n, figsize=(max(4.0, 2.6 * n), 3.6), squeeze=False)
    for ax, k in zip(axes[0], keys, strict=True):
        sub = df[df.metric == k].reset_index(drop=True)
        for i, r in sub.iterrows():
            lo = max(r["mean"] - r.ci_low, 0) if _finite(r.ci_low) else 0
            hi = max(r.ci_high - r["mean"], 0) if _finite(r.ci_high) else 0
            ax.bar([i], [r["mean"] if _finite(r["mean"]) else 0], yerr=[[lo], [hi]], capsize=3,
                   color=f"C{i % 10}", label=r.condition)
        ax.set_xticks([])
        ax.set_title(label(k), fontsize=9)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 3), fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.06 + 0.04 * ((len(labels) - 1) // 3), 1, 1))
    rep.writer.figure(f"{stem}.png", fig)
    wide = df.assign(cell=[est({"value": r["mean"], "low": r.ci_low, "high": r.ci_high, "n": r.n}) for _, r in df.iterrows()])
    wide = wide.pivot(index="condition", columns="metric", values="cell").reindex(conds).reset_index()
    wide.columns = ["condition", *[label(k) for k in wide.columns[1:]]]
    rep.md.append(f"![{stem}]({stem}.png)\n\n{md_table(wide)}\n\nMean over seeds [95% bootstrap CI]; data `{stem}.csv`.")


def world_of(runs) -> type[World]:
    """The runs' world (`env.kind`); the interface's defaults when the runs come from several worlds or the
    world's package is not installed."""
    kinds = {r.config.get("env.kind", LATER_DEFAULTS["env.kind"]) for r in runs}
    if len(kinds) == 1:
        try:
            return world_class(kinds.pop())
        except LfoError:
            pass
    return World


def heldout_words(runs) -> tuple[str, str, str]:
    """(label, what, note) for the runs' held-out split, from their world."""
    w = world_of(runs)
    return w.heldout_label, w.heldout_what, w.heldout_note


def has_difficulty_levels(runs) -> bool:
    """False for a world whose tasks have one level: a per-difficulty table would repeat the overall success."""
    return world_of(runs).difficulty_levels


def transfer_section(rep: Report, conds, by_cond, role, pairs, pd, plt) -> None:
    world = world_of([s.run for c in conds for s in by_cond[c]])
    label, what, note, levels = world.heldout_label, world.heldout_what, world.heldout_note, world.difficulty_levels
    rep.md.append(f"### Transfer to {label}\n")
    rows = []
    for c in conds:
        splits = sorted({k for s in by_cond[c] for k in s.run.transfer if levels or not k.startswith("transfer/d")})
        for sp in splits:
            vals = [s.run.transfer[sp]["success"] for s in by_cond[c] if sp in s.run.transfer]
            eps = [s.run.transfer[sp].get("n") for s in by_cond[c] if sp in s.run.transfer]
            e = stats.bootstrap_mean_ci(vals)
            rows.append({"condition": c, "split": sp, "mean": e.value, "ci_low": e.low, "ci_high": e.high, "n": e.n,
                         "episodes": sum(x for x in eps if isinstance(x, int)) if all(isinstance(x, int) for x in eps)
                         else None})
    if not rows:
        msg = (f"No transfer evaluation (RUN/{rr.EVALS_DIR}/{rr.TRANSFER_EVAL_STEM}-*.json) in any training run: "
               "transfer was not measured (run `lfo transfer-eval RUN_DIR`).")
        rep.md.append(msg)
        rep.notes.append(msg)
        rep.summary["transfer"] = None
        return
    df = pd.DataFrame(rows)
    rep.writer.csv("transfer.csv", df)
    splits = sorted(df.split.unique())
    fig, ax = plt.subplots(figsize=(7, 3.8))
    width = 0.8 / max(len(splits), 1)
    for j, sp in enumerate(splits):
        sub = df[df.split == sp].set_index("condition").reindex(conds)
        err = [(sub["mean"] - sub.ci_low).fillna(0).clip(lower=0), (sub.ci_high - sub["mean"]).fillna(0).clip(lower=0)]
        ax.bar([i + j * width for i in range(len(conds))], sub["mean"].fillna(0), width=width, yerr=err, capsize=3,
               label=sp)
    ax.set_xticks([i + width * (len(splits) - 1) / 2 for i in range(len(conds))])
    ax.set_xticklabels(conds, fontsize=6, rotation=12, ha="right")
    ax.set_ylabel("success")
    ax.set_ylim(0, 1.05)
    ax.set_title("Success by split: mean over seeds, 95% bootstrap CI", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    rep.writer.figure("transfer.png", fig)
    def cell(r) -> str:
        eps = "" if r.episodes is None or r.episodes != r.episodes else f", {int(r.episodes)} episodes"
        return est({"value": r["mean"], "low": r.ci_low, "high": r.ci_high, "n": r.n}) + eps

    wide = df.assign(cell=[cell(r) for _, r in df.iterrows()])
    wide = wide.pivot(index="condition", columns="split", values="cell").reindex(conds).fillna("not measured").reset_index()
    held = "transfer" if "transfer" in splits else None
    if held is None:  # a check on the training distribution's tasks is not transfer: never shown as if it were
        msg = (f"Transfer to {label} was not measured: the evaluations found cover only "
               f"{', '.join(splits)} (what the policy trained on). The table shows them; it is not transfer.")
        rep.md.append(msg)
        rep.notes.append(msg)
    inrun = any(s.run.transfer.get(sp, {}).get("source") == "in-run" for c in conds for s in by_cond[c] for sp in splits)
    if inrun:
        rep.md.append(f"{label[0].upper()}{label[1:]} ({what}) as evaluated inside each run at its last step "
                      "(`eval.heldout_tasks`), where no `lfo transfer-eval` file covers them"
                      + ("; `transfer/dK` is difficulty K." if levels else ".") + note)
    rep.md.append(f"![transfer](transfer.png)\n\n{md_table(wide)}\n\nMean success over seeds [95% bootstrap CI] "
                  "(n = seeds; episodes summed over them); data `transfer.csv`.")
    tests, diffs, lines = [], {}, []
    if held:
        for b, d in pairs:
            pb = {s.run.seed: s.run.transfer.get(held, {}).get("success") for s in by_cond[b]}
            pdd = {s.run.seed: s.run.transfer.get(held, {}).get("success") for s in by_cond[d]}
            common = [k for k in sorted(set(pb) & set(pdd), key=str) if _finite(pb[k]) and _finite(pdd[k])]
            res = stats.paired_test([pdd[k] for k in common], [pb[k] for k in common])
            tests.append({"baseline": b, "dual": d, **res.as_dict()})
            diffs[(b, d)] = [pdd[k] - pb[k] for k in common]
            lines.append((b, d, res))
        verdicts = verdict.family(diffs)  # the one rule: Holm over this section's comparisons
        for b, d, res in lines:
            if res.n >= 2 and _finite(res.diff_low):
                words = verdict_words(verdicts[(b, d)], "dual-LoRA transfers better", "dual-LoRA transfers worse")
                rep.md.append(f"Held-out success, dual - baseline ({d} vs {b}): {num(res.mean_diff)} [95% CI "
                              f"{num(res.diff_low)}, {num(res.diff_high)}], {res.n} paired seeds: {words}.")
            elif res.n == 0:
                rep.md.append(f"Held-out success, {d} vs {b}: no seed has transfer results for both.")
            else:
                rep.md.append(f"Held-out success, {d} vs {b}: insufficient paired seeds (n = {res.n}).")
    rep.summary["transfer"] = {"by_condition": rows, "paired_tests": tests}


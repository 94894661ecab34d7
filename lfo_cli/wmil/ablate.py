"""`lfo wmil ablate`: does the world-model head help? Paired seeds, CIs and paired tests.

Conditions (each trained from scratch for every seed; a seed is shared across conditions, so
runs are paired):

- ``wm``          REINFORCE/PPO + world-model loss (``wm_coef`` = 1.0 unless the base config says otherwise)
- ``no_wm``       RL only (``wm_coef`` = 0)
- ``kl_distill``  RL + KL(parent || baby) to the parent's action (``kl_coef`` = 1, ``wm_coef`` = 0): the
                  distillation baseline the design contrasts WMIL with
- ``reactive``    ``wm`` with ``context_window`` = 1 (the policy sees only the current step)
- ``random``      the uniform policy, evaluated (no training)

Per run: final evaluation success (sampled policy, 1,024 fresh episodes at the trained level) and
``train_auc`` (mean training success over the whole run; sensitive to learning speed). Per
condition: mean, std and a bootstrap 95% CI of the mean (``scipy.stats.bootstrap``); against
``wm``: the paired difference, a Wilcoxon signed-rank test and a paired t-test (``scipy.stats``).
Writes ``runs.csv``, ``summary.csv``, ``tests.csv``, ``ablation.json`` and ``ablation.png``.
Finished runs are reused (the study resumes); ``--force`` recomputes them.
"""

from __future__ import annotations

import math
from pathlib import Path

from lfo_cli import run_record as rr
from lfo_cli.errors import LfoError
from lfo_cli.io import atomic_write_json, atomic_write_text, read_json
from lfo_cli.wmil.config import WMILConfig
from lfo_cli.wmil.envs import make_task
from lfo_cli.wmil.evaluate import evaluate_level
from lfo_cli.wmil.show import print_table
from lfo_cli.wmil.trainer import initial_level, train

CONDITIONS = {
    "wm": {},
    "no_wm": {"wm_coef": 0.0},
    "kl_distill": {"wm_coef": 0.0, "kl_coef": 1.0},
    "reactive": {"context_window": 1},
    "random": None,
}
METRICS = ("eval_success", "train_auc")


def _run_one(base: dict, condition: str, seed: int, out: Path, force: bool) -> dict:
    cfg = WMILConfig.from_dict({**base, "seed": seed, **(CONDITIONS[condition] or {})})
    task = make_task(cfg.task, cfg.num_actions)
    level = initial_level(cfg, task)
    if CONDITIONS[condition] is None:
        res = evaluate_level(None, task, level, cfg.eval_episodes, seed)
        return {"condition": condition, "seed": seed, "eval_success": res["success"], "train_auc": res["success"],
                "final_train_success": res["success"], "wm_mse": None, "first_step_gt_0.5": None}
    run_dir = out / condition / f"seed_{seed}"
    summary_path = run_dir / rr.SUMMARY_FILE
    if summary_path.is_file() and not force and read_json(run_dir / rr.WMIL_CONFIG_FILE) == cfg.to_dict():
        summary = read_json(summary_path)
    else:
        summary = train(cfg, run_dir, force=True, progress=False, quiet=True)
    rows_level = summary[rr.WMIL_EVAL]["per_level"][level]
    import pandas as pd

    df = pd.read_csv(run_dir / "metrics.csv")
    return {"condition": condition, "seed": seed, "eval_success": rows_level["success"],
            "train_auc": float(df[rr.WMIL_SUCCESS].mean()), "final_train_success": summary["final"][rr.WMIL_SUCCESS],
            "wm_mse": rows_level.get("wm_mse"), "first_step_gt_0.5": summary["checks"]["first_step_success_gt_0.5"]}


def _ci(values) -> tuple[float, float]:
    import numpy as np
    from scipy import stats

    v = np.asarray(values, dtype=float)
    if len(v) < 2 or np.allclose(v, v[0]):
        return float(v.mean()), float(v.mean())
    res = stats.bootstrap((v,), np.mean, confidence_level=0.95, n_resamples=9999, method="percentile",
                          random_state=0)
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def _paired(a, b) -> dict:
    import numpy as np
    from scipy import stats

    d = np.asarray(a, float) - np.asarray(b, float)
    out = {"mean_diff": float(d.mean()), "diff_ci_low": _ci(d)[0], "diff_ci_high": _ci(d)[1],
           "wilcoxon_p": None, "ttest_p": None, "wins": int((d > 0).sum()), "losses": int((d < 0).sum())}
    if np.allclose(d, 0):
        return out
    try:
        out["wilcoxon_p"] = float(stats.wilcoxon(a, b).pvalue)
    except ValueError:
        pass
    if len(d) > 1 and d.std() > 0:
        p = float(stats.ttest_rel(a, b).pvalue)
        out["ttest_p"] = p if math.isfinite(p) else None
    return out


def run_ablation(base: dict, out: Path, *, seeds: int = 8, first_seed: int = 0, conditions=None,
                 force: bool = False, show: bool = True) -> dict:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd
    from rich.progress import Progress

    conditions = conditions or ["wm", "no_wm", "kl_distill", "random"]
    unknown = [c for c in conditions if c not in CONDITIONS]
    if unknown:
        raise LfoError(f"unknown condition(s) {', '.join(unknown)} (known: {', '.join(CONDITIONS)})")
    if seeds < 2:
        raise LfoError("--seeds must be >= 2 (a paired test needs pairs)")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    seed_list = list(range(first_seed, first_seed + seeds))
    records = []
    with Progress(disable=not show) as bar:
        job = bar.add_task(f"ablate {base.get('task', 'pattern_echo')}", total=len(conditions) * seeds)
        for seed in seed_list:  # seed-major: a partial study still has complete pairs
            for cond in conditions:
                records.append(_run_one(base, cond, seed, out, force))
                bar.advance(job)
    runs = pd.DataFrame(records)
    atomic_write_text(out / "runs.csv", runs.to_csv(index=False))

    summary_rows = []
    for cond in conditions:
        sub = runs[runs.condition == cond]
        for metric in METRICS:
            lo, hi = _ci(sub[metric])
            summary_rows.append({"condition": cond, "metric": metric, "n": len(sub), "mean": float(sub[metric].mean()),
                                 "std": float(sub[metric].std(ddof=1)), "ci95_low": lo, "ci95_high": hi})
    summary = pd.DataFrame(summary_rows)
    atomic_write_text(out / "summary.csv", summary.to_csv(index=False))
    tests = []
    if "wm" in conditions:
        wm = runs[runs.condition == "wm"].sort_values("seed")
        for cond in conditions:
            if cond == "wm":
                continue
            other = runs[runs.condition == cond].sort_values("seed")
            for metric in METRICS:
                tests.append({"comparison": f"wm - {cond}", "metric": metric,
                              **_paired(wm[metric].to_numpy(), other[metric].to_numpy())})
    tests_df = pd.DataFrame(tests)
    atomic_write_text(out / "tests.csv", tests_df.to_csv(index=False))

    fig, axes = plt.subplots(1, len(METRICS), figsize=(5 * len(METRICS), 3.6))
    for ax, metric in zip(axes, METRICS, strict=True):
        s = summary[summary.metric == metric]
        err = [s["mean"] - s["ci95_low"], s["ci95_high"] - s["mean"]]
        ax.bar(s["condition"], s["mean"], yerr=err, capsize=4, color="#8fb3d9")
        for i, cond in enumerate(s["condition"]):
            ys = runs[runs.condition == cond][metric]
            ax.scatter([i] * len(ys), ys, color="k", s=10, zorder=3)
        ax.set_ylim(0, 1.05)
        ax.set_title(f"{base.get('task', 'pattern_echo')}: {metric} (mean, 95% bootstrap CI, seeds)")
    fig.tight_layout()
    fig.savefig(out / "ablation.png", dpi=110)
    plt.close(fig)

    result = {"task": base.get("task", "pattern_echo"), "base_config": base, "seeds": seed_list,
              "conditions": conditions, "summary": summary_rows, "tests": tests,
              "outputs": ["runs.csv", "summary.csv", "tests.csv", "ablation.json", "ablation.png"]}
    atomic_write_json(out / "ablation.json", result)
    if show:
        print_table(f"WMIL ablation: {result['task']}, seeds {seed_list[0]}..{seed_list[-1]}",
                    ("condition", "metric", "mean", "std", "95% CI"),
                    [(r["condition"], r["metric"], f"{r['mean']:.3f}", f"{r['std']:.3f}",
                      f"[{r['ci95_low']:.3f}, {r['ci95_high']:.3f}]") for r in summary_rows])
        if tests:
            fmt = lambda v: "-" if v is None else f"{v:.3g}"  # noqa: E731
            print_table("paired across seeds (wm minus other)",
                        ("comparison", "metric", "mean diff", "95% CI", "wins/losses", "Wilcoxon p", "t-test p"),
                        [(r["comparison"], r["metric"], f"{r['mean_diff']:+.3f}",
                          f"[{r['diff_ci_low']:+.3f}, {r['diff_ci_high']:+.3f}]", f"{r['wins']}/{r['losses']}",
                          fmt(r["wilcoxon_p"]), fmt(r["ttest_p"])) for r in tests])
        print(f"wrote {out}/runs.csv, summary.csv, tests.csv, ablation.json, ablation.png")
    return result

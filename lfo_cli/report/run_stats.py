"""Per-run quantities of training runs for `lfo report`, and the runs grouped by condition.

A run's validation curve (tasks seen vs ``val/success``), its final validation metrics, the AUC of the
curve and the tasks seen until it first reaches each threshold (smoothed; ``None`` when never reached).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from lfo_cli import run_record as rr
from lfo_cli import stats
from lfo_cli.report.load import Run, condition_order, condition_values

THRESHOLDS = (0.5, 0.7, 0.9)
SMOOTH_WINDOW = 3  # evaluations in the trailing mean behind tasks-to-threshold (stats.smooth)
BAND_RESAMPLES = 1999  # bootstrap resamples per learning-curve point (bands only; tables use 9,999)


def mean_band(curves) -> list[dict]:
    """Pool ``curves`` (an iterable of (xs, ys), one per seed) by x: at each x the mean over seeds with a
    percentile-bootstrap band (``BAND_RESAMPLES``), as rows {tasks_seen, mean, ci_low, ci_high, n} sorted by x;
    non-finite values are left out."""
    points: dict[float, list[float]] = {}
    for xs, ys in curves:
        for x, y in zip(xs, ys, strict=True):
            if y is not None and math.isfinite(y):
                points.setdefault(x, []).append(y)
    out = []
    for x in sorted(points):
        e = stats.bootstrap_mean_ci(points[x], n_resamples=BAND_RESAMPLES)
        out.append({"tasks_seen": x, "mean": e.value, "ci_low": e.low, "ci_high": e.high, "n": e.n})
    return out


def draw_band(ax, sub, color: str, label: str, dashed: bool, alpha: float = 0.12) -> None:
    """One group's mean line and its band (where a point has one) from rows of :func:`mean_band`."""
    ax.plot(sub.tasks_seen, sub["mean"], marker="o", ms=3, color=color, label=label, linestyle="--" if dashed else "-")
    band = sub.dropna(subset=["ci_low", "ci_high"])
    if not band.empty:
        ax.fill_between(band.tasks_seen, band.ci_low, band.ci_high, color=color, alpha=alpha, linewidth=0)


@dataclass
class RunStats:
    run: Run
    curve: list[tuple[float, float, float]]  # (step, tasks_seen, val/success), sorted
    final: dict[str, float]  # the last validation row's val/* metrics
    auc: float | None
    to: dict[float, float | None]  # threshold -> tasks_seen or None (not reached)
    limit: float  # last evaluated tasks_seen (the censoring point)
    wm_acc_final: float | None
    extra: dict[str, Any] = field(default_factory=dict)


def run_stats(run: Run) -> RunStats:
    curve = sorted((float(r[rr.STEP]), float(r[rr.TASKS_SEEN]), float(r[rr.VAL_SUCCESS])) for r in run.rows
                   if rr.VAL_SUCCESS in r and rr.TASKS_SEEN in r)
    val_rows = [r for r in run.rows if rr.VAL_SUCCESS in r]
    final = {k: v for k, v in (val_rows[-1] if val_rows else {}).items() if k.startswith(rr.VAL_PREFIX)}
    xs, ys = [c[1] for c in curve], [c[2] for c in curve]
    wm = [r[rr.WM_TOKEN_ACC] for r in run.rows if rr.WM_TOKEN_ACC in r]
    return RunStats(
        run=run, curve=curve, final=final, auc=stats.curve_auc(xs, ys) if curve else None,
        to={t: stats.tasks_to_threshold(xs, ys, t, window=SMOOTH_WINDOW) for t in THRESHOLDS},
        limit=max(xs) if xs else math.nan, wm_acc_final=wm[-1] if wm else None,
    )


def seed_key(r: Run):
    return (r.seed if isinstance(r.seed, int) else -1, r.name)

@dataclass
class Conditions:
    """Training runs grouped by condition, each condition's runs in seed order: what the training sections read."""

    varying: list[str]  # the config keys the conditions differ in
    conds: list[str]  # in report order
    rs: dict[str, RunStats]  # by run name
    by_cond: dict[str, list[RunStats]]
    role: dict[str, str]  # condition -> "baseline" / "dual" / ...
    cvals: dict[str, dict]  # condition -> its config values


def group_conditions(train: list[Run], varying: list[str]) -> Conditions:
    conds = condition_order(train, "grpo", varying)
    rs = {r.name: run_stats(r) for r in train}
    by_cond = {c: [rs[r.name] for r in sorted(train, key=seed_key) if r.condition == c] for c in conds}
    role = {c: by_cond[c][0].run.role for c in conds}
    cvals = {c: condition_values(train, c) for c in conds}
    return Conditions(varying, conds, rs, by_cond, role, cvals)

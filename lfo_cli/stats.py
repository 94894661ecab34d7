"""Statistics for the study: intervals, tasks-to-threshold, bootstrap CIs, paired tests, correlation.

Pure functions on plain sequences (numpy/scipy only, no run-dir knowledge), so each one is tested on
hand-made data. Conventions:

- Every confidence level defaults to 95%.
- Bootstrap CIs use :func:`scipy.stats.bootstrap` (percentile method, 9,999 resamples, a fixed
  ``seed``): deterministic for the same input, so a report re-run gives the same bytes. The
  percentile method is used rather than BCa because studies have 3-5 seeds per condition, where
  BCa's jackknife acceleration is unstable (and undefined for two identical values).
- "Not enough data" is a result, not an exception: functions return ``None``/``nan`` fields and an
  ``n`` so a report can say "insufficient runs" instead of printing a made-up interval.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

CONFIDENCE = 0.95
N_RESAMPLES = 9999


# ---------------------------------------------------------------------------------------------
# Success rates
# ---------------------------------------------------------------------------------------------
def wilson_interval(successes: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Wilson score interval for a binomial success rate (``scipy.stats.binomtest(...).proportion_ci``).

    Unlike the normal approximation it stays inside [0, 1] and is sensible at 0/n and n/n.
    ``n == 0`` has no interval: returns ``(nan, nan)``.
    """
    from scipy import stats

    successes, n = int(successes), int(n)
    if n < 0 or not 0 <= successes <= max(n, 0):
        raise ValueError(f"need 0 <= successes <= n, got successes={successes}, n={n}")
    if n == 0:
        return (math.nan, math.nan)
    ci = stats.binomtest(successes, n).proportion_ci(confidence_level=confidence, method="wilson")
    return (float(ci.low), float(ci.high))


# ---------------------------------------------------------------------------------------------
# Tasks to threshold (the x-axis of the sample-efficiency claim)
# ---------------------------------------------------------------------------------------------
def smooth(values: Sequence[float], window: int = 3) -> np.ndarray:
    """Trailing moving average: point i is the mean of the last ``window`` points up to i.

    The first points average what exists (point 0 is itself), so a run that starts above a threshold
    reaches it at its first evaluation. Trailing (not centred), so the smoothed curve at i uses no
    evaluation made after i: "reached at tasks_seen x" never looks into the future.
    """
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return v
    csum = np.cumsum(np.insert(v, 0, 0.0))
    idx = np.arange(1, v.size + 1)
    lo = np.maximum(idx - window, 0)
    return (csum[idx] - csum[lo]) / (idx - lo)


def tasks_to_threshold(
    tasks_seen: Sequence[float], success: Sequence[float], threshold: float, window: int = 3
) -> float | None:
    """First ``tasks_seen`` at which the smoothed success curve reaches ``threshold`` (>=), else None.

    ``tasks_seen``/``success`` are one run's validation evaluations (any order; sorted here). The
    curve is smoothed with :func:`smooth` (trailing mean of the last ``window`` evaluations) so one
    lucky evaluation does not count as reaching the threshold. ``None`` means "not reached within
    this run" (right-censored at the run's last ``tasks_seen``), never 0 or infinity.
    """
    x = np.asarray(tasks_seen, dtype=float)
    y = np.asarray(success, dtype=float)
    if x.shape != y.shape:
        raise ValueError(f"tasks_seen and success differ in length ({x.size} vs {y.size})")
    if x.size == 0:
        return None
    order = np.argsort(x, kind="stable")
    x, y = x[order], y[order]
    s = smooth(y, window)
    hit = np.nonzero(s >= threshold - 1e-12)[0]
    return float(x[hit[0]]) if hit.size else None


def curve_auc(tasks_seen: Sequence[float], success: Sequence[float]) -> float | None:
    """Mean success over the run, area under the curve / x-range (trapezoid). Censoring-free.

    A learning-speed summary that needs no threshold: a run that learns earlier has a higher AUC
    even when neither run reaches 70%. One point: its value. No points: None.
    """
    x = np.asarray(tasks_seen, dtype=float)
    y = np.asarray(success, dtype=float)
    if x.size == 0:
        return None
    order = np.argsort(x, kind="stable")
    x, y = x[order], y[order]
    if x.size == 1 or x[-1] == x[0]:
        return float(y.mean())
    return float(np.trapezoid(y, x) / (x[-1] - x[0]))


class Record:
    """A result dataclass whose ``as_dict`` is its fields (what JSON summaries and CSV rows take)."""

    def as_dict(self) -> dict:
        return asdict(self)


# ---------------------------------------------------------------------------------------------
# Bootstrap
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Estimate(Record):
    """A point estimate with its CI; ``low``/``high`` are nan when there is no interval (n < 2)."""

    value: float
    low: float
    high: float
    n: int


def bootstrap_ci(data: tuple, statistic, confidence: float, n_resamples: int, seed: int) -> tuple[float, float]:
    from scipy import stats

    with warnings.catch_warnings():
        # Degenerate resamples (all values equal) are handled by the callers; scipy's warning is noise.
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", getattr(stats, "DegenerateDataWarning", RuntimeWarning))
        res = stats.bootstrap(
            data, statistic, n_resamples=n_resamples, confidence_level=confidence, method="percentile",
            vectorized=True, paired=False, rng=np.random.default_rng(seed),
        )
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def _mean(x, axis=-1):
    return np.mean(x, axis=axis)


def bootstrap_mean_ci(
    values: Sequence[float], confidence: float = CONFIDENCE, n_resamples: int = N_RESAMPLES, seed: int = 0
) -> Estimate:
    """Mean of ``values`` (e.g. one metric over a condition's seeds) with a percentile-bootstrap CI.

    n == 0: all nan. n == 1: the value, no interval (nan). All values equal: a zero-width interval
    (every resample has the same mean; not a claim of certainty beyond the data).
    """
    v = np.asarray([x for x in values if x is not None], dtype=float)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return Estimate(math.nan, math.nan, math.nan, 0)
    mean = float(v.mean())
    if v.size == 1:
        return Estimate(mean, math.nan, math.nan, 1)
    if np.all(v == v[0]):
        return Estimate(mean, mean, mean, int(v.size))
    lo, hi = bootstrap_ci((v,), _mean, confidence, n_resamples, seed)
    return Estimate(mean, lo, hi, int(v.size))


def _ratio_of_means(a, b, axis=-1):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.mean(a, axis=axis) / np.mean(b, axis=axis)


@dataclass(frozen=True)
class RatioResult(Record):
    """mean(numerator) / mean(denominator) over two independent groups of runs, with its CI.

    ``kind`` says how to read it:

    - ``estimate``: every run of both groups reached the threshold; ratio and CI as computed.
    - ``lower_bound``: some numerator runs never reached it; their value was replaced by the run's
      last tasks_seen (a lower bound on when they would), so the true ratio is >= ``value``.
    - ``upper_bound``: some denominator runs never reached it (same substitution): true ratio <= value.
    - ``undetermined``: censored runs in both groups; the direction of the bias is unknown.
    - ``not_reached``: no run of one group reached it at all.
    - ``insufficient``: fewer than 2 runs in a group (no interval) or a zero denominator.
    """

    value: float
    low: float
    high: float
    kind: str
    n_num: int
    n_den: int
    reached_num: int
    reached_den: int
    note: str = ""


def bootstrap_ratio_ci(
    numerator: Sequence[float], denominator: Sequence[float], confidence: float = CONFIDENCE,
    n_resamples: int = N_RESAMPLES, seed: int = 0,
) -> tuple[float, float, float]:
    """Ratio of means of two independent groups, with a percentile-bootstrap CI.

    The groups are resampled independently (``scipy.stats.bootstrap(..., paired=False)`` with two
    samples): each bootstrap replicate draws len(numerator) runs with replacement from the numerator
    group and, separately, len(denominator) runs from the denominator group, then takes the ratio of
    the two means. That is the right resampling when seeds are separate runs of separate conditions
    (the same seed number in two conditions does not make the runs' tasks-to-threshold values pairs).
    Returns ``(ratio, low, high)``; CI bounds are nan when either group has fewer than 2 values.
    """
    a = np.asarray(numerator, dtype=float)
    b = np.asarray(denominator, dtype=float)
    if a.size == 0 or b.size == 0:
        return (math.nan, math.nan, math.nan)
    ratio = float(_ratio_of_means(a, b)) if b.mean() != 0 else math.nan
    if a.size < 2 or b.size < 2 or not math.isfinite(ratio):
        return (ratio, math.nan, math.nan)
    if np.all(a == a[0]) and np.all(b == b[0]):
        return (ratio, ratio, ratio)
    lo, hi = bootstrap_ci((a, b), _ratio_of_means, confidence, n_resamples, seed)
    return (ratio, lo, hi)


def censored_ratio(
    numerator: Sequence[float | None], numerator_limits: Sequence[float],
    denominator: Sequence[float | None], denominator_limits: Sequence[float],
    confidence: float = CONFIDENCE, n_resamples: int = N_RESAMPLES, seed: int = 0,
) -> RatioResult:
    """Ratio of mean tasks-to-threshold (e.g. baseline / dual) where runs may never reach it.

    ``numerator[i]`` is run i's tasks-to-threshold or None ("not reached"), and
    ``numerator_limits[i]`` its last tasks_seen (where it was censored). Censored values are replaced
    by their limit, which can only *under*-state when that run would have reached the threshold;
    :class:`RatioResult.kind` states which way the reported ratio is then a bound.
    """
    num = list(numerator)
    den = list(denominator)
    if len(num) != len(numerator_limits) or len(den) != len(denominator_limits):
        raise ValueError("each value needs its limit (the run's last tasks_seen)")
    r_num = sum(v is not None for v in num)
    r_den = sum(v is not None for v in den)
    a = [v if v is not None else lim for v, lim in zip(num, numerator_limits, strict=True)]
    b = [v if v is not None else lim for v, lim in zip(den, denominator_limits, strict=True)]
    base = dict(n_num=len(num), n_den=len(den), reached_num=r_num, reached_den=r_den)
    nan = math.nan
    if not num or not den:
        return RatioResult(nan, nan, nan, "insufficient", note="no runs in one group", **base)
    if r_num == 0 or r_den == 0:
        who = "numerator" if r_num == 0 else "denominator"
        if r_num == 0 and r_den == 0:
            who = "either group"
        return RatioResult(nan, nan, nan, "not_reached", note=f"threshold not reached by any run of {who}", **base)
    if float(np.mean(b)) == 0.0:
        return RatioResult(nan, nan, nan, "insufficient",
                           note="denominator runs reached the threshold at 0 tasks (already at the start)", **base)
    ratio, lo, hi = bootstrap_ratio_ci(a, b, confidence, n_resamples, seed)
    cens_num, cens_den = r_num < len(num), r_den < len(den)
    if cens_num and cens_den:
        kind, note = "undetermined", "runs of both groups never reached the threshold; censored at their last tasks_seen"
    elif cens_num:
        kind, note = "lower_bound", f"{len(num) - r_num} numerator run(s) never reached it; true ratio >= value"
    elif cens_den:
        kind, note = "upper_bound", f"{len(den) - r_den} denominator run(s) never reached it; true ratio <= value"
    else:
        kind, note = "estimate", ""
    if len(num) < 2 or len(den) < 2:
        kind, note = "insufficient", (note + "; " if note else "") + "fewer than 2 runs in a group: no interval"
    return RatioResult(ratio, lo, hi, kind, note=note, **base)


# ---------------------------------------------------------------------------------------------
# Paired comparison across seeds
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PairedTest(Record):
    """``a - b`` over runs paired by seed (same seed = same val tasks and sampling seeds).

    ``wilcoxon_p``: Wilcoxon signed-rank (exact for small n; with 3 pairs the smallest possible
    two-sided p is 0.25, so 3 seeds can never show significance this way: say so, don't hide it).
    ``ttest_p``: paired t-test (assumes normal differences). nan when undefined (n < 2, all
    differences zero, zero variance).
    """

    n: int
    mean_diff: float
    diff_low: float
    diff_high: float
    wins: int
    losses: int
    wilcoxon_p: float
    ttest_p: float


def paired_test(a: Sequence[float], b: Sequence[float], confidence: float = CONFIDENCE, seed: int = 0) -> PairedTest:
    """Paired comparison of ``a`` and ``b`` (equal length, index i = seed i in both)."""
    from scipy import stats

    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    if x.shape != y.shape:
        raise ValueError(f"paired samples differ in length ({x.size} vs {y.size})")
    nan = math.nan
    if x.size == 0:
        return PairedTest(0, nan, nan, nan, 0, 0, nan, nan)
    d = x - y
    ci = bootstrap_mean_ci(d, confidence=confidence, seed=seed)
    wil = tt = nan
    if d.size >= 2 and np.any(d != 0):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                wil = float(stats.wilcoxon(x, y).pvalue)
            except ValueError:
                wil = nan
            if np.std(d) > 0:
                tt = float(stats.ttest_rel(x, y).pvalue)
    return PairedTest(int(d.size), float(d.mean()), ci.low, ci.high, int((d > 0).sum()), int((d < 0).sum()),
                      wil if math.isfinite(wil) else nan, tt if math.isfinite(tt) else nan)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of ``pvalues`` (one per arm against one reference): the family-wise
    error rate stays at alpha when each adjusted p is compared with alpha. nan stays nan and does not count
    in the family size. ``p_(i)`` (the i-th smallest of m) becomes ``max_{j<=i} min(1, (m - j + 1) p_(j))``."""
    p = np.asarray(pvalues, dtype=float)
    out = np.full(p.shape, math.nan)
    keep = np.flatnonzero(np.isfinite(p))
    m = keep.size
    running = 0.0
    for rank, i in enumerate(keep[np.argsort(p[keep], kind="stable")]):
        running = max(running, min(1.0, (m - rank) * float(p[i])))
        out[i] = running
    return [float(x) for x in out]


# ---------------------------------------------------------------------------------------------
# Correlation
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Correlation(Record):
    r: float
    low: float
    high: float
    p: float
    n: int


def pearson_with_ci(x: Sequence[float], y: Sequence[float], confidence: float = CONFIDENCE) -> Correlation:
    """Pearson r, its two-sided p and a Fisher-z CI (``scipy.stats.pearsonr(...).confidence_interval``).

    Needs n >= 4 (the Fisher interval's standard error is 1/sqrt(n - 3)) and non-constant inputs;
    otherwise r/CI/p are nan and ``n`` says why.
    """
    from scipy import stats

    a = np.asarray(x, dtype=float)
    b = np.asarray(y, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"x and y differ in length ({a.size} vs {b.size})")
    keep = np.isfinite(a) & np.isfinite(b)
    a, b = a[keep], b[keep]
    nan = math.nan
    if a.size < 4 or np.all(a == a[0]) or np.all(b == b[0]):
        return Correlation(nan, nan, nan, nan, int(a.size))
    res = stats.pearsonr(a, b)
    ci = res.confidence_interval(confidence_level=confidence)
    return Correlation(float(res.statistic), float(ci.low), float(ci.high), float(res.pvalue), int(a.size))


def learning_rate_windows(
    val: Sequence[tuple[float, float, float]], wm: Sequence[tuple[float, float]], window: int
) -> list[tuple[float, float, float]]:
    """The design's correlation analysis, one run: (step N, WM accuracy at N, policy learning rate after N).

    ``val``: (step, tasks_seen, success) per validation evaluation. ``wm``: (step, wm token accuracy)
    per training log row. For each evaluation at step N that has a later evaluation at step
    M >= N + ``window`` (the first such M):

    - WM accuracy at N = mean of the wm rows with N - window < step <= N (the recent accuracy;
      evaluations with no such row are skipped);
    - policy learning rate = (success_M - success_N) / (tasks_seen_M - tasks_seen_N): Δsuccess per
      task over the next window.
    """
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    v = sorted(val)
    w = np.asarray(sorted(wm), dtype=float).reshape(-1, 2)
    out = []
    for i, (step, tasks, succ) in enumerate(v):
        later = [p for p in v[i + 1:] if p[0] >= step + window]
        if not later:
            continue
        m_step, m_tasks, m_succ = later[0]
        if m_tasks <= tasks:
            continue
        sel = (w[:, 0] > step - window) & (w[:, 0] <= step) if w.size else np.zeros(0, bool)
        if not sel.any():
            continue
        acc = float(w[sel, 1].mean())
        out.append((float(step), acc, float((m_succ - succ) / (m_tasks - tasks))))
    return out


# ---------------------------------------------------------------------------------------------
# Token accuracy
# ---------------------------------------------------------------------------------------------
def token_accuracy(predicted: Sequence[int], target: Sequence[int], ignore_index: int = -100) -> float:
    """Share of target positions whose predicted token id equals the target id.

    Positions where ``target == ignore_index`` (the loss mask's 0s) are not counted. A prediction
    shorter than the target counts its missing positions as wrong; extra predicted tokens beyond the
    target are ignored (for teacher-forced argmax predictions the lengths match). nan if no target
    position counts.
    """
    t = np.asarray(target, dtype=np.int64).ravel()
    p = np.full(t.shape, np.iinfo(np.int64).min, dtype=np.int64)
    pred = np.asarray(predicted, dtype=np.int64).ravel()[: t.size]
    p[: pred.size] = pred
    mask = t != ignore_index
    if not mask.any():
        return math.nan
    return float((p[mask] == t[mask]).mean())


def argmax_token_accuracy(logits, labels, ignore_index: int = -100) -> float:
    """Teacher-forced token accuracy: argmax of ``logits[..., t, :]`` against ``labels[..., t]``.

    ``logits`` (…, T, V) and ``labels`` (…, T) must already be aligned (logits at t predict label t,
    i.e. shifted as for the loss). Accepts numpy arrays or torch tensors (converted on CPU).
    """
    lg = np.asarray(logits.detach().float().cpu() if hasattr(logits, "detach") else logits)
    lb = np.asarray(labels.detach().cpu() if hasattr(labels, "detach") else labels)
    if lg.shape[:-1] != lb.shape:
        raise ValueError(f"logits {lg.shape} and labels {lb.shape} are not aligned")
    return token_accuracy(lg.argmax(-1).ravel(), lb.ravel(), ignore_index=ignore_index)


__all__ = [
    "CONFIDENCE", "Correlation", "Estimate", "PairedTest", "RatioResult", "argmax_token_accuracy",
    "bootstrap_mean_ci", "bootstrap_ratio_ci", "censored_ratio", "curve_auc", "learning_rate_windows",
    "paired_test", "pearson_with_ci", "smooth", "tasks_to_threshold", "token_accuracy", "wilson_interval",
]

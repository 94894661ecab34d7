"""Treatment vs. baseline over a few paired seeds: the statistics a study's comparison table quotes.

Builds on :mod:`lfo_cli.stats` (tasks-to-threshold, AUC, :class:`~lfo_cli.stats.Estimate`,
the percentile bootstrap) and adds what a treatment-vs-baseline comparison at 4-5 seeds per
condition needs. Pure functions on plain sequences (numpy/scipy only); they return dataclasses or
floats, never print or touch files. Conventions (and why):

- **Pairing.** Index i of a baseline sequence and index i of a treatment sequence are the same seed
  (same validation tasks, same sampling seeds), so differences and ratios are taken per seed. A pair
  with a missing value (None/nan) on either side is dropped and ``n`` counts the pairs used.
- **t-intervals for paired quantities, not the percentile bootstrap.** With n = 4-5 pairs the
  percentile bootstrap of a mean under-covers: its spread is the plug-in ``sd * sqrt((n-1)/n)`` and
  its quantiles are normal-like, where the t-interval uses ``t_{n-1}`` (3.18 at n = 4, not 1.96).
  :func:`ratio_ci_coverage` measures this (2,000 simulated studies: a nominal 95% percentile
  interval covers about 0.80 of the time at n = 4 and 0.85 at n = 5, the t-interval 0.95); the
  tests assert it. The t-interval assumes roughly normal per-seed differences (log ratios for
  :func:`paired_ratio_ci`); with 4 seeds that cannot be checked, so it is a stated assumption, not
  a finding.
- **Ratios on the log scale.** Tasks-to-threshold ratios are multiplicative (2x faster and 2x slower
  should be symmetric), so :func:`paired_ratio_ci` takes the geometric mean of per-seed ratios and a
  t-interval on the log ratios, exponentiated.
- **Probability of improvement** (Agarwal et al. 2021) compares the two conditions' score
  distributions without pairing; its CI is the stratified percentile bootstrap of
  :mod:`~lfo_cli.stats` (fixed ``seed``, so re-running gives identical numbers). At 4-5 seeds per
  group it is descriptive, with the same small-n caveat as above.
- **"Not enough data" is a result**: nan/None fields and ``n``, never an exception. Bad arguments
  (mismatched lengths, negative tasks counts, a confidence outside (0, 1)) raise ``ValueError``.
- Confidence levels default to 95% (:data:`lfo_cli.stats.CONFIDENCE`).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from lfo_cli.stats import CONFIDENCE, N_RESAMPLES, Estimate, Record, bootstrap_ci

METHODS = ("t-log", "percentile")


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")


def _finite(values: Sequence[float | None]) -> np.ndarray:
    """Values as a float array without None/nan/inf (independent samples: order does not matter)."""
    v = np.asarray([np.nan if x is None else x for x in values], dtype=float).ravel()
    return v[np.isfinite(v)]


def _pairs(
    a: Sequence[float | None], b: Sequence[float | None], what: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Paired arrays ``(x, y, keep)``: ``keep`` marks pairs where both sides are finite."""
    if len(a) != len(b):
        raise ValueError(f"paired {what} differ in length ({len(a)} vs {len(b)})")
    x = np.asarray([np.nan if v is None else v for v in a], dtype=float).ravel()
    y = np.asarray([np.nan if v is None else v for v in b], dtype=float).ravel()
    keep = np.isfinite(x) & np.isfinite(y)
    return x, y, keep


def _t_interval(d: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean and t-interval of ``d`` along the last axis: ``mean +- t_{n-1} * sd / sqrt(n)``.

    Vectorised over leading axes (the coverage simulation passes one row per simulated study).
    Needs n >= 2 along the last axis; zero spread gives a zero-width interval at the mean.
    """
    from scipy import stats

    n = d.shape[-1]
    mean = d.mean(axis=-1)
    half = stats.t.ppf(0.5 + confidence / 2, n - 1) * d.std(axis=-1, ddof=1) / math.sqrt(n)
    return mean, mean - half, mean + half


# ---------------------------------------------------------------------------------------------
# Probability of improvement
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ProbabilityOfImprovement(Record):
    """P(X > Y) for a treatment run X and a baseline run Y; ``low``/``high`` nan when a group has < 2 runs."""

    value: float
    low: float
    high: float
    n_x: int
    n_y: int


def _poi(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    """Mean of S(x_i, y_j) over all pairs (1 if x_i > y_j, 0.5 if equal, 0 if less); vectorised."""
    xs = np.expand_dims(np.moveaxis(x, axis, -1), -1)
    ys = np.expand_dims(np.moveaxis(y, axis, -1), -2)
    s = (xs > ys) + 0.5 * (xs == ys)
    return s.mean(axis=(-2, -1))


def probability_of_improvement(
    x: Sequence[float | None], y: Sequence[float | None], seed: int = 0, confidence: float = CONFIDENCE,
    n_resamples: int = N_RESAMPLES,
) -> ProbabilityOfImprovement:
    """Probability that a treatment run scores higher than a baseline run (Agarwal et al. 2021).

    ``x``: the treatment's score per seed; ``y``: the baseline's. The value is the mean of
    S(x_i, y_j) over all n_x * n_y pairs, S = 1 if x_i > y_j, 0.5 if equal, 0 otherwise (the
    Mann-Whitney U / (n_x n_y)); 0.5 means no difference. Unpaired: seeds need not match. CI:
    percentile bootstrap resampling x and y independently (stratified), fixed ``seed``.
    None/nan scores are dropped. An empty group: all nan. A group with < 2 runs: no interval.
    """
    _check_confidence(confidence)
    a, b = _finite(x), _finite(y)
    nan = math.nan
    if a.size == 0 or b.size == 0:
        return ProbabilityOfImprovement(nan, nan, nan, int(a.size), int(b.size))
    value = float(_poi(a, b))
    if a.size < 2 or b.size < 2:
        return ProbabilityOfImprovement(value, nan, nan, int(a.size), int(b.size))
    lo, hi = bootstrap_ci((a, b), _poi, confidence, n_resamples, seed)
    return ProbabilityOfImprovement(value, lo, hi, int(a.size), int(b.size))


# ---------------------------------------------------------------------------------------------
# The threshold of the tasks-to-threshold comparison
# ---------------------------------------------------------------------------------------------
def reachable_threshold(
    baseline_start: Sequence[float | None], baseline_final: Sequence[float | None], fraction: float = 0.5
) -> float:
    """The study's pre-declared threshold: mean(start) + ``fraction`` * mean(final - start), baseline only.

    ``baseline_start[i]`` / ``baseline_final[i]`` are seed i's first and last validation success
    (paired by index; a seed missing either is dropped). Deriving the threshold from the baseline
    alone, before looking at the treatment, makes it one the baseline reaches (at ``fraction`` <= 1
    of its mean gain) and keeps the treatment's results out of the choice.

    Returns nan when no seed has both values, or when the baseline's mean gain is <= 0: a baseline
    that does not learn defines no level to reach (any "threshold" would be at or below its start, so
    "reaching" it would mean nothing).
    """
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    s, f, keep = _pairs(baseline_start, baseline_final, "start/final values")
    if not keep.any():
        return math.nan
    s, f = s[keep], f[keep]
    gain = float(np.mean(f - s))
    if gain <= 0.0:
        return math.nan
    return float(np.mean(s) + fraction * gain)


# ---------------------------------------------------------------------------------------------
# Paired tasks-to-threshold ratio
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PairedRatio(Record):
    """Geometric mean of per-seed ratios baseline / treatment (> 1: treatment needs fewer tasks).

    ``kind`` says how censoring bends it (censored values are lower bounds on tasks-to-threshold):

    - ``estimate``: no censored run among the pairs used.
    - ``lower_bound``: only baseline runs censored; their values are too small, so the true ratio
      is >= ``value`` (the report understates the treatment's advantage: conservative).
    - ``upper_bound``: only treatment runs censored; the true ratio is <= ``value``
      (anti-conservative: a report must say so).
    - ``undetermined``: censored runs on both sides; the direction is unknown.

    ``low``/``high`` are nan when fewer than 2 pairs are used. ``n_dropped``: pairs left out (a
    missing value, or a value of 0, where the ratio is undefined); ``note`` says why.
    """

    ratio: float
    low: float
    high: float
    n: int
    n_censored_baseline: int
    n_censored_treatment: int
    kind: str
    method: str
    n_dropped: int = 0
    note: str = ""


def _flags(flags: Sequence[bool] | None, n: int, name: str) -> np.ndarray:
    if flags is None:
        return np.zeros(n, dtype=bool)
    if len(flags) != n:
        raise ValueError(f"{name} needs one flag per run ({len(flags)} flags for {n} runs)")
    return np.asarray(flags, dtype=bool).ravel()


def paired_ratio_ci(
    baseline: Sequence[float | None], treatment: Sequence[float | None],
    censored_baseline: Sequence[bool] | None = None, censored_treatment: Sequence[bool] | None = None,
    confidence: float = CONFIDENCE,
) -> PairedRatio:
    """Tasks-to-threshold ratio baseline / treatment over seeds paired by index, with a t-log CI.

    ``baseline[i]`` / ``treatment[i]``: seed i's tasks-to-threshold (e.g. from
    :func:`lfo_cli.stats.tasks_to_threshold`). A run that never reached the threshold enters
    with its last evaluation's tasks_seen (a lower bound on when it would) and a True in
    ``censored_baseline`` / ``censored_treatment``; the counts and :attr:`PairedRatio.kind` carry
    the direction of the resulting bias.

    Estimator: exp(mean(log r_i)), r_i = baseline_i / treatment_i (the geometric mean). CI:
    exp(mean +- t_{n-1, (1+confidence)/2} * sd / sqrt(n)) on the log ratios (method ``"t-log"``);
    identical ratios give a zero-width interval. Pairs with a missing value or a 0 (threshold met at
    the first evaluation: no ratio) are dropped and counted in ``n_dropped``.
    """
    _check_confidence(confidence)
    b, t, keep = _pairs(baseline, treatment, "tasks-to-threshold values")
    cb = _flags(censored_baseline, b.size, "censored_baseline")
    ct = _flags(censored_treatment, t.size, "censored_treatment")
    if np.any(b[keep] < 0) or np.any(t[keep] < 0):
        raise ValueError("tasks-to-threshold values must be >= 0")
    notes = []
    n_missing = int((~keep).sum())
    if n_missing:
        notes.append(f"{n_missing} pair(s) with a missing value dropped")
    zero = keep & ((b == 0) | (t == 0))
    if zero.any():
        notes.append(f"{int(zero.sum())} pair(s) at 0 tasks (threshold met at the first evaluation) dropped")
    keep &= ~zero
    b, t, cb, ct = b[keep], t[keep], cb[keep], ct[keep]
    n_cb, n_ct = int(cb.sum()), int(ct.sum())
    if n_cb and n_ct:
        kind = "undetermined"
        notes.append("censored runs on both sides: direction of the bias unknown")
    elif n_cb:
        kind = "lower_bound"
        notes.append(f"{n_cb} baseline run(s) never reached the threshold: true ratio >= value")
    elif n_ct:
        kind = "upper_bound"
        notes.append(f"{n_ct} treatment run(s) never reached the threshold: true ratio <= value")
    else:
        kind = "estimate"
    nan = math.nan
    base = dict(n=int(b.size), n_censored_baseline=n_cb, n_censored_treatment=n_ct, kind=kind, method="t-log",
                n_dropped=int((~keep).sum()))
    if b.size == 0:
        return PairedRatio(nan, nan, nan, note="; ".join(notes + ["no usable pairs"]), **base)
    logr = np.log(b / t)
    ratio = float(np.exp(logr.mean()))
    if b.size < 2:
        return PairedRatio(ratio, nan, nan, note="; ".join(notes + ["fewer than 2 pairs: no interval"]), **base)
    _, lo, hi = _t_interval(logr, confidence)
    return PairedRatio(ratio, float(np.exp(lo)), float(np.exp(hi)), note="; ".join(notes), **base)


# ---------------------------------------------------------------------------------------------
# Paired differences and power
# ---------------------------------------------------------------------------------------------
def paired_diff_ci(a: Sequence[float | None], b: Sequence[float | None], confidence: float = CONFIDENCE) -> Estimate:
    """Mean of the paired differences a_i - b_i with a t-interval (e.g. treatment - baseline AUC).

    Same interval as ``scipy.stats.ttest_rel(a, b).confidence_interval(confidence)``, computed
    directly so that equal differences give a zero-width interval instead of nan. Pairs with a
    missing value are dropped. n == 0: all nan; n == 1: the difference, no interval.
    (:func:`lfo_cli.stats.paired_test` gives the same mean with a percentile-bootstrap CI and
    the p-values; at 4-5 seeds quote this interval, see the module docstring.)
    """
    _check_confidence(confidence)
    x, y, keep = _pairs(a, b, "samples")
    d = x[keep] - y[keep]
    nan = math.nan
    if d.size == 0:
        return Estimate(nan, nan, nan, 0)
    if d.size == 1:
        return Estimate(float(d[0]), nan, nan, 1)
    mean, lo, hi = _t_interval(d, confidence)
    return Estimate(float(mean), float(lo), float(hi), int(d.size))


def min_detectable_effect(paired_sd: float, n: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """Smallest true mean paired difference a two-sided paired t-test at ``n`` pairs detects with ``power``.

    ``(t_{1-alpha/2, n-1} + t_{power, n-1}) * paired_sd / sqrt(n)``, in the units of ``paired_sd``
    (the sd of the per-seed differences, e.g. from a pilot). The usual approximation: the exact
    noncentral-t power at this effect is below ``power`` at tiny n (about 0.73 at n = 2, 0.78 at n = 4,
    0.79 at n = 5 for power = 0.8), so it is a slight under-statement. nan when n < 2 or the sd is nan.
    """
    from scipy import stats

    if not 0.0 < alpha < 1.0 or not 0.0 < power < 1.0:
        raise ValueError(f"alpha and power must be in (0, 1), got alpha={alpha}, power={power}")
    if paired_sd is None or not math.isfinite(paired_sd) or n < 2:
        return math.nan
    if paired_sd < 0:
        raise ValueError(f"paired_sd must be >= 0, got {paired_sd}")
    df = int(n) - 1
    return float((stats.t.ppf(1 - alpha / 2, df) + stats.t.ppf(power, df)) * paired_sd / math.sqrt(n))


# ---------------------------------------------------------------------------------------------
# Coverage of the ratio CI (simulation)
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Coverage(Record):
    """Share of simulated studies whose interval covered the true ratio.

    ``mc_se``: Monte-Carlo standard error of ``coverage`` (sqrt(c(1-c)/n_sims)).
    ``median_fold_width``: median of high / low, how wide the intervals were (an interval that
    under-covers is usually too narrow).
    """

    method: str
    coverage: float
    mc_se: float
    n_seeds: int
    n_sims: int
    median_fold_width: float


def _percentile_intervals(
    logr: np.ndarray, confidence: float, n_resamples: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Percentile-bootstrap CI of the mean along the last axis, one per row (scipy.stats.bootstrap).

    scipy vectorises over the leading axis (each row's resamples use the same index draws, which
    leaves each row's interval distributed exactly as a separate call's).
    """
    from scipy import stats

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", getattr(stats, "DegenerateDataWarning", RuntimeWarning))
        res = stats.bootstrap(
            (logr,), np.mean, n_resamples=n_resamples, batch=max(1, min(n_resamples, 2_000_000 // logr.size)),
            vectorized=True, axis=-1, confidence_level=confidence, method="percentile",
            rng=np.random.default_rng(seed),
        )
    return np.asarray(res.confidence_interval.low), np.asarray(res.confidence_interval.high)


def ratio_ci_coverage(
    true_ratio: float = 2.0, n_seeds: int = 4, n_sims: int = 2000, log_sd: float = 0.3, seed: int = 0,
    method: str = "t-log", confidence: float = CONFIDENCE, baseline_median: float = 2000.0,
    baseline_log_sd: float = 0.5, n_resamples: int = N_RESAMPLES,
) -> Coverage:
    """Coverage of the tasks-to-threshold ratio CI at ``n_seeds`` paired seeds, by simulation.

    Each of ``n_sims`` simulated studies draws seed i's baseline tasks-to-threshold as
    ``baseline_median * exp(baseline_log_sd * z_i)`` and the treatment value of the same seed as
    ``baseline_i / true_ratio * exp(log_sd * e_i)`` (z, e standard normal, no censoring), so
    seeds that are hard for the baseline are hard for the treatment too and the true paired ratio
    (geometric-mean sense) is ``true_ratio``. The interval is then computed with ``method``:

    - ``"t-log"``: :func:`paired_ratio_ci`'s t-interval on the log ratios (the method used);
    - ``"percentile"``: ``scipy.stats.bootstrap`` percentile interval of the mean log ratio,
      exponentiated (for comparison; ``n_resamples`` resamples).

    Log ratios here are exactly normal, so the t-interval's coverage is the nominal one by
    construction: the simulation checks the implementation and shows how far the bootstrap falls
    short at the grid's number of seeds; it says nothing about heavy-tailed seeds or censoring.
    Deterministic for a fixed ``seed``.
    """
    _check_confidence(confidence)
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if true_ratio <= 0 or log_sd < 0 or baseline_log_sd < 0 or baseline_median <= 0:
        raise ValueError("need true_ratio > 0, baseline_median > 0 and log sds >= 0")
    if n_seeds < 2 or n_sims < 1:
        nan = math.nan
        return Coverage(method, nan, nan, int(n_seeds), int(n_sims), nan)
    rng = np.random.default_rng(seed)
    base = baseline_median * np.exp(baseline_log_sd * rng.standard_normal((n_sims, n_seeds)))
    treat = base / true_ratio * np.exp(log_sd * rng.standard_normal((n_sims, n_seeds)))
    logr = np.log(base / treat)
    if method == "t-log":
        _, lo, hi = _t_interval(logr, confidence)
    else:
        lo, hi = _percentile_intervals(logr, confidence, n_resamples, seed)
    target = math.log(true_ratio)
    covered = (lo <= target) & (target <= hi)
    c = float(covered.mean())
    return Coverage(method, c, math.sqrt(c * (1 - c) / n_sims), int(n_seeds), int(n_sims),
                    float(np.median(np.exp(hi - lo))))


__all__ = [
    "Coverage", "METHODS", "PairedRatio", "ProbabilityOfImprovement", "min_detectable_effect", "paired_diff_ci",
    "paired_ratio_ci", "probability_of_improvement", "ratio_ci_coverage", "reachable_threshold",
]


@dataclass(frozen=True)
class Equivalence:
    """Two one-sided paired t-tests (TOST) of mean(d) inside (-margin, +margin)."""

    n: int
    mean_diff: float
    low: float  # the (1 - 2 alpha) t-interval that TOST at alpha checks
    high: float
    p: float  # max of the two one-sided p-values; nan below 2 pairs or without spread
    margin: float
    alpha: float

    @property
    def equivalent(self) -> bool:
        return math.isfinite(self.p) and self.p < self.alpha

    def as_dict(self) -> dict:
        return {**asdict(self), "equivalent": self.equivalent}


def tost_paired(diffs: Sequence[float], margin: float, alpha: float = 0.05) -> Equivalence:
    """Is the mean paired difference within +-``margin``? Equivalent when both one-sided t-tests reject at
    ``alpha``, i.e. the (1 - 2 alpha) t-interval lies inside the margin (Schuirmann's TOST)."""
    from scipy import stats

    d = np.asarray(diffs, dtype=float)
    nan = math.nan
    if d.size < 2 or not np.std(d) > 0:
        return Equivalence(int(d.size), float(d.mean()) if d.size else nan, nan, nan, nan, margin, alpha)
    lower = stats.ttest_1samp(d, -margin, alternative="greater").pvalue
    upper = stats.ttest_1samp(d, margin, alternative="less").pvalue
    ci = stats.ttest_1samp(d, 0.0).confidence_interval(confidence_level=1 - 2 * alpha)
    return Equivalence(int(d.size), float(d.mean()), float(ci.low), float(ci.high), float(max(lower, upper)),
                       margin, alpha)

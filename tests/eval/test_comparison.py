"""lfo_cli.eval.comparison on hand-made data, plus the coverage simulation that picks the ratio CI."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from lfo_cli.eval import comparison as cmp
from lfo_cli.stats import Estimate


# ---- probability of improvement -----------------------------------------------------------------
def test_probability_of_improvement_by_hand():
    # x=3: beats 1, 2, ties 3 -> 2.5; x=4: 3; x=5: 3. (2.5 + 3 + 3) / 9
    r = cmp.probability_of_improvement([3, 4, 5], [1, 2, 3])
    assert r.value == pytest.approx(8.5 / 9)
    assert (r.n_x, r.n_y) == (3, 3)
    # the same quantity as the Mann-Whitney U statistic / (n_x n_y)
    x, y = [0.2, 0.5, 0.5, 0.9], [0.1, 0.5, 0.7, 0.3, 0.4]
    u = sps.mannwhitneyu(x, y).statistic
    assert cmp.probability_of_improvement(x, y).value == pytest.approx(u / (len(x) * len(y)))


def test_probability_of_improvement_edges():
    r = cmp.probability_of_improvement([3, 4, 5], [0, 1, 2])
    assert (r.value, r.low, r.high) == (1.0, 1.0, 1.0)  # every resample keeps x above y
    assert cmp.probability_of_improvement([0, 1, 2], [3, 4, 5]).value == 0.0
    assert cmp.probability_of_improvement([1, 2, 3], [1, 2, 3]).value == pytest.approx(0.5)
    assert cmp.probability_of_improvement([1, 1, 1], [1, 1, 1]).value == pytest.approx(0.5)
    one = cmp.probability_of_improvement([2.0], [1.0, 3.0])
    assert one.value == 0.5 and math.isnan(one.low) and math.isnan(one.high) and one.n_x == 1
    empty = cmp.probability_of_improvement([], [1.0, None])
    assert math.isnan(empty.value) and (empty.n_x, empty.n_y) == (0, 1)


def test_probability_of_improvement_ci_contains_value_and_is_deterministic():
    x, y = [0.62, 0.71, 0.55, 0.80, 0.66], [0.50, 0.58, 0.61, 0.47, 0.52]
    a = cmp.probability_of_improvement(x, y, seed=3)
    assert a.low <= a.value <= a.high and a.low < a.high <= 1.0
    assert cmp.probability_of_improvement(x, y, seed=3) == a
    wider = cmp.probability_of_improvement(x, y, seed=3, confidence=0.99)
    assert wider.low <= a.low and wider.high >= a.high


# ---- reachable threshold ------------------------------------------------------------------------
def test_reachable_threshold_rule():
    start, final = [0.10, 0.20, 0.00], [0.70, 0.80, 0.60]  # mean start 0.1, mean gain 0.6
    assert cmp.reachable_threshold(start, final) == pytest.approx(0.1 + 0.5 * 0.6)
    assert cmp.reachable_threshold(start, final, fraction=1.0) == pytest.approx(0.7)
    # a seed missing either value is dropped as a pair
    assert cmp.reachable_threshold([0.1, None, 0.3], [0.5, 0.9, 0.7]) == pytest.approx(0.2 + 0.5 * 0.4)


def test_reachable_threshold_undefined_without_gain():
    assert math.isnan(cmp.reachable_threshold([0.3, 0.4], [0.3, 0.2]))  # mean gain < 0
    assert math.isnan(cmp.reachable_threshold([0.3, 0.4], [0.4, 0.3]))  # mean gain == 0
    assert math.isnan(cmp.reachable_threshold([], []))
    with pytest.raises(ValueError):
        cmp.reachable_threshold([0.1, 0.2], [0.5])
    with pytest.raises(ValueError):
        cmp.reachable_threshold([0.1], [0.5], fraction=0.0)


# ---- paired ratio ---------------------------------------------------------------------------------
def test_paired_ratio_is_the_geometric_mean_with_a_t_log_interval():
    r = cmp.paired_ratio_ci([100, 400, 900], [100, 100, 100])  # ratios 1, 4, 9 -> (1*4*9)^(1/3)
    assert r.ratio == pytest.approx(36 ** (1 / 3))
    logs = np.log([1.0, 4.0, 9.0])
    half = sps.t.ppf(0.975, 2) * logs.std(ddof=1) / math.sqrt(3)
    assert r.low == pytest.approx(math.exp(logs.mean() - half))
    assert r.high == pytest.approx(math.exp(logs.mean() + half))
    assert r.n == 3 and r.kind == "estimate" and r.method == "t-log" and r.note == ""
    # swapping the conditions inverts ratio and interval (log-scale symmetry)
    s = cmp.paired_ratio_ci([100, 100, 100], [100, 400, 900])
    assert s.ratio == pytest.approx(1 / r.ratio) and s.low == pytest.approx(1 / r.high)


def test_paired_ratio_identical_ratios_give_a_zero_width_interval():
    r = cmp.paired_ratio_ci([200, 400, 800, 1600], [100, 200, 400, 800])
    assert r.ratio == pytest.approx(2.0) and r.low == pytest.approx(2.0) and r.high == pytest.approx(2.0)


def test_paired_ratio_reports_censoring_and_its_direction():
    b, t = [800, 1200, 1000, 900], [400, 500, 600, 450]
    r = cmp.paired_ratio_ci(b, t, censored_baseline=[False, True, False, False])
    assert (r.n_censored_baseline, r.n_censored_treatment, r.kind) == (1, 0, "lower_bound")
    r = cmp.paired_ratio_ci(b, t, censored_treatment=[True, False, False, True])
    assert (r.n_censored_baseline, r.n_censored_treatment, r.kind) == (0, 2, "upper_bound")
    r = cmp.paired_ratio_ci(b, t, [True, False, False, False], [False, False, False, True])
    assert r.kind == "undetermined"
    with pytest.raises(ValueError):
        cmp.paired_ratio_ci(b, t, censored_baseline=[True])


def test_paired_ratio_not_enough_data():
    one = cmp.paired_ratio_ci([300], [100])
    assert one.ratio == pytest.approx(3.0) and math.isnan(one.low) and math.isnan(one.high) and one.n == 1
    none = cmp.paired_ratio_ci([], [])
    assert math.isnan(none.ratio) and none.n == 0
    # a missing seed and a seed already at the threshold at 0 tasks are dropped, and counted
    r = cmp.paired_ratio_ci([300, None, 0, 400], [100, 100, 50, 200], censored_baseline=[False, False, True, False])
    assert r.n == 2 and r.n_dropped == 2 and r.n_censored_baseline == 0
    assert r.ratio == pytest.approx(math.sqrt(6.0))
    with pytest.raises(ValueError):
        cmp.paired_ratio_ci([100, 200], [100])
    with pytest.raises(ValueError):
        cmp.paired_ratio_ci([100, -5], [100, 100])


# ---- paired difference ----------------------------------------------------------------------------
def test_paired_diff_ci_by_hand():
    a, b = [0.61, 0.70, 0.58, 0.75], [0.52, 0.66, 0.60, 0.61]
    d = np.array(a) - np.array(b)  # 0.09, 0.04, -0.02, 0.14
    half = sps.t.ppf(0.975, 3) * d.std(ddof=1) / 2
    r = cmp.paired_diff_ci(a, b)
    assert isinstance(r, Estimate) and r.n == 4
    assert r.value == pytest.approx(0.0625)
    assert (r.low, r.high) == pytest.approx((0.0625 - half, 0.0625 + half))
    ci = sps.ttest_rel(a, b).confidence_interval(0.95)
    assert (r.low, r.high) == pytest.approx((ci.low, ci.high))


def test_paired_diff_ci_edges():
    r = cmp.paired_diff_ci([2, 3, 4], [1, 2, 3])
    assert (r.value, r.low, r.high) == pytest.approx((1.0, 1.0, 1.0))
    one = cmp.paired_diff_ci([0.5, None], [0.25, 0.3])
    assert one.value == 0.25 and one.n == 1 and math.isnan(one.low)
    assert cmp.paired_diff_ci([], []).n == 0
    with pytest.raises(ValueError):
        cmp.paired_diff_ci([1, 2], [1, 2, 3])


# ---- minimum detectable effect --------------------------------------------------------------------
def test_min_detectable_effect_by_hand():
    # n = 4: t_{0.975,3} = 3.18245, t_{0.8,3} = 0.97847 -> 4.16092 * sd / 2
    assert cmp.min_detectable_effect(0.1, 4) == pytest.approx(4.16092 * 0.1 / 2, rel=1e-4)
    mde = [cmp.min_detectable_effect(0.1, n) for n in (2, 3, 4, 5, 8, 20)]
    assert np.all(np.diff(mde) < 0)
    assert math.isnan(cmp.min_detectable_effect(0.1, 1))
    assert cmp.min_detectable_effect(0.0, 4) == 0.0
    with pytest.raises(ValueError):
        cmp.min_detectable_effect(0.1, 4, power=1.0)


def test_min_detectable_effect_power_is_close_to_the_target():
    # the exact (noncentral t) power of a paired t-test at that effect: slightly below 0.8 at tiny n
    for n in (4, 5, 10):
        effect = cmp.min_detectable_effect(1.0, n)
        crit, nc = sps.t.ppf(0.975, n - 1), effect * math.sqrt(n)
        power = sps.nct.sf(crit, n - 1, nc) + sps.nct.cdf(-crit, n - 1, nc)
        assert 0.77 < power <= 0.8


# ---- coverage of the ratio CI ---------------------------------------------------------------------
@pytest.mark.parametrize("n_seeds", [4, 5])
def test_t_log_ratio_interval_covers_at_the_nominal_rate(n_seeds):
    cov = cmp.ratio_ci_coverage(true_ratio=2.0, n_seeds=n_seeds, n_sims=2000, log_sd=0.3, seed=11, method="t-log")
    assert 0.92 <= cov.coverage <= 0.98
    assert cov.n_seeds == n_seeds and cov.n_sims == 2000
    assert cmp.ratio_ci_coverage(2.0, n_seeds, 2000, 0.3, 11, "t-log") == cov  # deterministic


@pytest.mark.parametrize("n_seeds", [4, 5])
def test_percentile_bootstrap_under_covers_at_few_seeds(n_seeds):
    # the reason paired_ratio_ci uses the t-interval: the percentile bootstrap is too narrow at 4-5 seeds
    boot = cmp.ratio_ci_coverage(2.0, n_seeds, 2000, 0.3, 11, "percentile", n_resamples=1999)
    t = cmp.ratio_ci_coverage(2.0, n_seeds, 2000, 0.3, 11, "t-log")
    assert boot.coverage < 0.90
    assert boot.median_fold_width < t.median_fold_width


def test_coverage_simulation_matches_paired_ratio_ci():
    # the simulation's vectorised t-log interval is the same computation as paired_ratio_ci
    rng = np.random.default_rng(0)
    b = 1000 * np.exp(0.5 * rng.standard_normal(5))
    t = b / 2 * np.exp(0.3 * rng.standard_normal(5))
    r = cmp.paired_ratio_ci(b.tolist(), t.tolist())
    _, lo, hi = cmp._t_interval(np.log(b / t)[None, :], 0.95)
    assert (r.low, r.high) == pytest.approx((math.exp(lo[0]), math.exp(hi[0])))
    with pytest.raises(ValueError):
        cmp.ratio_ci_coverage(method="bca")
    assert math.isnan(cmp.ratio_ci_coverage(n_seeds=1).coverage)

"""lfo_cli.stats on hand-made data, plus a coverage simulation for the bootstrap CIs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lfo_cli import stats


# ---- Wilson ---------------------------------------------------------------------------------
def test_wilson_matches_the_closed_form():
    k, n, z = 7, 10, 1.959963984540054
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    lo, hi = stats.wilson_interval(k, n)
    assert lo == pytest.approx(centre - half, abs=1e-9)
    assert hi == pytest.approx(centre + half, abs=1e-9)


def test_wilson_edges():
    lo, hi = stats.wilson_interval(0, 20)
    assert lo == pytest.approx(0.0, abs=1e-12) and 0.1 < hi < 0.2  # 0/20 still has a non-zero upper bound
    lo, hi = stats.wilson_interval(20, 20)
    assert hi == pytest.approx(1.0) and 0.8 < lo < 0.9
    assert all(math.isnan(v) for v in stats.wilson_interval(0, 0))
    with pytest.raises(ValueError):
        stats.wilson_interval(5, 3)


# ---- tasks to threshold -------------------------------------------------------------------------
def test_smooth_is_trailing_mean():
    np.testing.assert_allclose(stats.smooth([0, 3, 6, 9], window=3), [0, 1.5, 3, 6])
    np.testing.assert_allclose(stats.smooth([1, 2], window=1), [1, 2])


def test_tasks_to_threshold_uses_the_smoothed_curve():
    x = [0, 100, 200, 300, 400, 500]
    y = [0.1, 0.9, 0.2, 0.6, 0.7, 0.8]  # a lucky spike at 100 must not count with window 3
    # smoothed: .1, .5, .4, .567, .5, .7
    assert stats.tasks_to_threshold(x, y, 0.5, window=3) == 100.0
    assert stats.tasks_to_threshold(x, y, 0.7, window=3) == 500.0
    assert stats.tasks_to_threshold(x, y, 0.7, window=1) == 100.0  # raw curve: the spike counts
    assert stats.tasks_to_threshold(x, y, 0.9, window=3) is None  # never reached -> None, not inf/0
    # unsorted input gives the same answer
    assert stats.tasks_to_threshold(x[::-1], y[::-1], 0.7, window=3) == 500.0
    assert stats.tasks_to_threshold([], [], 0.5) is None
    assert stats.tasks_to_threshold([0, 10], [0.95, 0.2], 0.9) == 0.0  # already above at the start


def test_curve_auc():
    assert stats.curve_auc([0, 10, 20], [0.0, 1.0, 1.0]) == pytest.approx(0.75)
    assert stats.curve_auc([5], [0.4]) == pytest.approx(0.4)
    assert stats.curve_auc([], []) is None


# ---- bootstrap ----------------------------------------------------------------------------------
def test_bootstrap_mean_ci_basic_and_degenerate():
    est = stats.bootstrap_mean_ci([0.2, 0.4, 0.6, 0.8])
    assert est.value == pytest.approx(0.5) and est.n == 4
    assert 0.2 <= est.low < 0.5 < est.high <= 0.8
    assert stats.bootstrap_mean_ci([0.2, 0.4, 0.6, 0.8]) == est  # deterministic (fixed seed)
    one = stats.bootstrap_mean_ci([0.3])
    assert one.value == 0.3 and math.isnan(one.low) and one.n == 1
    same = stats.bootstrap_mean_ci([0.5, 0.5, 0.5])
    assert (same.low, same.high) == (0.5, 0.5)
    assert stats.bootstrap_mean_ci([]).n == 0
    assert stats.bootstrap_mean_ci([None, 1.0, float("nan"), 3.0]).n == 2


def test_bootstrap_mean_ci_covers_the_true_mean_at_about_the_nominal_rate():
    rng = np.random.default_rng(1234)
    true_mean, trials, n = 2.0, 300, 25
    covered = 0
    for i in range(trials):
        sample = rng.exponential(true_mean, size=n)  # skewed on purpose
        est = stats.bootstrap_mean_ci(sample, n_resamples=1999, seed=i)
        covered += est.low <= true_mean <= est.high
    rate = covered / trials
    # percentile bootstrap on a skewed n=25 sample slightly under-covers; 300 trials: sd ~ 0.013
    assert 0.88 <= rate <= 0.98, rate


def test_bootstrap_ratio_ci_covers_the_true_ratio():
    rng = np.random.default_rng(99)
    covered, trials = 0, 200
    for i in range(trials):
        base = rng.normal(2500, 400, size=20)
        dual = rng.normal(500, 100, size=15)
        r, lo, hi = stats.bootstrap_ratio_ci(base, dual, n_resamples=1999, seed=i)
        covered += lo <= 5.0 <= hi
    assert 0.88 <= covered / trials <= 0.99, covered / trials


def test_bootstrap_ratio_resamples_groups_independently():
    r, lo, hi = stats.bootstrap_ratio_ci([100, 200, 300], [50, 50, 50, 50])
    assert r == pytest.approx(4.0)
    assert 2.0 <= lo < 4.0 < hi <= 6.0  # only the numerator varies: CI = its CI / 50
    r, lo, hi = stats.bootstrap_ratio_ci([100], [50, 60])
    assert r == pytest.approx(100 / 55) and math.isnan(lo)


def test_censored_ratio_kinds():
    lim = [1000, 1000, 1000]
    est = stats.censored_ratio([800, 900, 1000], lim, [200, 300, 250], lim)
    assert est.kind == "estimate" and est.value == pytest.approx(900 / 250)
    assert est.low <= est.value <= est.high
    lb = stats.censored_ratio([800, None, None], lim, [200, 300, 250], lim)
    assert lb.kind == "lower_bound" and lb.value == pytest.approx((800 + 2000) / 3 / 250)
    assert lb.reached_num == 1 and lb.reached_den == 3
    ub = stats.censored_ratio([800, 900, 1000], lim, [200, None, 250], lim)
    assert ub.kind == "upper_bound"
    und = stats.censored_ratio([None, 900, 1000], lim, [200, None, 250], lim)
    assert und.kind == "undetermined"
    nr = stats.censored_ratio([None, None, None], lim, [200, 300, 250], lim)
    assert nr.kind == "not_reached" and math.isnan(nr.value)
    zero = stats.censored_ratio([100, 200], [1000, 1000], [0, 0], [1000, 1000])
    assert zero.kind == "insufficient" and "0 tasks" in zero.note
    one = stats.censored_ratio([100], [1000], [50, 60], [1000, 1000])
    assert one.kind == "insufficient" and math.isnan(one.low)


# ---- paired test ------------------------------------------------------------------------------
def test_paired_test_on_hand_made_pairs():
    a = [0.50, 0.60, 0.70, 0.80, 0.90, 0.65]
    b = [0.40, 0.45, 0.50, 0.55, 0.60, 0.60]
    res = stats.paired_test(a, b)
    assert res.n == 6 and res.wins == 6 and res.losses == 0
    assert res.mean_diff == pytest.approx(np.mean(np.subtract(a, b)))
    assert res.wilcoxon_p == pytest.approx(0.03125)  # exact: all 6 positive -> 2 / 2**6
    assert res.ttest_p < 0.05
    assert res.diff_low > 0
    three = stats.paired_test([1, 2, 3], [0, 0, 0])
    assert three.wilcoxon_p == pytest.approx(0.25)  # the smallest possible with 3 pairs
    none = stats.paired_test([0.5, 0.5], [0.5, 0.5])
    assert none.mean_diff == 0 and math.isnan(none.wilcoxon_p) and math.isnan(none.ttest_p)
    with pytest.raises(ValueError):
        stats.paired_test([1, 2], [1])


# ---- correlation ------------------------------------------------------------------------------
def test_pearson_with_ci():
    x = [1, 2, 3, 4, 5, 6, 7, 8]
    y = [2.1, 3.9, 6.2, 7.8, 10.1, 12.2, 13.8, 16.1]
    c = stats.pearson_with_ci(x, y)
    assert c.r > 0.99 and c.low > 0.9 and c.high <= 1.0 and c.p < 1e-5 and c.n == 8
    assert c.low < c.r < c.high
    neg = stats.pearson_with_ci(x, [-v for v in y])
    assert neg.r == pytest.approx(-c.r)
    small = stats.pearson_with_ci([1, 2, 3], [1, 2, 4])
    assert math.isnan(small.r) and small.n == 3
    const = stats.pearson_with_ci([1, 2, 3, 4], [1, 1, 1, 1])
    assert math.isnan(const.r)


def test_learning_rate_windows():
    val = [(0, 0, 0.1), (10, 80, 0.2), (20, 160, 0.4), (30, 240, 0.5)]
    wm = [(5, 0.2), (10, 0.4), (15, 0.5), (20, 0.7), (25, 0.9)]
    pts = stats.learning_rate_windows(val, wm, window=10)
    # N=0: no wm row in (-10, 0] -> skipped; N=10: acc mean(0.2, 0.4), slope (0.4-0.2)/80;
    # N=20: acc mean(0.5, 0.7), slope (0.5-0.4)/80; N=30: no later evaluation.
    assert [p[0] for p in pts] == [10.0, 20.0]
    assert pts[0][1] == pytest.approx(0.3) and pts[0][2] == pytest.approx(0.2 / 80)
    assert pts[1][1] == pytest.approx(0.6) and pts[1][2] == pytest.approx(0.1 / 80)


# ---- token accuracy ---------------------------------------------------------------------------
def _word_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = ["<unk>", "please", "provide", "your", "account", "number", "ssn", "and", "thank", "you"]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return tok


def test_token_accuracy_on_a_known_tokenisation():
    tok = _word_tokenizer()
    target = tok.encode("please provide your account number").ids
    predicted = tok.encode("please provide your ssn number").ids
    assert target == [1, 2, 3, 4, 5]
    assert stats.token_accuracy(predicted, target) == pytest.approx(4 / 5)
    # a masked position (the prompt) is not counted; a short prediction counts missing tokens wrong
    assert stats.token_accuracy(predicted, [-100, 2, 3, 4, 5]) == pytest.approx(3 / 4)
    assert stats.token_accuracy(tok.encode("please provide").ids, target) == pytest.approx(2 / 5)
    assert math.isnan(stats.token_accuracy([1], [-100]))


def test_argmax_token_accuracy_from_logits():
    labels = np.array([[1, 2, 3, -100]])
    logits = np.zeros((1, 4, 6))
    for t, tok in enumerate([1, 2, 5, 0]):
        logits[0, t, tok] = 1.0
    assert stats.argmax_token_accuracy(logits, labels) == pytest.approx(2 / 3)
    torch = pytest.importorskip("torch")
    assert stats.argmax_token_accuracy(torch.tensor(logits), torch.tensor(labels)) == pytest.approx(2 / 3)
    with pytest.raises(ValueError):
        stats.argmax_token_accuracy(logits, labels[:, :3])


@pytest.mark.parametrize(("low", "high", "side"), [
    (0.01, 0.2, 1), (-0.2, -0.01, -1), (-0.1, 0.1, 0), (0.0, 0.1, 0), (-0.1, 0.0, 0),
    (math.nan, -0.1, -1), (0.1, math.nan, 1), (None, None, 0), (math.nan, math.nan, 0), (math.inf, math.inf, 0),
])
def test_interval_side_says_which_side_of_zero_an_interval_lies_on(low, high, side):
    from lfo_cli.report.format import interval_side

    assert interval_side(low, high) == side

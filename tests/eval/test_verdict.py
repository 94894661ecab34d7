"""The one verdict rule (lfo_cli/report/verdict.py) on hand-made paired differences: the t-test decides and
Wilcoxon only checks it, the positive control faces the family's Holm-adjusted test, a Wilcoxon test that cannot
reach alpha at this many pairs says so, and a seed whose removal flips a verdict is named."""

import pytest

from lfo_cli.report import verdict
from lfo_cli.report.sensitivity import adjusted_difference, leave_one_out

# five pairs clearly above 0 and one just below: the t-test sees the mean, Wilcoxon the one negative sign
MOSTLY_UP = [1.0, 1.1, 0.9, 1.05, 0.95, -0.1]


def test_the_t_test_decides_when_wilcoxon_disagrees_either_way():
    v = verdict.one(MOSTLY_UP)
    assert v.side == 1 and v.phrase() == "higher (t-test p 0.007)"
    assert v.notes() == ["Wilcoxon disagrees (p 0.062)"]  # exact: 4/64 with one negative of the smallest rank
    # every pair positive, one huge: Wilcoxon's p is its floor for 8 pairs (2/256), the t-test sees the spread
    v = verdict.one([0.1, 0.2, 0.1, 0.3, 0.1, 0.2, 0.1, 20.0])
    assert v.side == 0 and v.phrase() == "no effect detected (t-test p 0.32)"
    assert v.notes() == ["Wilcoxon disagrees (p 0.0078)"]
    assert v.word("faster", "slower") == "no effect detected"
    assert verdict.one([-x for x in MOSTLY_UP]).word("faster", "slower") == "slower"


def test_the_positive_control_is_judged_inside_the_family_by_the_same_test():
    control = [-1.0, -1.2, -0.2, -0.9, 0.3, -1.1]
    alone = verdict.one(control)
    assert alone.p_raw == pytest.approx(0.038, abs=5e-4)
    assert alone.control_phrase("lower") == "detected (t-test p 0.038)"
    assert alone.control_phrase("higher") == "moved the other way (t-test p 0.038)"
    # in a family with a null arm, Holm doubles the smallest p: the control is not detected, and the report says
    # that its unadjusted interval excluded 0
    fam = verdict.family({"control": control, "arm": [0.5, -0.4, 0.3, -0.6, 0.1, 0.2]})
    assert fam["control"].p == pytest.approx(2 * alone.p_raw)
    assert fam["control"].control_phrase("lower") == "not detected (Holm p 0.076)"
    assert "its unadjusted interval excludes 0, Holm's correction over the family does not" in fam["control"].notes()
    # a declared arm without runs still counts in the family, as p = 1
    assert verdict.family({"control": control}, size=2)["control"].p == pytest.approx(fam["control"].p)


@pytest.mark.parametrize(("n", "family", "reachable"), [(5, 1, False), (6, 1, True), (6, 2, False), (8, 5, True),
                                                        (8, 7, False)])
def test_a_wilcoxon_test_that_cannot_reach_alpha_says_so(n, family, reachable):
    assert verdict.wilcoxon_floor(n, family) == pytest.approx(min(1.0, family * 2.0 ** (1 - n)))
    diffs = [1.0 + 0.01 * i for i in range(n)]  # every pair up: Wilcoxon's p is its floor
    v = verdict.family({"a": diffs, **{f"other{k}": [-0.1, 0.1] * (n // 2) + [0.0] * (n % 2)
                                       for k in range(family - 1)}})["a"]
    assert v.wilcoxon_reachable is reachable
    cannot = [x for x in v.notes() if x.startswith("Wilcoxon cannot reach 0.05")]
    assert bool(cannot) is not reachable
    if cannot:
        assert f"with {n} pairs" in cannot[0] and f"{verdict.wilcoxon_floor(n, family):.3g}" in cannot[0]


def test_too_few_pairs_and_no_spread_are_named_as_such():
    assert verdict.one([0.1]).phrase() == "not tested (fewer than 2 pairs)"
    assert verdict.one([0.1]).control_phrase("higher") == "not tested (fewer than 2 pairs)"
    shift = verdict.one([0.2, 0.2, 0.2])  # no spread: the t-test's limit
    assert shift.phrase() == "higher (t-test p 0)"
    assert "every pair differs by 0.2: no spread, the t-test's limit (p -> 0)" in shift.notes()
    assert verdict.one([0.0, 0.0, 0.0]).phrase() == "no effect detected (t-test p 1)"


def test_a_seed_whose_removal_flips_a_verdict_is_named():
    # five pairs up, one far down: with it no effect is detected, without it the arm is higher
    diffs = {"a": {1: 1.0, 2: 1.1, 3: 0.9, 4: 1.05, 5: 0.95, 6: -3.0},
             "b": {1: 0.1, 2: -0.1, 3: 0.05, 4: -0.05, 5: 0.0, 6: 0.02}}
    rows = leave_one_out(diffs, alpha=0.05, size=2)
    assert len(rows) == 12 and all(r["pairs"] == 5 for r in rows)
    flips = [(r["arm"], r["left_out"]) for r in rows if r["changes_verdict"]]
    assert flips == [("a", 6)]
    assert next(r for r in rows if r["arm"] == "a" and r["left_out"] == 6)["verdict"].startswith("higher (Holm p")


def test_the_covariate_adjusted_difference_is_the_intercept():
    # d = 0.1 + 0.5 c exactly, plus a small wobble: the intercept is ~0.1, the slope ~0.5
    c = [0.0, 0.2, -0.1, 0.4, 0.1, -0.3]
    d = [0.1 + 0.5 * x + e for x, e in zip(c, [0.01, -0.01, 0.0, 0.01, -0.01, 0.0], strict=True)]
    got = adjusted_difference(d, c)
    assert got["diff"] == pytest.approx(0.1, abs=0.01) and got["slope"] == pytest.approx(0.5, abs=0.05)
    assert got["low"] < got["diff"] < got["high"] and got["p"] < 0.01
    assert adjusted_difference(d, [0.3] * 6)["diff"] != adjusted_difference(d, [0.3] * 6)["diff"]  # NaN: no spread


def test_a_p_that_two_digits_would_print_as_alpha_gets_the_digits_that_tell_it_apart():
    v = verdict.Verdict(n=8, diff=-0.04, low=-0.06, high=-0.01, p_raw=0.02, p=0.0502, wilcoxon_p_raw=0.02,
                        wilcoxon_p=0.05, family=3)
    assert v.phrase() == "no effect detected (Holm p 0.0502)"
    assert v.__class__(**{**v.__dict__, "p": 0.04996}).phrase() == "lower (Holm p 0.04996)"
    assert v.__class__(**{**v.__dict__, "p": 0.019}).phrase() == "lower (Holm p 0.019)"

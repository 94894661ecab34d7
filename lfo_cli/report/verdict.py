"""The one verdict rule of every lfo report, written once: which test decides whether an arm moved an outcome,
how the positive control is judged, and what a test that cannot reach alpha at this many pairs reports. The
declared comparisons, the training-d2 section, the sample-efficiency and transfer sentences, the index and the
tables of docs/study.md and the README word a verdict through :class:`Verdict`.

The rule:

- **The paired t-test decides.** Each comparison is treatment minus reference, paired by seed. The comparisons
  one table makes against one reference form a family (a declared plan's arms, the positive control included);
  their t-test p-values are Holm-adjusted over it, an arm without a test counting as p = 1. An arm is *higher*
  or *lower* when its adjusted p is below alpha, on the side of its mean difference (its unadjusted 95%
  t-interval then excludes 0 on that side too). Otherwise *no effect detected*; when the unadjusted interval
  excludes 0 and the correction takes that away, the verdict says so.
- **Wilcoxon's signed-rank test is a check, never the decider** (it does not assume normal differences, and at a
  few pairs it has little power). Its Holm-adjusted p is reported, and the verdict notes when it disagrees. With
  n pairs the exact two-sided test cannot fall below 2 / 2^n, so no Holm-adjusted p over m comparisons can fall
  below m * 2 / 2^n: when that floor is at or above alpha the report says the test cannot reach alpha at this n
  instead of printing a p-value that could never pass (6 pairs over 2 arms: floor 0.0625).
- **The positive control is judged inside the Holm family, by the same test.** Its job is to show that the test
  the other arms face can see an effect of its size; the other arms face the Holm-adjusted test, so the control
  must pass that test, not an easier one. It is *detected* when its verdict lies on the side it was chosen for.
- **No test** with fewer than 2 pairs: the verdict says so instead of a p-value. Every pair differing by the same
  nonzero amount (a t statistic of x / 0) is the t-test's limit, p -> 0: an effect, said with that reason; every
  pair differing by 0 is p = 1.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from lfo_cli import stats
from lfo_cli.eval import comparison
from lfo_cli.report.format import finite, interval_side

ALPHA = 0.05


def short_p(p: float) -> str:
    """A p-value in a verdict phrase: two significant digits (0.019, 0.00032)."""
    return "n/a" if not finite(p) else f"{p:.2g}"


def wilcoxon_floor(n: int, family: int = 1) -> float:
    """The smallest Holm-adjusted p an exact two-sided Wilcoxon signed-rank test can give with ``n`` pairs in a
    family of ``family`` comparisons: every difference on one side gives p = 2 / 2^n, and Holm's first step
    multiplies the smallest p of the family by its size."""
    return min(1.0, family * 2.0 ** (1 - n)) if n >= 1 else 1.0


@dataclass(frozen=True)
class Verdict:
    n: int  # seed pairs
    diff: float  # mean paired difference, treatment - reference
    low: float  # its unadjusted 95% t-interval
    high: float
    p_raw: float  # the paired t-test's p
    p: float  # ... Holm-adjusted over the family: the deciding p
    wilcoxon_p_raw: float
    wilcoxon_p: float  # Holm-adjusted
    family: int
    alpha: float = ALPHA
    why_untested: str = ""  # set when there is no t-test: fewer than 2 pairs
    no_spread: bool = False  # every pair differs by the same nonzero amount: the t-test's limit, p -> 0

    @property
    def tested(self) -> bool:
        return not self.why_untested

    @property
    def side(self) -> int:
        """+1: higher than the reference; -1: lower; 0: no effect detected (or not tested)."""
        if not self.tested or not finite(self.p) or self.p >= self.alpha:
            return 0
        return 1 if self.diff > 0 else -1

    @property
    def raw_side(self) -> int:
        """The side of the unadjusted 95% t-interval (0 when it holds 0)."""
        return interval_side(self.low, self.high)

    @property
    def wilcoxon_reachable(self) -> bool:
        return wilcoxon_floor(self.n, self.family) < self.alpha

    def p_words(self) -> str:
        """The deciding p with its name: "Holm p 0.019" (a family) or "t-test p 0.019" (one comparison); a p that
        two digits would print as alpha gets the digits that tell it from alpha (0.0502, not 0.05)."""
        text, digits = short_p(self.p), 3
        while finite(self.p) and text == f"{self.alpha:g}" and self.p != self.alpha and digits <= 6:
            text, digits = f"{self.p:.{digits}g}", digits + 1
        return f"{'Holm p' if self.family > 1 else 't-test p'} {text}"

    def word(self, higher: str = "higher", lower: str = "lower", none: str = "no effect detected") -> str:
        if not self.tested:
            return "not tested"
        return {1: higher, -1: lower}.get(self.side, none)

    def phrase(self, higher: str = "higher", lower: str = "lower", none: str = "no effect detected") -> str:
        """The verdict as every table, docs/study.md and the README word it: "lower (Holm p 0.019)"."""
        if not self.tested:
            return f"not tested ({self.why_untested})"
        return f"{self.word(higher, lower, none)} ({self.p_words()})"

    def control_phrase(self, expected: str) -> str:
        """A positive control's verdict (``expected``: "higher" or "lower", the side it was chosen for)."""
        if not self.tested:
            return f"not tested ({self.why_untested})"
        if self.side == 0:
            return f"not detected ({self.p_words()})"
        moved = "higher" if self.side > 0 else "lower"
        return f"detected ({self.p_words()})" if moved == expected else f"moved the other way ({self.p_words()})"

    def notes(self) -> list[str]:
        """What the deciding test leaves out: an unadjusted interval that the correction overrules, and what
        Wilcoxon's check says (agreement is not noted)."""
        if not self.tested:
            return []
        out = []
        if self.no_spread:
            out.append(f"every pair differs by {self.diff:.3g}: no spread, the t-test's limit (p -> 0)")
        if self.side == 0 and self.raw_side != 0 and self.family > 1:
            out.append("its unadjusted interval excludes 0, Holm's correction over the family does not")
        if not self.wilcoxon_reachable:
            out.append(f"Wilcoxon cannot reach {self.alpha:g} with {self.n} pairs"
                       + (f" over {self.family} comparisons" if self.family > 1 else "")
                       + f" (floor {wilcoxon_floor(self.n, self.family):.3g})")
        elif finite(self.wilcoxon_p) and (self.wilcoxon_p < self.alpha) != (self.side != 0):
            out.append(f"Wilcoxon disagrees ({'Holm ' if self.family > 1 else ''}p {short_p(self.wilcoxon_p)})")
        return out

    def as_dict(self) -> dict:
        return {"verdict": self.phrase(), "verdict_side": self.side, "verdict_notes": "; ".join(self.notes())}


def _paired(d: list[float]) -> tuple[float, float]:
    """(t-test p, Wilcoxon p) of paired differences rounded to 12 decimals (a constant shift must not read as a
    spread of 1e-17 and a p of 1e-15). All-zero differences give p = 1 for both: no evidence of a difference."""
    if len(d) < 2:
        return math.nan, math.nan
    if set(d) == {0.0}:
        return 1.0, 1.0
    test = stats.paired_test(d, [0.0] * len(d))
    return (test.ttest_p if len(set(d)) > 1 else 0.0), test.wilcoxon_p  # no spread: the t-test's limit, p -> 0


def family(diffs: dict[str, Sequence[float]], *, alpha: float = ALPHA, size: int | None = None) -> dict[str, Verdict]:
    """The verdict of each comparison in one family: ``diffs`` maps a comparison's name to its paired differences
    (treatment - reference, one per seed pair); ``size`` (default: len(diffs)) counts comparisons of the family
    that could not be run (an arm without finished runs), each as p = 1 in Holm's adjustment."""
    size = max(size or len(diffs), len(diffs), 1)
    rounded = {k: [round(float(x), 12) for x in v if finite(x)] for k, v in diffs.items()}
    tests = {k: _paired(d) for k, d in rounded.items()}
    pad = [1.0] * (size - len(diffs))
    adj = {}
    for i, key in enumerate(("t", "w")):
        raw = [p[i] if finite(p[i]) else 1.0 for p in tests.values()] + pad
        adj[key] = dict(zip(tests, stats.holm(raw), strict=False))
    out = {}
    for k, d in rounded.items():
        ci = comparison.paired_diff_ci(d, [0.0] * len(d))
        t, w = tests[k]
        why = "fewer than 2 pairs" if len(d) < 2 else ""
        out[k] = Verdict(n=len(d), diff=ci.value, low=ci.low, high=ci.high, p_raw=t,
                         p=adj["t"][k] if finite(t) else math.nan, wilcoxon_p_raw=w,
                         wilcoxon_p=adj["w"][k] if finite(w) else math.nan, family=size, alpha=alpha,
                         why_untested=why, no_spread=len(d) >= 2 and len(set(d)) == 1 and d[0] != 0)
    return out


def one(d: Sequence[float], alpha: float = ALPHA) -> Verdict:
    """The verdict of a single comparison (a family of one: the unadjusted t-test decides)."""
    return family({"": d}, alpha=alpha)[""]

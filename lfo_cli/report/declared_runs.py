"""A declared study's per-run measures (:mod:`lfo_cli.report.declared` compares them): each run's curve of the
primary and secondary outcomes vs tasks seen, its statistic (the last evaluation, or the mean over the run),
its step 0 and gain, its median world-model / RL gradient ratio, and the primary outcome per a validation
episode field at the last evaluation."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from lfo_cli import run_record as rr
from lfo_cli import stats
from lfo_cli.report.format import finite
from lfo_cli.report.load import Run, validation_episodes
from lfo_cli.report.plan import Plan


@dataclass
class ArmRun:
    run: Run
    x: list[float]  # tasks seen at each evaluation of the primary outcome
    y: list[float]  # the primary outcome there
    sec_x: list[float]
    sec_y: list[float]
    start: dict[str, float]
    final: dict[str, float]
    final_step: int | None
    wm_over_rl: float | None  # the median over the run's probed steps
    statistic: str = "final"

    @property
    def primary(self) -> float:
        """The primary statistic: the outcome's last evaluation, or the mean over the run (AUC vs tasks seen)."""
        return self.primary_final if self.statistic == "final" else _auc(self.x, self.y)

    @property
    def seed(self):
        return self.run.seed

    @property
    def primary_start(self) -> float:
        return self.y[0] if self.x and self.x[0] == 0 else math.nan

    @property
    def primary_final(self) -> float:
        return self.y[-1] if self.y else math.nan

    @property
    def secondary_auc(self) -> float:
        return _auc(self.sec_x, self.sec_y)

    @property
    def gain_auc(self) -> float:
        """Area under (primary - its step-0 value) vs tasks seen, per task: what RL added to the warm start."""
        if not finite(self.primary_start) or len(self.x) < 2:
            return math.nan
        return _auc(self.x, [v - self.primary_start for v in self.y])


def _auc(x: list[float], y: list[float]) -> float:
    """:func:`lfo_cli.stats.curve_auc`, NaN for an empty curve."""
    auc = stats.curve_auc(x, y) if x else None
    return math.nan if auc is None else auc


def _curve(run: Run, metric: str) -> tuple[list[float], list[float], list[dict]]:
    rows = sorted((r for r in run.rows if finite(r.get(metric)) and rr.TASKS_SEEN in r), key=lambda r: r[rr.STEP])
    return [float(r[rr.TASKS_SEEN]) for r in rows], [float(r[metric]) for r in rows], rows


def arm_run(run: Run, plan: Plan) -> ArmRun | None:
    x, y, rows = _curve(run, plan.primary)
    if not rows:
        return None
    sx, sy, _ = _curve(run, plan.secondary) if plan.secondary else ([], [], [])
    ratios = [float(r[rr.GRAD_WM_OVER_RL]) for r in run.rows if finite(r.get(rr.GRAD_WM_OVER_RL))]
    return ArmRun(run, x, y, sx, sy, dict(rows[0]) if rows[0][rr.STEP] == 0 else {}, dict(rows[-1]),
                  int(rows[-1][rr.STEP]), statistics.median(ratios) if ratios else None, plan.statistic)


def breakdown(a: ArmRun, plan: Plan) -> dict[str, tuple[int, int]] | None:
    """{value: (successes, episodes)} at the primary outcome's last evaluation, by the first element of the
    episodes' ``plan.by`` field, from the validation file of its split (``heldout/...`` ->
    validation/heldout_step_N.json), difficulty filtered as the metric says; None when the file or the
    field is missing (runs recorded before it was kept)."""
    split, _, rest = plan.primary.partition("/")
    if a.final_step is None or split not in (rr.VAL, rr.HELDOUT):
        return None
    episodes = validation_episodes(a.run.path, a.final_step, split)
    if episodes is None:
        return None
    difficulty = rest.rsplit("/d", 1)[-1] if "/d" in rest else None
    out: dict[str, list[int]] = {}
    for e in episodes:
        value = e.get(plan.by) if isinstance(e, dict) else None
        if not value:
            return None
        if difficulty is not None and str(e.get("difficulty")) != difficulty:
            continue
        tally = out.setdefault(str(value[0] if isinstance(value, list) else value), [0, 0])
        tally[0] += bool(e.get("success"))
        tally[1] += 1
    return {k: (v[0], v[1]) for k, v in sorted(out.items())} or None

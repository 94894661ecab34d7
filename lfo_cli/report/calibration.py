"""Calibrating lambda: per coupling, the largest world-model weight that leaves RL's run as stable as the
baseline's and still sends the policy a measurable share of gradient.

The rule (the reading study's, committed before its grid):

1. A *stability band* from the baseline runs (``wm.coef`` 0, at least two seeds): for each stability
   metric, the range of the baseline seeds' run-level values, widened by ``tolerance`` x the baseline
   mean on each side. Metrics: the policy's token entropy (``entropy``), the valid tool-call rate at
   validation (``val/valid_tool_call_rate``) and the share of groups with reward variance
   (``1 - frac_reward_zero_std``, GRPO's only source of policy gradient). A run-level value is the mean
   of the metric over the run's second half (steps past half its last step), where a world-model term
   that destabilises RL shows.
2. *Measurable, not dominant gradient*: the median of ``grad_norm/wm_over_rl`` (the world-model part of the
   policy's gradient over the RL part, on probed steps) is at least ``min_ratio`` and at most ``max_ratio``
   (1: RL stays the larger part of the policy's gradient; above it the world model steers the policy, the
   observation study's uncalibrated arms, which the band's metrics alone do not flag).
3. Per coupling, the chosen lambda is the largest rung inside the band on every metric whose gradient is
   measurable and not dominant; none qualifies -> no lambda (the report says so). A rung probed on several
   seeds is judged on the mean of its seeds' run-level values and the median over all their probed steps.

:func:`calibrate` applies it to loaded runs; :func:`calibration_section` writes it into a report when the
runs hold a calibration (>= 2 baselines and some run with ``grad_norm/wm_over_rl``).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

from lfo_cli import run_record as rr
from lfo_cli.report.load import Run

WM_OVER_RL = rr.GRAD_WM_OVER_RL


@dataclass(frozen=True)
class CalibrationRule:
    metrics: tuple[str, ...] = (rr.ENTROPY, rr.VAL_VALID_TOOL_CALL_RATE, "groups_with_variance")
    tolerance: float = 0.10  # the band's widening, a share of the baseline mean on each side
    min_ratio: float = 0.01  # median world-model / RL gradient that counts as measurable
    max_ratio: float | None = 1.0  # ... and the most it may be: RL stays the larger part (None: no ceiling)
    min_baselines: int = 2


def _value(row: dict, metric: str) -> float | None:
    if metric == "groups_with_variance":
        v = row.get(rr.FRAC_REWARD_ZERO_STD)
        return None if v is None else 1.0 - float(v)
    v = row.get(metric)
    return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None


def second_half_mean(rows: list[dict], metric: str) -> float | None:
    """The mean of ``metric`` over rows past half the run's last step (None where it was never logged there)."""
    last = max((r.get(rr.STEP, 0) for r in rows), default=0)
    values = [v for r in rows if r.get(rr.STEP, 0) > last / 2 and (v := _value(r, metric)) is not None]
    return sum(values) / len(values) if values else None


def stability_band(baselines: list[list[dict]], rule: CalibrationRule) -> dict[str, tuple[float, float]]:
    """metric -> (low, high): the baseline seeds' range widened by ``rule.tolerance`` x their mean."""
    band = {}
    for metric in rule.metrics:
        values = [v for rows in baselines if (v := second_half_mean(rows, metric)) is not None]
        if len(values) >= rule.min_baselines:
            margin = rule.tolerance * abs(statistics.fmean(values))
            band[metric] = (min(values) - margin, max(values) + margin)
    return band


def median_ratio(rows: list[dict]) -> float | None:
    values = [float(r[WM_OVER_RL]) for r in rows if isinstance(r.get(WM_OVER_RL), (int, float))]
    return statistics.median(values) if values else None


def calibrate(probes: list[dict[str, Any]], baselines: list[list[dict]],
              rule: CalibrationRule = CalibrationRule()) -> tuple[list[dict[str, Any]], dict[str, Any], dict]:
    """``probes``: one dict per probe run with ``coupling``, ``coef`` and its metric ``rows``. Returns the
    table (one row per probe: each metric's value and whether it is in the band, the median ratio, whether
    it qualifies), the chosen lambda per coupling (None where no rung qualifies) and the band."""
    band = stability_band(baselines, rule)
    rungs: dict[tuple, list[dict]] = {}
    for probe in probes:
        rungs.setdefault((probe["coupling"], probe["coef"]), []).append(probe)
    table = []
    for (coupling, coef), group in sorted(rungs.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
        seeds = sorted((p.get("seed") for p in group), key=str)
        row: dict[str, Any] = {"coupling": coupling, "coef": coef, "seed": seeds[0] if len(seeds) == 1 else
                               ",".join(str(x) for x in seeds), "seeds": len(group)}
        inside = bool(band)
        for metric in rule.metrics:
            values = [v for p in group if (v := second_half_mean(p["rows"], metric)) is not None]
            value = statistics.fmean(values) if values else None
            lo_hi = band.get(metric)
            ok = value is not None and lo_hi is not None and lo_hi[0] <= value <= lo_hi[1]
            row[metric], row[f"{metric} in band"] = value, ok
            inside = inside and ok
        ratio = median_ratio([r for p in group for r in p["rows"]])
        row["median wm_over_rl"] = ratio
        row["in band"] = inside
        row["qualifies"] = (inside and ratio is not None and ratio >= rule.min_ratio
                            and (rule.max_ratio is None or ratio <= rule.max_ratio))
        table.append(row)
    chosen: dict[str, Any] = {}
    for coupling in sorted({p["coupling"] for p in probes}):
        rungs = [r["coef"] for r in table if r["coupling"] == coupling and r["qualifies"]]
        chosen[coupling] = max(rungs) if rungs else None
    return table, chosen, band


def applies(train: list[Run]) -> bool:
    baselines = [r for r in train if r.role == "baseline"]
    return len(baselines) >= CalibrationRule().min_baselines and any(
        any(WM_OVER_RL in row for row in r.rows) for r in train if r.role != "baseline")


def calibration_section(rep, train: list[Run], pd) -> None:
    """Append the calibration to ``rep.md``, its table as calibration.csv, the choice to the summary."""
    rule = CalibrationRule()
    baselines = [r.rows for r in train if r.role == "baseline"]
    probes = [{"coupling": r.config.get(rr.WM_COUPLING), "coef": float(r.config.get(rr.WM_COEF)), "seed": r.seed,
               "rows": r.rows} for r in train if r.role != "baseline"]
    table, chosen, band = calibrate(probes, baselines, rule)
    rep.writer.csv("calibration.csv", pd.DataFrame(table))
    rep.summary["calibration"] = {"chosen": chosen, "band": {k: list(v) for k, v in band.items()},
                                  "rule": {"tolerance": rule.tolerance, "min_ratio": rule.min_ratio,
                                           "max_ratio": rule.max_ratio}}
    ceiling = f" and at most {rule.max_ratio:g} (RL stays the larger part)" if rule.max_ratio is not None else ""
    lines = ["## Calibration: lambda per coupling\n",
             f"The stability band from {len(baselines)} baseline runs (each metric's range over their second "
             f"halves, widened by {rule.tolerance:.0%} of the mean): "
             + "; ".join(f"{m} [{lo:.3f}, {hi:.3f}]" for m, (lo, hi) in band.items()) + ". A rung qualifies when its "
             f"run stays inside on every metric and the median world-model / RL gradient ratio is >= {rule.min_ratio:g}"
             f"{ceiling}; a rung probed on several seeds is judged on their mean.\n",
             "| coupling | lambda | seeds | " + " | ".join(rule.metrics) + " | median wm/rl | qualifies |",
             "|---|---:|---:|" + "---:|" * len(rule.metrics) + "---:|---|"]
    for r in table:
        cells = [f"{r[m]:.3f}{'' if r[f'{m} in band'] else ' (out)'}" if r[m] is not None else "-" for m in rule.metrics]
        ratio = "-" if r["median wm_over_rl"] is None else f"{r['median wm_over_rl']:.3g}"
        lines.append(f"| {r['coupling']} | {r['coef']:g} | {r['seeds']} | " + " | ".join(cells) + f" | {ratio} | "
                     f"{'yes' if r['qualifies'] else 'no'} |")
    rep.md.append(lines[0])
    rep.md.append(lines[1])
    rep.md.append("\n".join(lines[2:]) + "\n")
    rep.md.append("\n".join(f"- `{c}`: " + (f"lambda {v:g}" if v is not None else "no rung qualifies (none stays in the "
                                                                                "band with measurable, not dominant "
                                                                                "gradient)")
                            for c, v in chosen.items()) + "\n")

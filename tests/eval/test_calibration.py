"""The calibration rule on synthetic probe rows: the band from baseline seeds, measurable gradient, the choice."""

from __future__ import annotations

import pytest

from lfo_cli.report.calibration import CalibrationRule, calibrate, second_half_mean, stability_band


def rows(entropy: float, valid: float, zero_std: float, ratio: float | None = None, steps: int = 40) -> list[dict]:
    """A run's metrics rows: first-half values far off (they must not count), second half at the given ones."""
    out = []
    for step in range(1, steps + 1):
        late = step > steps / 2
        row = {"step": step, "entropy": entropy if late else 9.0, "frac_reward_zero_std": zero_std if late else 0.0}
        if step % 10 == 0:
            row["val/valid_tool_call_rate"] = valid if late else 0.1
            if ratio is not None:
                row["grad_norm/wm_over_rl"] = ratio
        out.append(row)
    return out


BASELINES = [rows(0.50, 0.95, 0.40), rows(0.60, 0.97, 0.50)]


def test_the_band_is_the_baselines_second_half_range_widened_by_the_tolerance():
    assert second_half_mean(BASELINES[0], "entropy") == pytest.approx(0.50)
    band = stability_band(BASELINES, CalibrationRule(tolerance=0.1))
    assert band["entropy"] == pytest.approx((0.50 - 0.055, 0.60 + 0.055))
    assert band["groups_with_variance"] == pytest.approx((0.50 - 0.055, 0.60 + 0.055))  # 1 - zero-std share
    assert band["val/valid_tool_call_rate"] == pytest.approx((0.95 - 0.096, 0.97 + 0.096))
    assert stability_band(BASELINES[:1], CalibrationRule()) == {}  # one seed makes no band


def test_the_largest_stable_rung_with_measurable_gradient_is_chosen_per_coupling():
    probes = [
        {"coupling": "stacked", "coef": 0.005, "rows": rows(0.55, 0.96, 0.45, ratio=0.004)},  # stable, too little gradient
        {"coupling": "stacked", "coef": 0.05, "rows": rows(0.58, 0.95, 0.42, ratio=0.2)},    # qualifies
        {"coupling": "stacked", "coef": 0.5, "rows": rows(2.5, 0.60, 0.90, ratio=3.0)},      # leaves the band
        {"coupling": "shared", "coef": 0.0005, "rows": rows(0.52, 0.96, 0.44, ratio=0.002)},
        {"coupling": "shared", "coef": 0.05, "rows": rows(3.0, 0.2, 1.0, ratio=1.0)},
    ]
    table, chosen, _ = calibrate(probes, BASELINES)
    assert chosen == {"shared": None, "stacked": 0.05}
    by = {(r["coupling"], r["coef"]): r for r in table}
    assert by[("stacked", 0.005)]["in band"] and not by[("stacked", 0.005)]["qualifies"]
    assert not by[("stacked", 0.5)]["entropy in band"] and not by[("stacked", 0.5)]["in band"]
    assert by[("stacked", 0.05)]["median wm_over_rl"] == pytest.approx(0.2)
    # in the band but the world model outweighs RL (the ceiling, 1): not calibrated; without the ceiling it is
    steering = probes[:2] + [{"coupling": "stacked", "coef": 0.5, "rows": rows(0.56, 0.96, 0.45, ratio=8.6)}]
    assert calibrate(steering, BASELINES)[1] == {"stacked": 0.05}
    assert calibrate(steering, BASELINES, CalibrationRule(max_ratio=None))[1] == {"stacked": 0.5}
    # a rung probed on two seeds is judged on their mean: one seed just outside, the other well inside
    two = [{"coupling": "shared", "coef": 0.005, "seed": 0, "rows": rows(0.44, 0.96, 0.45, ratio=0.05)},
           {"coupling": "shared", "coef": 0.005, "seed": 1, "rows": rows(0.56, 0.96, 0.45, ratio=0.07)}]
    assert calibrate(two[:1], BASELINES)[1] == {"shared": None}
    table, chosen, _ = calibrate(two, BASELINES)
    assert chosen == {"shared": 0.005} and table[0]["seeds"] == 2 and table[0]["entropy"] == pytest.approx(0.50)
    # a probe without the ratio (never probed, or no reward variance) cannot qualify
    table, chosen, _ = calibrate([{"coupling": "separate", "coef": 0.5, "rows": rows(0.55, 0.96, 0.45)}], BASELINES)
    assert chosen == {"separate": None} and table[0]["median wm_over_rl"] is None


def test_the_report_shows_the_gradient_split_and_the_calibration_only_when_runs_log_it(tmp_path, make_run):
    import json

    from lfo_cli.report.build import build_report

    runs = tmp_path / "runs"
    for seed in (0, 1):
        make_run(runs, f"base_s{seed}", seed=seed, coef=0.0, jump_at=None)
    plain = build_report([runs], tmp_path / "plain")
    assert "wm_over_rl.csv" not in plain["files"] and "calibration.csv" not in plain["files"]
    dual = make_run(runs, "stacked_s0", seed=0, coef=0.05, jump_at=None, extra={"wm.coupling": "stacked"})
    rows = [json.loads(line) for line in (dual / "metrics.jsonl").read_text().splitlines()]
    for i, row in enumerate(rows):
        if row.get("step", 0) % 5 == 0 and "grad_norm/policy" in row:
            row.update({"grad_norm/policy_from_rl": 0.1, "grad_norm/wm_over_rl": 0.02 * (1 + i % 3)})
    (dual / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = build_report([runs], tmp_path / "with")
    assert {"wm_over_rl.csv", "wm_over_rl.png", "calibration.csv"} <= set(summary["files"])
    index = (tmp_path / "with" / "index.md").read_text()
    assert "### The policy's gradient: world model against RL" in index and "probed steps" in index
    assert "## Calibration: lambda per coupling" in index and "stacked" in summary["calibration"]["chosen"]

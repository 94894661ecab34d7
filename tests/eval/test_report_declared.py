"""A declared study's section of `lfo report` (plan.yaml beside the runs) on hand-made run dirs with known
answers: the paired primary difference, Holm over the arms, the positive control's verdict, the mechanism
and per-department tables, and one error line for a bad plan."""

from __future__ import annotations

import csv
import gzip
import json
import math
import sys
from pathlib import Path

import pytest
import yaml

from lfo_cli.errors import LfoError
from lfo_cli.report.build import build_report
from lfo_cli.report.plan import load_plan
from lfo_cli.stats import holm

sys.path.insert(0, str(Path(__file__).parent))
from run_files import rows_by, write_training_run  # noqa: E402

REPO = Path(__file__).resolve().parents[2]

SEEDS = tuple(range(8))
PLAN = {
    "title": "The test study",
    "primary": "heldout/success/d2",
    "secondary": "val/success/d2",
    "smallest_effect": 0.06,
    "mechanism": ["heldout/probe_rate"],
    "by": "departments",
    "reference": "baseline",
    "positive_control": "bonus",
    "arms": {"baseline": {"wm.coef": 0, "env.probe_bonus": 0},
             "bonus": {"wm.coef": 0, "env.probe_bonus": 0.2},
             "shared": {"wm.coef": 0.01, "wm.coupling": "shared"}},
}


def _run(root: Path, name: str, seed: int, cfg_extra: dict, gain: float, start: float = 0.5,
         shape: tuple[float, ...] = (0, 1 / 3, 2 / 3, 1)) -> None:
    """Held-out d2 = start -> start + gain x shape (+ a seed wobble) at steps 0, 30, 60, 90; every episode's
    department."""
    run = root / name
    (run / "validation").mkdir(parents=True)
    cfg = {"kind": "grpo", "seed": seed, "model": {"name": "micro"}, "wm": {"coef": 0, "coupling": "separate"},
           "env": {"probe_bonus": 0}, "trainer": {"max_steps": 90}}
    for k, v in cfg_extra.items():
        section, key = k.split(".")
        cfg[section][key] = v
    wobble = 0.01 * (seed % 3)
    rows = []
    for i, step in enumerate((0, 30, 60, 90)):
        y = start + wobble + gain * shape[i]
        row = {"step": step, "tasks_seen": 32 * step, "val/success": 0.5, "val/success/d2": 0.4 + gain * i / 3,
               "heldout/success/d2": y, "heldout/probe_rate": 0.8 + 0.05 * i}
        if cfg["wm"]["coef"] and step:
            row["grad_norm/wm_over_rl"] = 0.02 * i
        rows.append(row)
        n = 100
        won = round(y * n)
        episodes = [{"task_id": f"t{j}", "difficulty": 2, "success": j < won, "turns": 3,
                     "departments": ["billing" if j % 2 else "returns"]} for j in range(n)]
        text = json.dumps({"step": step, "episodes": episodes})
        if seed % 2:  # a snapshot's validation files are gzipped (scripts/snapshot_runs.py): both are read
            (run / "validation" / f"heldout_step_{step}.json.gz").write_bytes(gzip.compress(text.encode()))
        else:
            (run / "validation" / f"heldout_step_{step}.json").write_text(text)
    write_training_run(run, cfg, rows)


@pytest.fixture()
def study(tmp_path):
    root = tmp_path / "runs"
    for s in SEEDS:
        _run(root, f"baseline_s{s}", s, {}, gain=0.15)
        _run(root, f"bonus_s{s}", s, {"env.probe_bonus": 0.2}, gain=0.15 + 0.06 + 0.01 * (s % 2))  # +6.5 points
        _run(root, f"shared_s{s}", s, {"wm.coef": 0.01, "wm.coupling": "shared"},
             gain=0.15 + (0.01 if s % 2 else -0.01))  # no effect
    _run(root, "other_s0", 0, {"wm.coef": 0.5, "wm.coupling": "stacked"}, gain=0.3)  # in no arm: left out
    (root / "plan.yaml").write_text(yaml.safe_dump(PLAN, sort_keys=False))
    return root


def test_declared_comparisons_have_the_known_answers(study, tmp_path):
    out = tmp_path / "report"
    summary = build_report([study], out)
    rows = rows_by(out / "declared_comparisons.csv", "arm")
    assert set(rows) == {"bonus", "shared"}
    bonus, shared = rows["bonus"], rows["shared"]
    assert int(bonus["pairs"]) == 8 and float(bonus["primary_diff"]) == pytest.approx(0.065, abs=0.006)
    assert float(bonus["primary_low"]) > 0 and int(bonus["wins"]) == 8
    assert float(shared["primary_diff"]) == pytest.approx(0.0, abs=0.006) and float(shared["primary_low"]) < 0
    # Holm over the two arms: the smaller raw p doubles, the larger is at least it
    raw = [float(bonus["ttest_p"]), float(shared["ttest_p"])]
    assert [float(bonus["ttest_p_holm"]), float(shared["ttest_p_holm"])] == pytest.approx(holm(raw))
    assert float(bonus["ttest_p_holm"]) == pytest.approx(min(1.0, 2 * raw[0]))
    assert float(rows["shared"]["wm_over_rl_median"]) == pytest.approx(0.04)  # steps 30, 60, 90: 0.02, 0.04, 0.06
    index = (out / "index.md").read_text()
    assert "## The test study: the declared comparisons" in index
    assert "**Positive control** (`bonus`, chosen to make `heldout/success/d2` higher): detected" in index
    assert "shared: no effect detected (Holm p " in index and ") on `heldout/success/d2`: difference" in index
    summary_text = index.split("## Summary", 1)[1].split("\n## ", 1)[0]  # the declared answer leads the summary
    assert "- Declared comparison: shared: no effect detected" in summary_text
    assert "- Positive control (`bonus`, chosen to make `heldout/success/d2` higher): detected" in summary_text
    assert "1 run(s) outside the plan's arms are left out" in index
    assert summary["declared"]["reference"] == "baseline"
    assert "calibration" not in summary  # its wm arm logs wm_over_rl beside 8 baselines: not a calibration
    # the mechanism: the probe rate's start and end
    assert "| baseline | 8 | 0.8 -> 0.95 |" in index
    # per department at the last evaluation, pooled over seeds (every other episode is billing)
    with (out / "declared_by_departments.csv").open(newline="") as fh:
        deps = list(csv.DictReader(fh))
    assert {d["departments"] for d in deps} == {"billing", "returns"} and all(int(d["episodes"]) == 50 for d in deps)
    assert "| billing |" in index and "(400)" in index


def test_an_undetected_positive_control_says_the_design_lacked_power(study, tmp_path):
    for s in SEEDS:  # the bonus now gains what the baseline gains, give or take a point
        run = study / f"bonus_s{s}"
        for f in run.rglob("*"):
            if f.is_file():
                f.unlink()
        for d in sorted(run.rglob("*"), reverse=True):
            d.rmdir()
        run.rmdir()
        _run(study, f"bonus_s{s}", s, {"env.probe_bonus": 0.2}, gain=0.15 + (0.01 if s % 2 else -0.01))
    build_report([study], tmp_path / "report")
    index = (tmp_path / "report" / "index.md").read_text()
    assert "**Positive control** (`bonus`, chosen to make `heldout/success/d2` higher): not detected" in index and "lacked power" in index


def test_the_auc_statistic_sees_a_control_that_only_slows_learning(tmp_path):
    """An arm that ends where the baseline ends but lags on the way: no effect on the last evaluation, a lower
    mean over the run; declared as a control that lowers the outcome, the AUC statistic detects it."""
    root = tmp_path / "runs"
    for s in SEEDS:
        _run(root, f"baseline_s{s}", s, {}, gain=0.15, shape=(0, 0.5, 0.8, 1))
        _run(root, f"slow_s{s}", s, {"env.probe_bonus": 0.2}, gain=0.15 + (0.005 if s % 2 else -0.005),
             shape=(0, 0.2, 0.4, 1))
    plan = {**PLAN, "positive_control": "slow", "positive_control_effect": "lower",
            "arms": {"baseline": {"env.probe_bonus": 0}, "slow": {"env.probe_bonus": 0.2}}}
    (root / "plan.yaml").write_text(yaml.safe_dump(plan, sort_keys=False))
    build_report([root], tmp_path / "final")
    final = rows_by(tmp_path / "final" / "declared_comparisons.csv", "arm")["slow"]
    assert float(final["primary_low"]) < 0 < float(final["primary_high"])
    assert "lacked power" in (tmp_path / "final" / "index.md").read_text()
    (root / "plan.yaml").write_text(yaml.safe_dump({**plan, "statistic": "auc"}, sort_keys=False))
    build_report([root], tmp_path / "auc")
    auc = rows_by(tmp_path / "auc" / "declared_comparisons.csv", "arm")["slow"]
    # trapezoid over 4 equally spaced points: (y0/2 + y1 + y2 + y3/2) / 3 -> 0.15 x ((0.2 + 0.4 + 0.5) - (0.5 + 0.8 + 0.5)) / 3
    assert float(auc["primary_diff"]) == pytest.approx(0.15 * (1.1 - 1.8) / 3, abs=0.002)
    assert float(auc["primary_high"]) < 0
    index = (tmp_path / "auc" / "index.md").read_text()
    assert "its mean over each run" in index and "`heldout/success/d2` (AUC) diff" in index
    # the level at the last evaluation stays in the table, with its own Holm-adjusted tests: no effect there
    assert "`heldout/success/d2` at the last evaluation diff" in index
    assert float(auc["final_low"]) < 0 < float(auc["final_high"]) and float(auc["final_ttest_p_holm"]) > 0.05
    assert "chosen to make `heldout/success/d2` (AUC) lower): detected" in index
    (root / "plan.yaml").write_text(yaml.safe_dump({**plan, "statistic": "auc", "positive_control_effect": "higher"},
                                                   sort_keys=False))
    build_report([root], tmp_path / "wrong_way")
    assert "): moved the other way (t-test p " in (tmp_path / "wrong_way" / "index.md").read_text()


def test_a_control_seen_only_before_holm_says_so(study, tmp_path):
    """Raw p 0.033 over 8 pairs (interval excludes 0), Holm over two arms doubles it: the arm's line and the
    positive control's verdict agree (one rule: not detected), and both say the unadjusted interval excluded 0."""
    for s in SEEDS:
        run = study / f"bonus_s{s}"
        for f in sorted(run.rglob("*"), reverse=True):
            f.unlink() if f.is_file() else f.rmdir()
        run.rmdir()
        _run(study, f"bonus_s{s}", s, {"env.probe_bonus": 0.2}, gain=0.15 + (0.0 if s % 2 else 0.03))
    build_report([study], tmp_path / "report")
    bonus = rows_by(tmp_path / "report" / "declared_comparisons.csv", "arm")["bonus"]
    assert float(bonus["primary_low"]) > 0 and 0.05 <= float(bonus["ttest_p_holm"]) < 0.1
    index = (tmp_path / "report" / "index.md").read_text()
    line = next(x for x in index.splitlines() if x.startswith("- Declared comparison: bonus: "))
    assert line.startswith("- Declared comparison: bonus: no effect detected (Holm p 0.0")
    assert "its unadjusted interval excludes 0, Holm's correction over the family does not" in line
    # the control faces the same Holm-adjusted test: not detected, and the line says why
    control = next(x for x in index.splitlines() if x.startswith("- Positive control"))
    assert "higher): not detected (Holm p 0.0" in control and "unadjusted interval excludes 0" in control


def _drop(run: Path) -> None:
    for f in sorted(run.rglob("*"), reverse=True):
        f.unlink() if f.is_file() else f.rmdir()
    run.rmdir()


def test_holms_family_is_every_declared_arm_and_unusable_runs_are_left_out(study, tmp_path):
    """An arm without a test still counts in Holm's family (as p = 1); an unfinished run, and a pair whose
    evaluations differ from the reference's, are left out and counted."""
    for s in SEEDS[1:]:
        _drop(study / f"shared_s{s}")  # shared: one seed, no test
    (study / "bonus_s7" / "summary.json").write_text(json.dumps({"status": "incomplete"}))
    rows = [json.loads(line) for line in (study / "bonus_s6" / "metrics.jsonl").read_text().splitlines()]
    (study / "bonus_s6" / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows if r["step"] != 60))
    build_report([study], tmp_path / "final")  # the last evaluation: bonus_s6's is at the same tasks seen, kept
    assert int(rows_by(tmp_path / "final" / "declared_comparisons.csv", "arm")["bonus"]["pairs"]) == 7
    (study / "plan.yaml").write_text(yaml.safe_dump({**PLAN, "statistic": "auc"}, sort_keys=False))
    build_report([study], tmp_path / "report")  # the mean over the run: over other evaluations, left out
    rows = rows_by(tmp_path / "report" / "declared_comparisons.csv", "arm")
    bonus, shared = rows["bonus"], rows["shared"]
    assert int(bonus["pairs"]) == 6 and int(bonus["pairs_dropped"]) == 1
    assert int(shared["pairs"]) == 1 and shared["ttest_p_holm"] == ""
    assert float(bonus["ttest_p_holm"]) == pytest.approx(min(1.0, 2 * float(bonus["ttest_p"])))
    index = (tmp_path / "report" / "index.md").read_text()
    assert "over the 2 declared arm(s) (Holm; an arm without a test counts as p = 1)" in index
    assert "1 unfinished run(s) are left out" in index
    assert "(1 pair(s) left out: their evaluations differ from the reference's)" in index


def test_a_declared_arm_without_finished_runs_is_said_and_counted(study, tmp_path):
    plan = {**PLAN, "arms": {**PLAN["arms"], "ghost": {"wm.coef": 0.02, "wm.coupling": "stacked"}}}
    (study / "plan.yaml").write_text(yaml.safe_dump(plan, sort_keys=False))
    (study / "shared_s3" / "summary.json").write_text(json.dumps({"status": "incomplete"}))
    build_report([study], tmp_path / "report")
    index = (tmp_path / "report" / "index.md").read_text()
    assert "over the 3 declared arm(s)" in index and "1 unfinished run(s) are left out" in index
    assert "- Declared comparison: ghost: no finished run to compare; it counts as p = 1 in Holm's family." in index
    bonus = rows_by(tmp_path / "report" / "declared_comparisons.csv", "arm")["bonus"]
    raw = sorted([float(bonus["ttest_p"]), 1.0, 1.0])  # bonus is the smallest of three: x3
    assert float(bonus["ttest_p_holm"]) == pytest.approx(min(1.0, 3 * raw[0]))


@pytest.mark.parametrize(("n", "shift", "verdict"), [
    (4, 0.0, "no effect detected (t-test p 1)"), (4, 0.03, "higher (t-test p 0)"),
    (3, 0.1, "higher (t-test p 0)")])  # n 3: numpy's std of 3 x 0.1 > 0
def test_identical_or_shifted_pairs_get_a_test_or_say_why_not(tmp_path, n, shift, verdict):
    """Pairs that all differ by 0 give p = 1 (a member of the family, no evidence); pairs that all differ by
    one amount (up to float noise) have no spread: the t-test's limit, p 0, said in words, never a p of 1e-15."""
    root = tmp_path / "runs"
    for s in SEEDS[:n]:
        _run(root, f"baseline_s{s}", s, {}, gain=0.15)
        _run(root, f"bonus_s{s}", s, {"env.probe_bonus": 0.2}, gain=0.15 + shift)
    plan = {**PLAN, "arms": {"baseline": PLAN["arms"]["baseline"], "bonus": PLAN["arms"]["bonus"]}}
    (root / "plan.yaml").write_text(yaml.safe_dump(plan, sort_keys=False))
    build_report([root], tmp_path / "report")
    bonus = rows_by(tmp_path / "report" / "declared_comparisons.csv", "arm")["bonus"]
    index = (tmp_path / "report" / "index.md").read_text()
    assert f"bonus: {verdict}" in index
    if shift:
        assert float(bonus["ttest_p"]) == 0.0 and bonus["mde"] == ""
        assert f"every pair differs by {shift:g}: no spread, the t-test's limit (p -> 0)" in index
        assert "detected (t-test p 0)" in index  # the positive control
    else:
        assert float(bonus["ttest_p"]) == 1.0 and float(bonus["wilcoxon_p"]) == 1.0


def test_conditions_are_named_by_the_plans_arms(study, tmp_path):
    """With a plan, the report's other sections name a condition by its arm (not the config values telling it
    apart), list the reference first and compare every arm with it; a run in no arm keeps its config label."""
    build_report([study], tmp_path / "report")
    with (tmp_path / "report" / "conditions.csv").open(newline="") as fh:
        names = [r["condition"] for r in csv.DictReader(fh)]
    assert names[0] == "baseline" and {"bonus", "shared"} <= set(names)
    assert any(n.startswith("dual (") for n in names)  # other_s0: in no arm
    with (tmp_path / "report" / "study_comparisons.csv").open(newline="") as fh:
        compared = {r["condition"]: r["baseline"] for r in csv.DictReader(fh)}
    assert compared["bonus"] == "baseline" and compared["shared"] == "baseline"  # bonus has wm.coef 0: compared too
    index = (tmp_path / "report" / "index.md").read_text()
    assert "### Each condition vs the baseline (baseline), paired by seed" in index
    assert "## Training companies' difficulty 2" in index and "declared before the grid: baseline" not in index


def test_without_a_plan_no_declared_section(study, tmp_path):
    (study / "plan.yaml").unlink()
    summary = build_report([study], tmp_path / "report")
    assert "declared" not in summary and not (tmp_path / "report" / "declared_comparisons.csv").exists()


@pytest.mark.parametrize("plan, message", [
    ("arms: [", "not valid YAML"),
    ("- a list", "a study plan is a mapping"),
    (yaml.safe_dump({**PLAN, "primry": "x"}), "unknown key(s) primry"),
    (yaml.safe_dump({k: v for k, v in PLAN.items() if k != "arms"}), "'arms' is required"),
    (yaml.safe_dump({**PLAN, "reference": "nope"}), "reference 'nope' is not one of the arms"),
    (yaml.safe_dump({**PLAN, "alpha": 2}), "alpha must be in (0, 1)"),
    (yaml.safe_dump({**PLAN, "arms": {"baseline": {}}}), "'arms' maps each arm's name"),
    (yaml.safe_dump({**PLAN, "statistic": "median"}), "statistic must be one of final, auc"),
    (yaml.safe_dump({**PLAN, "positive_control_effect": "up"}), "positive_control_effect must be one of higher, lower"),
    (yaml.safe_dump({**PLAN, "equivalence_margin": 0}), "equivalence_margin must be > 0"),
    (yaml.safe_dump({**PLAN, "equivalence_margin": "3 points"}), "equivalence_margin must be > 0"),
])
def test_a_bad_plan_is_one_error(tmp_path, plan, message):
    (tmp_path / "plan.yaml").write_text(plan)
    with pytest.raises(LfoError, match="plan.yaml") as exc:
        load_plan([tmp_path])
    assert message in str(exc.value)


def test_a_run_in_two_arms_is_refused(study, tmp_path):
    plan = {**PLAN, "arms": {**PLAN["arms"], "all_wm0": {"wm.coef": 0}}}
    (study / "plan.yaml").write_text(yaml.safe_dump(plan, sort_keys=False))
    with pytest.raises(LfoError, match="matches arms"):
        build_report([study], tmp_path / "report")


def test_holm_matches_its_definition():
    assert holm([0.01, 0.04, 0.03, math.nan, 0.005]) == pytest.approx([0.03, 0.06, 0.06, math.nan, 0.02], nan_ok=True)
    assert holm([0.5, 0.9]) == [1.0, 1.0] and holm([0.01, 0.02]) == pytest.approx([0.02, 0.02])
    assert holm([]) == []


@pytest.mark.parametrize("study", ["reading_cpu", "textworld_cpu"])
def test_every_study_grid_cell_is_its_own_arm_of_the_committed_plan(tmp_path, study):
    """A study's plan (reports/studies/<study>/runs/plan.yaml) names each arm by config values; each cell of
    recipes/grids/<study>.yaml, resolved as `lfo ablate` resolves it, must match exactly the arm of its own
    name, or the report would pool or drop runs."""
    from lfo_cli.ablate.cells import expand
    from lfo_cli.ablate.grid import load_grid
    from lfo_cli.report.load import Run, flatten
    from lfo_cli.report.plan import load_plan

    plan = load_plan([REPO / "reports" / "studies" / study / "runs"])
    cells = expand(load_grid(study), tmp_path)
    assert {c.condition for c in cells} == set(plan.arms)
    assert plan.reference == "baseline" and plan.positive_control in plan.arms
    for cell in cells:
        run = Run(path=tmp_path / cell.cell_id, kind="grpo", seed=cell.seed, config=flatten(cell.resolved),
                  status="complete", rows=[])
        assert plan.arm_of(run) == cell.condition, cell.cell_id


@pytest.mark.parametrize(("wobble", "shift", "verdict"), [
    (0.004, 0.0, "**equivalent** within +-0.03"),          # small spread around 0: the 90% interval inside +-0.03
    (0.004, 0.06, "**different**: the 95% interval excludes 0"),
    (0.06, 0.0, "neither equivalence within +-0.03 nor a difference is shown"),   # too noisy to show either
])
def test_a_declared_equivalence_margin_gets_tost_per_arm(tmp_path, wobble, shift, verdict):
    """The rollout-dropout check's kind of plan: TOST at the declared margin on the paired primary statistic."""
    root = tmp_path / "runs"
    for s in SEEDS:
        _run(root, f"baseline_s{s}", s, {}, gain=0.15)
        sign = 1 if s % 2 else -1
        _run(root, f"bonus_s{s}", s, {"env.probe_bonus": 0.2}, gain=0.15 + shift + sign * wobble * (1 + s / 8))
    plan = {"title": "Equivalence", "primary": "heldout/success/d2", "statistic": "final", "reference": "baseline",
            "equivalence_margin": 0.03, "arms": {"baseline": PLAN["arms"]["baseline"], "bonus": PLAN["arms"]["bonus"]}}
    (root / "plan.yaml").write_text(yaml.safe_dump(plan, sort_keys=False))
    build_report([root], tmp_path / "report")
    row = rows_by(tmp_path / "report" / "declared_comparisons.csv", "arm")["bonus"]
    from lfo_cli.eval.comparison import tost_paired

    diffs = [(0.15 + shift + (1 if s % 2 else -1) * wobble * (1 + s / 8)) - 0.15 for s in SEEDS]
    want = tost_paired(diffs, 0.03)
    assert float(row["tost_p"]) == pytest.approx(want.p, rel=1e-4)  # the CSV keeps 6 significant digits
    assert float(row["tost_low"]) == pytest.approx(want.low, rel=1e-4, abs=1e-6)
    assert (row["equivalent"] == "True") == want.equivalent
    assert verdict in (tmp_path / "report" / "index.md").read_text()


def test_tost_is_the_90_percent_interval_inside_the_margin():
    from scipy import stats as st

    from lfo_cli.eval.comparison import tost_paired

    d = [0.01, -0.02, 0.015, 0.0, -0.005, 0.02, -0.01, 0.005]
    t = tost_paired(d, 0.03)
    half = st.t.ppf(0.95, len(d) - 1) * st.sem(d)
    assert (t.low, t.high) == pytest.approx((sum(d) / 8 - half, sum(d) / 8 + half))
    assert t.equivalent == (t.low > -0.03 and t.high < 0.03) and t.equivalent
    assert not tost_paired(d, 0.01).equivalent
    assert math.isnan(tost_paired([0.01], 0.03).p) and math.isnan(tost_paired([0.01, 0.01], 0.03).p)

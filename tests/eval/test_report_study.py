"""The observation-study section of `lfo report` on hand-made run dirs with known answers."""

from __future__ import annotations

import csv
import json
import re
import sys
from pathlib import Path

import pytest

from lfo_cli.report.build import build_report

sys.path.insert(0, str(Path(__file__).parent))
from run_files import rows_by, write_training_run  # noqa: E402

SEEDS = (0, 1, 2, 3)


def _run(root: Path, name: str, seed: int, coef: float, coupling: str, slope: float, offset: float,
         warmstart: str | None = None) -> None:
    """d2 success = 0.05 + offset + slope x tasks/600 at tasks 0, 100, ..., 600; held-out and form rows."""
    model = {"name": "micro", **({"warmstart": warmstart} if warmstart else {})}
    cfg = {"kind": "grpo", "seed": seed, "model": model, "wm": {"coef": coef, "coupling": coupling},
           "trainer": {"max_steps": 6}}
    rows = []
    for step in range(7):
        x = 100 * step
        d2 = 0.05 + offset + slope * x / 600
        row = {"step": step, "tasks_seen": x, "val/success": (d2 + 0.3) / 2, "val/success/d1": 0.3, "val/success/d2": d2,
               "val/form_size": 2.0 + 0.1 * step, "val/exception_field_own": 0.05 + slope * x / 600,
               "val/exception_field_other": 0.02}
        if coef > 0:  # the world model names the right fields more often as the run goes on
            row["val/wm_semantic_acc"] = min(1.0, 0.1 * step + 0.02 * seed)
        if step in (0, 6):
            row.update({"heldout/success/d1": 0.3, "heldout/success/d2": 0.0})
        rows.append(row)
        if step:
            rows.append({"step": step, "tasks_seen": x, "reward": 0.1, "losses/policy": 0.1})
    write_training_run(root / name, cfg, rows)


@pytest.fixture()
def study_runs(tmp_path):
    root = tmp_path / "runs"
    for s in SEEDS:
        _run(root, f"base_s{s}", s, 0.0, "separate", slope=0.2, offset=0.01 * s)
        _run(root, f"stacked_s{s}", s, 0.5, "stacked", slope=0.4, offset=0.01 * s)  # twice as fast
        _run(root, f"separate_s{s}", s, 0.5, "separate", slope=0.2, offset=0.01 * s + (0.01 if s % 2 else -0.01))
    return root


def test_study_section_numbers_and_sentences(study_runs, tmp_path):
    out = tmp_path / "report"
    summary = build_report([study_runs], out)
    study = summary["study"]
    # threshold = baseline mean start + half its mean gain = (0.05 + mean offset) + 0.1
    assert study["threshold"] == pytest.approx(0.05 + 0.015 + 0.1)
    comp = rows_by(out / "study_comparisons.csv", "condition")
    stacked = next(v for k, v in comp.items() if "stacked" in k)
    separate = next(v for k, v in comp.items() if "stacked" not in k)
    # AUC: mean of a linear curve = its midpoint; stacked gains twice as much: +0.1 on every seed pair
    assert float(stacked["auc_diff"]) == pytest.approx(0.1)
    assert float(stacked["auc_low"]) == pytest.approx(0.1) and float(stacked["auc_high"]) == pytest.approx(0.1)
    assert float(stacked["p_improvement"]) == 1.0 and int(stacked["pairs"]) == 4
    # smoothed (trailing mean of 3), the threshold 0.165 is reached by the baseline at 500, 500, 400, 400 tasks
    # (offsets 0, .01, .02, .03) and by stacked at 300 on every seed: ratios 5/3, 5/3, 4/3, 4/3, geometric mean
    assert float(stacked["ratio"]) == pytest.approx((5 / 3 * 4 / 3) ** 0.5, rel=1e-5)  # CSV: 6 digits
    assert float(stacked["ratio_low"]) < float(stacked["ratio"]) < float(stacked["ratio_high"])
    assert int(stacked["censored_baseline"]) == 0 and int(stacked["censored_treatment"]) == 0
    # the placebo: +-0.01 around the baseline, mean difference 0 -> no effect detected
    assert float(separate["auc_diff"]) == pytest.approx(0.0, abs=1e-12)
    assert float(separate["auc_low"]) < 0 < float(separate["auc_high"]) and float(separate["auc_mde"]) > 0
    index = (out / "index.md").read_text()
    assert "learns the d2 exceptions faster than the baseline" in index
    assert "no effect detected on d2 learning speed" in index
    assert "## The observation study" in index and "![study curves](study_curves.png)" in index
    runs = list(csv.DictReader((out / "study_runs.csv").open()))
    assert len(runs) == 12 and {r["heldout_d2_final"] for r in runs} == {"0"}
    # RQ4: 2 treatment conditions x 4 seeds x 6 evaluation pairs
    assert summary["study"]["wm_vs_gain"]["n"] == 48 and "Pearson r = " in index
    for name in ("study_curves.png", "study_curves.csv", "study_specificity.csv", "study_wm_vs_gain.csv"):
        assert (out / name).is_file()


def test_study_report_is_identical_on_rerun(study_runs, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    build_report([study_runs], a)
    build_report([study_runs], b)
    names = sorted(p.name for p in a.iterdir())
    assert names == sorted(p.name for p in b.iterdir()) and "study_comparisons.csv" in names
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def test_the_section_takes_its_words_and_measures_from_the_world(study_runs, tmp_path, monkeypatch):
    """The customer-service world's words and specificity columns, then a world that declares none: the same
    numbers under the interface's neutral words, and only the held-out columns beside success."""
    from lfo_cli.env.plugin import CustomerServiceWorld
    from lfo_cli.worlds import StudyWords

    build_report([study_runs], tmp_path / "cs")
    cs = (tmp_path / "cs" / "index.md").read_text()
    assert "## The observation study: difficulty 2 (company exceptions)" in cs and "| exception field: own dept |" in cs
    assert "fresh customers of the training companies" in cs and "call at an exception department" in cs
    monkeypatch.setattr(CustomerServiceWorld, "study_words", StudyWords())
    build_report([study_runs], tmp_path / "plain")
    plain = (tmp_path / "plain" / "index.md").read_text()
    assert "## The observation study: difficulty 2\n" in plain and "### Thresholds and the held-out control" in plain
    assert not re.search(r"compan|exception|dept|department", plain.split("## The observation study")[1].split("\n## ")[0])
    table = next(line for line in plain.splitlines() if line.startswith("| condition | n | d2 success |"))
    assert table.endswith("(d2) | held-out d1 | held-out d2 |")
    assert rows_by(tmp_path / "plain" / "study_comparisons.csv", "condition") == \
        rows_by(tmp_path / "cs" / "study_comparisons.csv", "condition")
    runs = (tmp_path / "plain" / "study_runs.csv").read_text()
    assert "exception_field_own_start" not in runs and "heldout_d2_final" in runs


def test_undefined_threshold_is_said_when_the_baseline_does_not_gain(tmp_path):
    root = tmp_path / "runs"
    for s in SEEDS[:2]:
        _run(root, f"base_s{s}", s, 0.0, "separate", slope=0.0, offset=0.0)
        _run(root, f"stacked_s{s}", s, 0.5, "stacked", slope=0.2, offset=0.0)
    summary = build_report([root], tmp_path / "report")
    assert summary["study"]["threshold"] is None  # nan -> None in JSON
    index = (tmp_path / "report" / "index.md").read_text()
    assert "undefined (threshold undefined: the baseline did not gain on d2)" in index


def test_rq4_falls_back_to_token_accuracy_when_the_semantic_probe_never_varies():
    """On `micro` the greedy world model degenerates and the semantic probe reads 0 at every evaluation: RQ4
    then uses the teacher-forced token accuracy of the training steps up to each evaluation."""
    from lfo_cli.report.load import Run
    from lfo_cli.report.study import RQ4_TOKEN_WINDOW, WM_SEMANTIC, WM_TOKEN, StudyRun, rq4_points

    rows = [{"step": s, "tasks_seen": 10 * s, "val/success/d2": 0.1 * s, WM_SEMANTIC: 0.0} for s in (0, 10, 20)]
    train_rows = [{"step": s, WM_TOKEN: s / 100} for s in range(1, 21)]
    run = Run(Path("r"), "grpo", 0, {}, "complete", train_rows + rows, {})
    study = StudyRun(run, [0, 100, 200], [0, 0.1, 0.2], [0, 0, 0], rows[0], rows[-1], rows=rows)
    measure, points = rq4_points({"dual": [study]})
    assert measure == WM_TOKEN and [p["step"] for p in points] == [10]  # step 0: no training step yet
    assert points[0]["wm_acc"] == pytest.approx(sum(range(10 - RQ4_TOKEN_WINDOW + 1, 11)) / RQ4_TOKEN_WINDOW / 100)
    assert points[0]["next_d2_gain"] == pytest.approx(1.0)
    six = [{"step": s, "tasks_seen": 10 * s, "val/success/d2": 0.01 * s} for s in range(0, 60, 10)]

    def study_of(semantic: list[float]) -> StudyRun:
        rows = [dict(r, **{WM_SEMANTIC: v}) for r, v in zip(six, semantic, strict=True)]
        return StudyRun(run, [r["tasks_seen"] for r in rows], [r["val/success/d2"] for r in rows], [0] * 6, rows[0],
                        rows[-1], rows=rows)

    measure, points = rq4_points({"dual": [study_of([0.1 * i for i in range(6)])]})
    assert measure == WM_SEMANTIC and [p["wm_acc"] for p in points] == pytest.approx([0.0, 0.1, 0.2, 0.3, 0.4])
    # one reading off 0 in 15 points (as in the CPU grid) is no variation to correlate with
    measure, _ = rq4_points({"dual": [study_of([0, 0, 0, 0, 0.03, 0]) for _ in range(3)]})
    assert measure == WM_TOKEN


def test_a_condition_that_never_reaches_the_threshold_gets_a_bound_not_an_interval(tmp_path):
    root = tmp_path / "runs"
    for s in SEEDS:
        _run(root, f"base_s{s}", s, 0.0, "separate", slope=0.2, offset=0.01 * s)
        _run(root, f"shared_s{s}", s, 0.05, "shared", slope=-0.05, offset=0.01 * s)  # collapses: never reaches it
    out = tmp_path / "report"
    build_report([root], out)
    [row] = rows_by(out / "study_comparisons.csv", "condition").values()
    assert int(row["censored_treatment"]) == 4 and row["ratio_kind"] == "upper_bound"
    # the censored runs enter at their last evaluation (600 tasks): a bound, said as one, with no interval
    assert row["ratio_text"].startswith("<= ") and row["ratio_text"].endswith("(the condition never reached it)")
    index = (out / "index.md").read_text()
    assert "learns the d2 exceptions slower than the baseline" in index
    assert "final d2 success difference" in index and row["ratio_text"] in index


def test_a_condition_from_another_warm_start_is_judged_by_its_gain_over_its_own_start(tmp_path):
    """A head start is not learning: an arm that starts 0.2 higher and gains half as much has the higher AUC,
    yet learns less; the report says so, and an arm from the same start keeps the plain AUC verdict."""
    root = tmp_path / "runs"
    for s in SEEDS:
        _run(root, f"base_s{s}", s, 0.0, "separate", slope=0.2, offset=0.01 * s)
        _run(root, f"stacked_s{s}", s, 0.5, "stacked", slope=0.1, offset=0.2 + 0.01 * s, warmstart="warmstart_wm")
        _run(root, f"separate_s{s}", s, 0.5, "separate", slope=0.4, offset=0.01 * s)  # same start, twice the gain
    out = tmp_path / "report"
    build_report([root], out)
    comp = rows_by(out / "study_comparisons.csv", "condition")
    stacked = next(v for k, v in comp.items() if "stacked" in k)
    separate = next(v for k, v in comp.items() if "stacked" not in k)
    assert float(stacked["auc_diff"]) == pytest.approx(0.15)  # 0.2 head start - 0.05 less gain: higher AUC
    assert float(stacked["start_diff"]) == pytest.approx(0.2)
    assert float(stacked["gain_auc_diff"]) == pytest.approx(-0.05) and float(stacked["gain_auc_high"]) < 0
    assert separate["start_diff"] == "" and float(separate["auc_diff"]) == pytest.approx(0.1)
    index = (out / "index.md").read_text()
    assert "starts from another warm start (step-0 d2 difference 0.2 [0.2, 0.2]) and gains less on d2 than the " \
           "baseline, each over its own start" in index
    assert "| same start | same start |" in index
    shows = next(line for line in index.splitlines() if line.startswith("What this shows"))
    assert "faster than the baseline under " + next(k for k in comp if "stacked" not in k) in shows
    assert "slower than the baseline under " + next(k for k in comp if "stacked" in k) in shows


def test_arms_from_one_warm_start_get_no_start_columns(study_runs, tmp_path):
    build_report([study_runs], tmp_path / "report")
    header = (tmp_path / "report" / "study_comparisons.csv").read_text().splitlines()[0]
    assert "start_diff" not in header and "gain_auc_diff" not in header


def test_the_runs_own_heldout_evaluation_stands_for_transfer_unless_a_transfer_eval_covers_it(study_runs, tmp_path):
    import gzip

    from lfo_cli.report.load import read_run

    run = study_runs / "base_s0"
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    for r in rows:
        if "heldout/success/d1" in r:
            r["heldout/success"] = 0.15 + 0.01 * r["step"]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run / "validation").mkdir()
    episodes = [{"difficulty": 1 + (i % 3 == 0), "success": False} for i in range(30)]  # 10 at d2, 20 at d1
    with gzip.open(run / "validation" / "heldout_step_6.json.gz", "wt") as fh:
        json.dump({"step": 6, "episodes": episodes}, fh)
    got = read_run(run).transfer
    assert got["transfer"]["success"] == pytest.approx(0.21) and got["transfer"]["n"] == 30
    assert got["transfer"]["source"] == "in-run" and "step 6" in got["transfer"]["file"]
    assert (got["transfer/d1"]["n"], got["transfer/d2"]["n"]) == (20, 10) and got["transfer/d2"]["success"] == 0.0
    out = tmp_path / "report"
    build_report([study_runs], out)
    index = (out / "index.md").read_text()
    assert "Transfer: not measured" not in index and "evaluated inside each run at its last step" in index
    [line] = [x for x in index.splitlines() if x.startswith("- Transfer")]
    assert line.startswith("- Transfer (success on held-out companies, mean [95% CI]): ") and "transfer/d" not in line
    assert {r["split"] for r in csv.DictReader((out / "transfer.csv").open())} == {"transfer", "transfer/d1",
                                                                                   "transfer/d2"}
    # an `lfo transfer-eval` file on the held-out companies replaces the in-run figure
    (run / "evals").mkdir()
    (run / "evals" / "transfer_eval-transfer-k1-T1-seed0.json").write_text(
        json.dumps({"splits": {"transfer": {"success": 0.5, "n": 400}}}))
    got = read_run(run).transfer
    assert got == {"transfer": {"success": 0.5, "n": 400, "file": "transfer_eval-transfer-k1-T1-seed0.json"}}


def test_summary_groups_the_learning_signal_by_condition_and_names_what_stopped_training(tmp_path):
    root = tmp_path / "runs"
    for s in SEEDS[:3]:
        _run(root, f"base_s{s}", s, 0.0, "separate", slope=0.2, offset=0.01 * s)
        _run(root, f"shared_s{s}", s, 0.05, "shared", slope=-0.05, offset=0.01 * s)
    for path in root.glob("*_s*/metrics.jsonl"):  # the shared runs lose their reward variance after step 2
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        shared = "shared" in path.parent.name
        for r in rows:
            if "reward" in r:
                r["frac_reward_zero_std"] = 1.0 if shared and r["step"] > 2 else 0.5
                r["grad_norm/policy"] = 0.0 if shared and r["step"] > 2 else 0.1
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    build_report([root], tmp_path / "report")
    index = (tmp_path / "report" / "index.md").read_text()
    lines = [line for line in index.splitlines() if line.startswith("- Learning signal")]
    assert len(lines) == 2  # one per condition, not one per run
    shared = next(line for line in lines if "wm.coef=0.05" in line)
    assert "(3 runs, by seed)" in shared and "in 2, 2, 2 of 6 steps" in shared
    assert "except in runs of" in index and "slower than the baseline under" in index


def test_the_report_records_the_commit_each_run_trained_with(study_runs, tmp_path):
    for i, run in enumerate(sorted(study_runs.iterdir())):
        meta = json.loads((run / "run.json").read_text())
        meta["git_commit"] = "0516c0006108a394e61968522efe3b14f24c3227" if i else "1111111111112222222222-dirty"
        (run / "run.json").write_text(json.dumps(meta))
    build_report([study_runs], tmp_path / "a")
    index = (tmp_path / "a" / "index.md").read_text()
    assert "- Code: commits `0516c0006108` (11 runs), `111111111111`-dirty (1 run); per run in `runs.csv`." in index
    commits = {r["run"].rsplit("/", 1)[-1]: r["commit"] for r in csv.DictReader((tmp_path / "a" / "runs.csv").open())}
    assert len(commits) == 12 and list(commits.values()).count("0516c0006108a394e61968522efe3b14f24c3227") == 11
    for run in study_runs.iterdir():
        meta = json.loads((run / "run.json").read_text())
        meta["git_commit"] = "0516c0006108a394e61968522efe3b14f24c3227"
        (run / "run.json").write_text(json.dumps(meta))
    build_report([study_runs], tmp_path / "b")
    assert "- Code: commit `0516c0006108` (every run)" in (tmp_path / "b" / "index.md").read_text()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("study_dir", "runs"),
    [("observation_cpu", 20), ("reading_cpu/calibration", 13), ("reading_cpu", 48), ("textworld_cpu", 18),
     ("rollout_dropout_reading", 16)],
    ids=["observation", "calibration", "reading", "textworld", "rollout-dropout"],
)
def test_a_committed_study_regenerates_byte_for_byte(tmp_path, monkeypatch, study_dir, runs):
    """A committed study is rebuilt from its committed run files alone, file for file, as
    `lfo report reports/studies/STUDY/runs --out DIR` run at the repository's root makes it."""
    from pathlib import Path

    from lfo_cli.report.build import build_report

    root = Path(__file__).resolve().parents[2]
    monkeypatch.chdir(root)
    study = root / "reports" / "studies" / study_dir
    summary = build_report([Path("reports/studies") / study_dir / "runs"], tmp_path)
    assert summary["training_runs"] == runs
    for name in summary["files"]:
        assert (tmp_path / name).read_bytes() == (study / name).read_bytes(), name

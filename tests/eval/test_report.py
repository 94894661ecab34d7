"""`lfo report` on synthetic run dirs: numbers, honesty ("not reached"), skipping, determinism."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lfo_cli import stats
from lfo_cli.cli import app


def _report(args: list[str]):
    result = CliRunner().invoke(app, ["report", *args])
    return result


def _headline_runs(root: Path, make_run, baseline_jumps=(1100, 1200, 1300), transfer=True) -> Path:
    runs = root / "runs"
    for seed, (jd, jb) in enumerate(zip((300, 400, 500), baseline_jumps, strict=True)):
        make_run(runs, f"dual_s{seed}", seed=seed, coef=0.5, jump_at=jd,
                 transfer={"transfer": 0.4 + 0.1 * seed, "val": 0.8} if transfer else None)
        make_run(runs, f"base_s{seed}", seed=seed, coef=0.0, jump_at=jb,
                 transfer={"transfer": 0.2 + 0.05 * seed, "val": 0.7} if transfer else None)
    return runs


def _csv(path: Path) -> list[dict]:
    import gzip

    with (gzip.open(path, "rt", newline="") if path.suffix == ".gz" else path.open(newline="")) as fh:
        return list(csv.DictReader(fh))


def test_report_numbers_on_hand_made_runs(tmp_path, make_run):
    runs = _headline_runs(tmp_path, make_run)
    out = tmp_path / "reports"
    result = _report([str(runs), "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["runs"] == 6 and summary["training_runs"] == 6

    # tasks to 70%: the trailing mean of 3 evaluations first reaches 0.7 two evaluations (200 tasks)
    # after the jump: dual 500/600/700 -> 600, baseline 1300/1400/1500 -> 1400
    eff = {(r["condition"], float(r["threshold"])): r for r in _csv(out / "sample_efficiency.csv")}
    dual = next(c for c, _ in eff if c.startswith("dual"))
    base = next(c for c, _ in eff if c.startswith("baseline"))
    assert float(eff[(dual, 0.7)]["mean_tasks"]) == 600 and float(eff[(base, 0.7)]["mean_tasks"]) == 1400
    assert float(eff[(dual, 0.5)]["mean_tasks"]) == 500  # one evaluation after the jump: (0.05+0.95+0.95)/3
    [r70] = [r for r in summary["sample_efficiency"]["ratios"] if r["threshold"] == 0.7]
    assert r70["kind"] == "estimate" and r70["value"] == pytest.approx(1400 / 600)
    assert r70["low"] <= 1400 / 600 <= r70["high"] and r70["low"] > 1  # every baseline seed is slower
    index = (out / "index.md").read_text()
    assert "tasks-to-70% ratio baseline/dual = 2.33 [95% CI" in index
    # transfer: dual 0.4/0.5/0.6, baseline 0.2/0.25/0.3 on held-out companies
    tr = {(r["condition"], r["split"]): r for r in _csv(out / "transfer.csv")}
    assert float(tr[(dual, "transfer")]["mean"]) == pytest.approx(0.5)
    assert float(tr[(base, "transfer")]["mean"]) == pytest.approx(0.25)
    assert "Held-out success, dual - baseline" in index and "0.25 [95% CI" in index
    # learning curve CSV: mean over seeds at a point where 2 of 3 dual seeds have jumped
    lc = {(r["condition"], float(r["tasks_seen"])): r for r in _csv(out / "learning_curves.csv")}
    assert float(lc[(dual, 400.0)]["mean"]) == pytest.approx((0.95 + 0.95 + 0.05) / 3)
    # per run: the step-0 evaluation (the warm start) beside the final one
    per_run = {r["run"].rsplit("/", 1)[-1]: r for r in _csv(out / "training_runs.csv")}
    assert float(per_run["dual_s0"]["start_success"]) == pytest.approx(0.05)
    assert float(per_run["dual_s0"]["final_success"]) == pytest.approx(0.95)
    # difficulty / behaviour / gradient / correlation outputs exist and are referenced
    for name in ("learning_curves.png", "success_by_difficulty.png", "behaviour.png", "grad_norms.png",
                 "wm_vs_learning_rate.png", "transfer.png", "tidy.csv.gz", "conditions.csv", "paired_tests.csv"):
        assert (out / name).is_file(), name
    for name in ("learning_curves.png", "success_by_difficulty.png", "grad_norms.png", "transfer.png"):
        assert f"]({name})" in index
    # separate coupling logged policy_from_wm == 0 throughout: the report says what that means (dual only)
    grad_lines = [ln for ln in index.splitlines() if "mean grad_norm/policy_from_wm" in ln]
    assert any(ln.startswith(f"- {dual}:") and "no gradient path" in ln for ln in grad_lines)
    assert not any(ln.startswith(f"- {base}:") and "no gradient path" in ln for ln in grad_lines)
    # the correlation in index.md is the Pearson r of the points in the CSV
    pts = _csv(out / "wm_vs_learning_rate.csv")
    c = stats.pearson_with_ci([float(p["wm_token_acc"]) for p in pts], [float(p["success_per_1000_tasks"]) for p in pts])
    assert summary["correlation"]["n"] == c.n == len(pts) >= 4
    assert summary["correlation"]["r"] == pytest.approx(c.r)
    # tidy table: one row per run x step x metric
    tidy = _csv(out / "tidy.csv.gz")
    assert {"run", "condition", "seed", "step", "tasks_seen", "metric", "value"} <= set(tidy[0])
    assert sum(1 for r in tidy if r["metric"] == "val/success") == 6 * 21


def test_not_reached_is_stated_plainly(tmp_path, make_run):
    runs = _headline_runs(tmp_path, make_run, baseline_jumps=(None, None, None), transfer=False)
    out = tmp_path / "reports"
    result = _report([str(runs), "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    [r70] = [r for r in summary["sample_efficiency"]["ratios"] if r["threshold"] == 0.7]
    assert r70["kind"] == "not_reached" and r70["value"] is None
    index = (out / "index.md").read_text()
    assert "no baseline seed reached 70% validation success" in index
    assert "not reached (0/3; max 2000 tasks)" in index
    assert "Transfer: not measured" in index and not (out / "transfer.png").exists()
    # one baseline seed reaches it: the ratio becomes a lower bound, said as such
    runs2 = _headline_runs(tmp_path / "b", make_run, baseline_jumps=(1100, None, None), transfer=False)
    result = _report([str(runs2), "--out", str(tmp_path / "r2"), "--json"])
    [r70] = [r for r in json.loads(result.stdout)["sample_efficiency"]["ratios"] if r["threshold"] == 0.7]
    assert r70["kind"] == "lower_bound" and r70["value"] == pytest.approx((1300 + 2000 + 2000) / 3 / 600)
    assert "a lower bound" in (tmp_path / "r2" / "index.md").read_text()


def test_no_effect_and_insufficient_runs(tmp_path, make_run):
    runs = tmp_path / "runs"
    for seed in range(3):  # identical curves: no effect
        make_run(runs, f"d{seed}", seed=seed, coef=0.5, jump_at=500 + 100 * seed)
        make_run(runs, f"b{seed}", seed=seed, coef=0.0, jump_at=500 + 100 * ((seed + 1) % 3))
    out = tmp_path / "reports"
    assert _report([str(runs), "--out", str(out)]).exit_code == 0
    index = (out / "index.md").read_text()
    assert "no effect detected (t-test p" in index
    # a single run per condition: no CIs, said so
    one = tmp_path / "one"
    make_run(one, "d", seed=0, coef=0.5, jump_at=300)
    make_run(one, "b", seed=0, coef=0.0, jump_at=900)
    result = _report([str(one), "--out", str(tmp_path / "r1"), "--json"])
    assert result.exit_code == 0
    [r70] = [r for r in json.loads(result.stdout)["sample_efficiency"]["ratios"] if r["threshold"] == 0.7]
    assert r70["kind"] == "insufficient" and r70["low"] is None
    assert "insufficient paired seeds" in (tmp_path / "r1" / "index.md").read_text()


def test_ablation_tables_and_lambda_curve(tmp_path, make_run):
    runs = tmp_path / "runs"
    for seed in range(2):
        for coef in (0.0, 0.5, 1.0):
            make_run(runs, f"c{coef}_s{seed}", seed=seed, coef=coef, jump_at=1000 - 400 * coef)
        for r in (8, 32):
            make_run(runs, f"r{r}_s{seed}", seed=seed, coef=0.5, jump_at=800, extra={"lora.r": r})
    out = tmp_path / "reports"
    result = _report([str(runs), "--out", str(out)])
    assert result.exit_code == 0, result.output
    lam = _csv(out / "lambda.csv")
    assert {float(r["wm.coef"]) for r in lam} == {0.0, 0.5, 1.0}
    assert (out / "lambda.png").is_file() and (out / "ablation_lora_r.csv").is_file()
    ranks = {r["lora.r"] for r in _csv(out / "ablation_lora_r.csv")}
    assert ranks == {"8", "16", "32"}
    index = (out / "index.md").read_text()
    assert "LoRA rank (the design's ablation 3)" in index and "![lambda](lambda.png)" in index


def test_report_is_byte_identical_on_rerun(tmp_path, make_run, make_wmil):
    runs = _headline_runs(tmp_path, make_run)
    for seed in range(2):
        make_wmil(runs / "wmil", f"wm_s{seed}", seed=seed, wm_coef=1.0, rise=0.12)
        make_wmil(runs / "wmil", f"nowm_s{seed}", seed=seed, wm_coef=0.0, rise=0.06)
    a, b = tmp_path / "a", tmp_path / "b"
    assert _report([str(runs), "--out", str(a)]).exit_code == 0
    first = {p.name: p.read_bytes() for p in sorted(a.iterdir())}
    assert _report([str(runs), "--out", str(a)]).exit_code == 0
    assert _report([str(runs), "--out", str(b)]).exit_code == 0
    for out in (a, b):
        again = {p.name: p.read_bytes() for p in sorted(out.iterdir())}
        assert again.keys() == first.keys()
        for name, data in first.items():
            assert again[name] == data, name
    assert b"matplotlib" not in first["learning_curves.png"]  # no Software stamp in the PNG
    assert "wmil_curves.png" in first and "## WMIL runs" in first["index.md"].decode()


def test_missing_inputs_are_skipped_with_a_note_and_stale_files_removed(tmp_path, make_run, make_wmil):
    runs = _headline_runs(tmp_path, make_run)
    out = tmp_path / "reports"
    assert _report([str(runs), "--out", str(out)]).exit_code == 0
    assert (out / "transfer.png").exists()
    only_wmil = tmp_path / "wmil"
    make_wmil(only_wmil, "s0", seed=0, wm_coef=1.0, rise=0.2)
    make_wmil(only_wmil, "s1", seed=1, wm_coef=1.0, rise=0.3)
    result = _report([str(only_wmil), "--out", str(out)])
    assert result.exit_code == 0, result.output
    index = (out / "index.md").read_text()
    assert "No training (`lfo train`, kind grpo) runs" in index
    assert not (out / "transfer.png").exists() and not (out / "learning_curves.png").exists()
    assert (out / "wmil_curves.png").exists()
    # runs without gradient logs or transfer files
    bare = tmp_path / "bare"
    make_run(bare, "d", seed=0, coef=0.5, jump_at=300, grad=False, complete=False)
    assert _report([str(bare), "--out", str(tmp_path / "r3")]).exit_code == 0
    text = (tmp_path / "r3" / "index.md").read_text()
    assert "Gradient norms: not logged by any run." in text
    assert "1 run(s) are not complete" in text
    assert "no baseline (wm.coef=0) runs" in text


def test_bad_inputs_exit_2_one_line(tmp_path, make_run):
    for args, needle in (([str(tmp_path / "nope")], "no such file"), ([str(tmp_path)], "no run dirs found")):
        result = _report([*args, "--out", str(tmp_path / "out")])
        assert result.exit_code == 2
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0]
    # a corrupt run is skipped and named, the others reported
    runs = tmp_path / "runs"
    make_run(runs, "good", seed=0, coef=0.5, jump_at=300)
    bad = make_run(runs, "bad", seed=1, coef=0.5, jump_at=300)
    with (bad / "metrics.jsonl").open("a") as fh:
        fh.write('{"step": 99, "val/succ')
    result = _report([str(runs), "--out", str(tmp_path / "out"), "--json"])
    assert result.exit_code == 0, result.output
    skipped = json.loads(result.stdout)["skipped"]
    assert len(skipped) == 1 and "bad" in skipped[0]["run"] and "metrics.jsonl" in skipped[0]["reason"]


def test_number_format_drops_float_residue():
    from lfo_cli.report.format import num

    # mean of (0.01, -0.01, 0.0) is ~5.8e-19 in floating point: the report must say 0, not 5.78e-19
    assert num(sum([0.01, 0.0, -0.01]) / 3 + 5.78e-19) == "0"
    assert num(0.00633) == "0.00633"
    assert num(-0.004) == "-0.004"
    assert num(float("nan")) == "n/a"


def test_copies_of_one_run_are_refused_as_seeds(tmp_path, make_run):
    runs = tmp_path / "runs"
    make_run(runs, "a", seed=0, coef=0.5, jump_at=300)
    make_run(runs, "b", seed=1, coef=0.5, jump_at=300)
    make_run(runs / "copy", "a", seed=0, coef=0.5, jump_at=300)  # the same run again, elsewhere
    result = _report([str(runs), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    [line] = result.stderr.strip().splitlines()
    assert "one run twice" in line and "seed 0" in line and "not separate seeds" in line
    assert _report([str(runs / "a"), str(runs / "b"), "--out", str(tmp_path / "out")]).exit_code == 0


def test_a_val_only_check_is_never_shown_as_transfer(tmp_path, make_run):
    runs = tmp_path / "runs"
    for seed in (0, 1):
        make_run(runs, f"base{seed}", seed=seed, coef=0.0, jump_at=None, transfer={"val": 0.3})
        make_run(runs, f"dual{seed}", seed=seed, coef=0.5, jump_at=300, transfer={"val": 0.4})
    result = _report([str(runs), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    index = (tmp_path / "out" / "index.md").read_text()
    assert "Transfer to held-out companies was not measured" in index and "it is not transfer" in index
    assert "Held-out success, dual - baseline" not in index


def test_transfer_reads_evals_and_keeps_the_largest_evaluation_per_split(tmp_path, make_run):
    from lfo_cli.report.load import read_run

    run = make_run(tmp_path, "r", seed=0, coef=0.5, jump_at=300)
    (run / "evals").mkdir()
    for name, n, success in (("transfer_eval-transfer-k1-T1-seed0.json", 100, 0.2),
                             ("transfer_eval-transfer-k4-T1-seed0.json", 400, 0.25),
                             ("transfer_eval-transfer-k1-T1-seed0-n10.json", 10, 0.9)):
        (run / "evals" / name).write_text(json.dumps({"splits": {"transfer": {"success": success, "n": n}}}))
    got = read_run(run).transfer["transfer"]
    assert got == {"success": 0.25, "n": 400, "file": "transfer_eval-transfer-k4-T1-seed0.json"}


def test_reward_panels_and_what_to_run_next_come_from_the_data(tmp_path, make_run):
    runs = tmp_path / "runs"
    make_run(runs, "base", seed=0, coef=0.0, jump_at=None)
    make_run(runs, "dual", seed=0, coef=0.5, jump_at=300)
    out = tmp_path / "out"
    assert _report([str(runs), "--out", str(out)]).exit_code == 0
    index = (out / "index.md").read_text()
    assert (out / "reward.png").is_file() and (out / "reward.csv").is_file() and "### Reward and learning signal" in index
    assert "What this shows:" in index and "one seed per condition" in index
    assert "What to run next:" in index and "lfo ablate --grid observation_cpu" in index and "transfer-eval" in index
    one = tmp_path / "one"
    make_run(one, "r", seed=0, coef=0.5, jump_at=None, steps=1)  # a single logged step: no one-point panels
    assert _report([str(one), "--out", str(tmp_path / "out1")]).exit_code == 0
    assert not (tmp_path / "out1" / "reward.png").exists() and not (tmp_path / "out1" / "grad_norms.png").exists()

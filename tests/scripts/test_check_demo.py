"""scripts/check_demo.py: the figures `make demo` is held to, read from its output and its training run."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check_demo.py"
spec = importlib.util.spec_from_file_location("check_demo", SCRIPT)
check_demo = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_demo)


def test_a_progress_bar_redrawn_in_place_counts_as_one_line():
    bar = "".join(f"\rtrain: {i:3d}%|{'#' * (i // 10):10s}| {i}/100" for i in range(0, 101, 5))
    text = "wrote data/world.json\n" + bar + "\n\x1b[1mdone\x1b[0m\n\n"
    assert check_demo.printed_lines(text) == 4  # the blank line counts: the reader sees it
    assert check_demo.printed_lines("") == 0 and check_demo.printed_lines("a") == 1


def _metrics(path: Path, zero_std: list[float], grads: list[float]) -> Path:
    rows = [{"step": 0, "val/success": 0.1}]
    rows += [{"step": i + 1, "frac_reward_zero_std": z, "grad_norm/policy": g}
             for i, (z, g) in enumerate(zip(zero_std, grads, strict=True))]
    rows.append({"step": 1, "frac_reward_zero_std": 1.0, "grad_norm/policy": 0.0})  # a re-logged step: last wins
    path.mkdir(parents=True)
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_training_signal_counts_steps_with_reward_variance_and_a_policy_gradient(tmp_path):
    run = _metrics(tmp_path / "run", [0.5, 0.5, 1.0, 0.0], [0.2, 0.1, 0.0, 0.3])
    assert check_demo.training_signal(run) == {"steps": 4, "steps_with_reward_variance": 2,
                                               "steps_with_policy_gradient": 2}
    checks = check_demo.verdict(9.0, 80, check_demo.training_signal(run))
    assert checks["reward variance in most steps"] is False and checks["policy gradient > 0"] is True
    assert checks["wall time <= 10 min"] is True and checks["lines <= 120"] is True
    assert check_demo.verdict(12.0, 80, check_demo.training_signal(run))["wall time <= 10 min"] is False
    assert check_demo.verdict(12.0, 80, check_demo.training_signal(run), loaded=True)["wall time <= 20 min (loaded)"]


def test_the_final_line_must_report_a_gain_whose_interval_lies_above_zero():
    sentence = "validation first call to the right department at step 20: 12.0% -> 70.5% over 200 paired episodes: "
    better = sentence + "better than at step 0 by 58.5 points [95% CI +51.0, +66.0]"
    assert check_demo.final_gain(f"wrote reports/index.md\n{better}\n\n") == {"diff": 58.5, "low": 51.0, "high": 66.0}
    assert check_demo.final_gain(f"{better}\nwrote reports/index.md\n") is None  # not the final line
    held = sentence + "no change from step 0 detected: +1.0 points [95% CI +0.0, +2.5] holds 0"
    assert check_demo.final_gain(held) is None and check_demo.final_gain("") is None
    signal = {"steps": 4, "steps_with_reward_variance": 4, "steps_with_policy_gradient": 4}
    gain = check_demo.final_gain(better)
    assert check_demo.verdict(5.0, 50, signal, gain=gain)["final line: a gain whose 95% CI lies above 0"]
    assert not check_demo.verdict(5.0, 50, signal, gain=None)["final line: a gain whose 95% CI lies above 0"]


def test_the_machine_reference_is_a_positive_time():
    assert 0 < check_demo.machine_reference(runs=1) < 100


def test_check_exits_0_when_every_bound_holds_1_when_one_does_not_2_on_bad_input(tmp_path):
    good = _metrics(tmp_path / "good", [0.5, 0.25, 0.0, 0.75], [0.2, 0.1, 0.1, 0.3])
    log = tmp_path / "demo.log"
    last = "d: validation success at step 4: 0.0% -> 5.0% over 40 paired episodes: better than at step 0 by 5.0 points [95% CI +1.0, +9.0]"
    log.write_text("line\n" * 99 + last + "\n")

    def check(*args):
        return subprocess.run([sys.executable, str(SCRIPT), "check", *map(str, args)], capture_output=True, text=True)

    done = check(log, good, "--json", tmp_path / "out.json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads((tmp_path / "out.json").read_text())["lines"] == 100
    log.write_text("line\n" * 121)
    done = check(log, good)
    assert done.returncode == 1 and "FAIL lines <= 120" in done.stdout
    done = check(log, tmp_path / "missing")
    assert done.returncode != 0 and done.stderr.startswith("error: ") and "Traceback" not in done.stderr

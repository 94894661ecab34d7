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
    checks = check_demo.verdict(12.0, 80, check_demo.training_signal(run))
    assert checks["reward variance in most steps"] is False and checks["policy gradient > 0"] is True
    assert checks["wall time <= 20 min"] is True and checks["lines <= 120"] is True


def test_check_exits_0_when_every_bound_holds_1_when_one_does_not_2_on_bad_input(tmp_path):
    good = _metrics(tmp_path / "good", [0.5, 0.25, 0.0, 0.75], [0.2, 0.1, 0.1, 0.3])
    log = tmp_path / "demo.log"
    log.write_text("line\n" * 100)

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

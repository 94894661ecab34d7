"""kill -9 during training, then --resume: the run finishes with exactly the uninterrupted metrics."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ARGS = ["--task", "pattern_echo", "--steps", "300", "--num-envs", "32", "--log-every", "20", "--save-every", "60",
        "--seed", "3", "--eval-episodes", "128", "--no-progress"]


def _cmd(out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "lfo_cli", "wmil", "train", *ARGS, "--out", str(out), *extra]


def _latest_step(run: Path) -> int:
    try:
        return json.loads((run / "checkpoints" / "latest.json").read_text())["step"]
    except (FileNotFoundError, json.JSONDecodeError):
        return 0


@pytest.mark.long
def test_kill9_then_resume_equals_uninterrupted(tmp_path):
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    ref, run = tmp_path / "ref", tmp_path / "run"
    proc = subprocess.Popen(_cmd(run), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    while _latest_step(run) < 100 and proc.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    assert proc.poll() is None, "training finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL
    killed_at = _latest_step(run)
    assert 100 <= killed_at < 300 and not (run / "summary.json").exists()

    subprocess.run(_cmd(run, "--resume"), env=env, check=True, capture_output=True)
    subprocess.run(_cmd(ref), env=env, check=True, capture_output=True)

    a = json.loads((run / "summary.json").read_text())
    b = json.loads((ref / "summary.json").read_text())
    assert a["steps"] == b["steps"] == 300
    assert a["final"] == b["final"]  # every logged metric of the last row, bit for bit
    assert a["eval"] == b["eval"] and a["checks"] == b["checks"]
    rows_a = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    rows_b = [json.loads(x) for x in (ref / "metrics.jsonl").read_text().splitlines()]
    strip = lambda r: {k: v for k, v in r.items() if not k.startswith("time/")}  # noqa: E731
    assert [strip(r) for r in rows_a] == [strip(r) for r in rows_b]
    assert (run / "checkpoints" / f"step_{300:08d}" / "model.safetensors").is_file()


def test_resume_with_different_options_is_refused(tmp_path):
    from typer.testing import CliRunner

    from lfo_cli.cli import app

    out = tmp_path / "r"
    base = ["wmil", "train", "--steps", "20", "--num-envs", "8", "--log-every", "10", "--save-every", "10",
            "--eval-episodes", "16", "--no-progress", "--out", str(out)]
    assert CliRunner().invoke(app, base).exit_code == 0
    res = CliRunner().invoke(app, [*base, "--resume", "--lr", "0.5"])
    assert res.exit_code == 2 and "lr" in res.output
    res = CliRunner().invoke(app, base)  # non-empty dir without --resume/--force
    assert res.exit_code == 2 and "--resume" in res.output

"""`lfo ablate --launcher ray` against a real Ray head started by the test (`ray start --head` as its own
process, in a network namespace of its own: only 127.0.0.1 exists there): the local launcher's metrics, and a
worker killed mid-cell whose task Ray retries and which resumes to the same metrics."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from cluster_helpers import logged_values, wait_for, write_grid  # noqa: E402

CELLS = ("base__s0", "base__s1")


def _ablate(ray_head, *args: str, **kw):
    cmd = [*ray_head["prefix"], sys.executable, "-m", "lfo_cli", "ablate", *args, "--launcher", "ray",
           "--ray-address", ray_head["address"]]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TRL_EXPERIMENTAL_SILENCE": "1", **ray_head["env"]}
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, **kw)


def test_a_grid_on_ray_has_the_local_launchers_metrics(tiny, local_runs, ray_head):
    grid, runs = write_grid(tiny, "ref", steps=4), tiny / "ray_runs"
    proc = _ablate(ray_head, "--grid", str(grid), "--runs-dir", str(runs), "--max-parallel", "2")
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]
    assert "2/2 cells complete" in out
    for cell in CELLS:
        marker = json.loads((runs / "cells" / f"{cell}.json").read_text())
        assert marker["launcher"] == "ray" and marker["state"] == "done" and marker["job_id"]
        assert logged_values(runs / cell) == logged_values(local_runs / cell), cell


def test_a_killed_worker_is_retried_and_its_cell_resumes_to_the_same_metrics(tiny, local_runs, ray_head):
    grid, runs = write_grid(tiny, "ref", steps=4), tiny / "ray_kill"
    victim = CELLS[0]
    proc = _ablate(ray_head, "--grid", str(grid), "--runs-dir", str(runs), "--max-parallel", "2")
    try:
        wait_for(lambda: (runs / victim / "checkpoint-2" / "trainer_state.json").exists(), what="checkpoint-2")
        worker = json.loads((runs / "cells" / f"{victim}.json").read_text())["pid"]
        os.kill(worker, signal.SIGKILL)  # the Ray worker process that runs the cell
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-3000:]
    log = (runs / "logs" / f"{victim}.log").read_text()
    assert log.count("=== ") == 2 and " resume on " in log  # the retry resumed the cell
    marker = json.loads((runs / "cells" / f"{victim}.json").read_text())
    assert marker["state"] == "done" and marker["pid"] != worker
    for cell in CELLS:
        assert logged_values(runs / cell) == logged_values(local_runs / cell), cell

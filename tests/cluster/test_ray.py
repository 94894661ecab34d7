"""`lfo ablate --launcher ray` against a real Ray head started by the test (`ray start --head` as its own
process, in a network namespace of its own: only 127.0.0.1 exists there): a worker killed mid-cell is retried
and its cell resumes, and every cell logs exactly what the local launcher's run of it logged."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from cluster_helpers import STEPS, logged_values, wait_for, write_grid  # noqa: E402

CELLS = ("base__s0", "base__s1")


def test_a_grid_on_ray_survives_a_killed_worker_with_the_local_launchers_metrics(tiny, local_runs, ray_head):
    grid, runs = write_grid(tiny, "ref", steps=STEPS), tiny / "ray_runs"
    victim = CELLS[0]
    cmd = [*ray_head["prefix"], sys.executable, "-m", "lfo_cli", "ablate", "--grid", str(grid), "--runs-dir",
           str(runs), "--max-parallel", "2", "--launcher", "ray", "--ray-address", ray_head["address"]]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TRL_EXPERIMENTAL_SILENCE": "1", **ray_head["env"]}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        wait_for(lambda: (runs / victim / "checkpoint-2" / "trainer_state.json").exists(), what="checkpoint-2")
        worker = json.loads((runs / "cells" / f"{victim}.json").read_text())["pid"]
        os.kill(worker, signal.SIGKILL)  # the Ray worker process that runs the cell
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-3000:]
    assert "2/2 cells complete" in out
    log = (runs / "logs" / f"{victim}.log").read_text()
    assert log.count("=== ") == 2 and " resume on " in log  # Ray retried the task; the retry resumed the cell
    for cell in CELLS:
        marker = json.loads((runs / "cells" / f"{cell}.json").read_text())
        assert marker["launcher"] == "ray" and marker["state"] == "done" and marker["job_id"]
        assert logged_values(runs / cell) == logged_values(local_runs / cell), cell
    assert json.loads((runs / "cells" / f"{victim}.json").read_text())["pid"] != worker

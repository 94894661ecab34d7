"""`lfo ablate --launcher slurm` against a real single-node SLURM (slurmctld, slurmd, munge on 127.0.0.1):
the array SLURM shows, the same metrics as the local launcher, a cancelled task resubmitted alone and
resumed, a bad cell failing alone, and a second launch refused while the array lives."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from cluster_helpers import lfo, logged_values, wait_for, write_grid  # noqa: E402

CELLS = ("base__s0", "base__s1")


def _status(runs, env) -> dict[str, dict]:
    out = lfo("ablate", "--status", "--runs-dir", str(runs), "--json", env=env)
    return {c["cell_id"]: c for c in json.loads(out.stdout)["cells"]}


def _marker(runs, cell) -> dict:
    return json.loads((runs / "cells" / f"{cell}.json").read_text())


def test_a_grid_runs_as_one_array_with_the_local_launchers_metrics(tiny, local_runs, slurm):
    grid, runs = write_grid(tiny, "ref", steps=4), tiny / "slurm_runs"
    # --sbatch begin=...: the array waits in the queue until the test lets it start (scontrol below)
    out = lfo("ablate", "--grid", str(grid), "--runs-dir", str(runs), "--launcher", "slurm", "--max-parallel", "2",
              "--detach", "--sbatch", "begin=now+3600", env=slurm)
    assert "2 cell(s) queued on SLURM" in out.stdout
    jobs = [_marker(runs, c)["job_id"] for c in CELLS]
    array = jobs[0].split("_")[0]
    assert jobs == [f"{array}_0", f"{array}_1"]  # one array, a task per cell
    shown = subprocess.run(["scontrol", "show", "job", array], capture_output=True, text=True,
                           env={**os.environ, **slurm}, check=True).stdout
    assert f"ArrayJobId={array}" in shown and "JobName=lfo-ref" in shown
    # a second launch into the dir while its array lives is refused in one line naming the jobs
    again = lfo("ablate", "--grid", str(grid), "--runs-dir", str(runs), "--launcher", "slurm", env=slurm, check=False)
    assert again.returncode == 2 and again.stderr.count("\n") == 1
    assert "still queued" in again.stderr and f"{array}_" in again.stderr
    assert {s["state"] for s in _status(runs, slurm).values()} == {"queued"}
    subprocess.run(["scontrol", "update", f"JobId={array}", "StartTime=now"], env={**os.environ, **slurm}, check=True)
    # --status is never refused; it follows the array to its end
    wait_for(lambda: all(s["state"] == "done" for s in _status(runs, slurm).values()), what="the array to finish")
    for cell in CELLS:
        assert logged_values(runs / cell) == logged_values(local_runs / cell), cell
        assert (runs / "logs" / f"{cell}.log").read_text().count("=== ") == 1


def test_a_cancelled_task_is_resubmitted_alone_and_resumes_to_the_same_metrics(tiny, local_runs, slurm):
    grid, runs = write_grid(tiny, "ref", steps=4), tiny / "slurm_cancel"
    lfo("ablate", "--grid", str(grid), "--runs-dir", str(runs), "--launcher", "slurm", "--max-parallel", "2",
        "--detach", env=slurm)
    victim, other = CELLS
    wait_for(lambda: (runs / victim / "checkpoint-2" / "trainer_state.json").exists(), what="checkpoint-2")
    job = _marker(runs, victim)["job_id"]
    subprocess.run(["scancel", job], env={**os.environ, **slurm}, check=True)
    wait_for(lambda: [s["state"] for s in _status(runs, slurm).values()] == ["interrupted", "done"],
             what="the cancelled cell to show as interrupted")
    other_job = _marker(runs, other)["job_id"]
    lfo("ablate", "--grid", str(grid), "--runs-dir", str(runs), "--launcher", "slurm", env=slurm)
    assert _marker(runs, other)["job_id"] == other_job  # the finished cell was not submitted again
    assert _marker(runs, victim)["job_id"].split("_")[0] != job.split("_")[0]
    log = (runs / "logs" / f"{victim}.log").read_text()
    assert log.count("=== ") == 2 and " resume on " in log
    assert logged_values(runs / victim) == logged_values(local_runs / victim)
    assert all(s["state"] == "done" for s in _status(runs, slurm).values())


def test_a_cell_with_a_bad_override_fails_alone_with_its_error_line(tiny, slurm):
    grid = write_grid(tiny, "bad", steps=2, seeds=(0,), cells=[
        {"id": "good", "wm.coef": 0.5}, {"id": "bad", "wm.coef": 0.5, "model.name": str(tiny / "no_such_model")}])
    runs = tiny / "slurm_bad"
    done = lfo("ablate", "--grid", str(grid), "--runs-dir", str(runs), "--launcher", "slurm", "--max-parallel", "2",
               env=slurm, check=False)
    assert done.returncode == 1, done.stderr[-2000:]
    status = _status(runs, slurm)
    assert status["good__s0"]["state"] == "done"
    assert status["bad__s0"]["state"] == "failed"
    assert status["bad__s0"]["note"].startswith("error: ") and "no_such_model" in status["bad__s0"]["note"]

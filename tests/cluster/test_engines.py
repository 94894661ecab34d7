"""`lfo ablate` on real engines started on this machine, in one module so that both compare with one local
reference grid (the `local_runs` fixture, trained once).

SLURM (slurmctld, slurmd, munge on 127.0.0.1), in one array's life: SLURM shows the array, a second launch is
refused while it lives, a cell with a bad override fails alone with its error line, a cancelled task shows as
interrupted and the next launch resubmits only it, and every cell that finishes logs exactly what the local
launcher's run of it logged.

Ray (`ray start --head` as its own process, in a network namespace of its own: only 127.0.0.1 exists there): a
worker killed mid-cell is retried and its cell resumes, and every cell logs exactly what the local launcher's
run of it logged."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from cluster_helpers import STEPS, lfo, logged_values, states, wait_for, write_grid  # noqa: E402

CELLS = ("base__s0", "bad__s0", "base__s1")  # seed-major: what the array's task ids follow


def _marker(runs, cell) -> dict:
    return json.loads((runs / "cells" / f"{cell}.json").read_text())


def test_an_array_runs_refuses_a_second_launch_and_resubmits_only_the_cancelled_cell(tiny, local_runs, slurm):
    grid = write_grid(tiny, "ref", steps=STEPS, cells=[
        {"id": "base", "wm.coef": 0.5},
        {"id": "bad", "wm.coef": 0.5, "model.name": str(tiny / "no_such_model"), "seeds": [0]}])
    runs = tiny / "slurm_runs"
    run_env = {**os.environ, **slurm}
    # --sbatch begin=...: the array waits in the queue until the test lets it start (scontrol below)
    out = lfo("ablate", "--grid", str(grid), "--runs-dir", str(runs), "--launcher", "slurm", "--max-parallel", "2",
              "--detach", "--sbatch", "begin=now+3600", env=slurm)
    assert "3 cell(s) queued on SLURM" in out.stdout
    jobs = [_marker(runs, c)["job_id"] for c in CELLS]
    array = jobs[0].split("_")[0]
    assert jobs == [f"{array}_{i}" for i in range(3)]  # one array, a task per cell
    shown = subprocess.run(["scontrol", "show", "job", array], capture_output=True, text=True, env=run_env,
                           check=True).stdout
    assert f"ArrayJobId={array}" in shown and "JobName=lfo-ref" in shown and "%2" in shown
    assert set(states(runs, slurm).values()) == {"queued"}
    # a second launch into the dir while its array lives is refused in one line naming the jobs
    again = lfo("ablate", "--grid", str(grid), "--runs-dir", str(runs), "--launcher", "slurm", env=slurm, check=False)
    assert again.returncode == 2 and again.stderr.count("\n") == 1
    assert "still queued" in again.stderr and f"{array}_" in again.stderr
    subprocess.run(["scontrol", "update", f"JobId={array}", "StartTime=now"], env=run_env, check=True)

    # cancel the first cell's task mid-run, after its second checkpoint
    victim = CELLS[0]
    wait_for(lambda: (runs / victim / "checkpoint-2" / "trainer_state.json").exists(), what="checkpoint-2")
    subprocess.run(["scancel", jobs[0]], env=run_env, check=True)
    wait_for(lambda: list(states(runs, slurm).values()) == ["interrupted", "failed", "done"], every=1,
             what="the cancelled cell interrupted, the bad one failed, the third done")
    status = lfo("ablate", "--status", "--runs-dir", str(runs), "--json", env=slurm)  # never refused
    shown = {c["cell_id"]: c for c in json.loads(status.stdout)["cells"]}
    assert shown["bad__s0"]["state"] == "failed" and shown["bad__s0"]["job_id"] == jobs[1]
    assert shown["bad__s0"]["note"].startswith("error: ") and "no_such_model" in shown["bad__s0"]["note"]
    assert shown[victim]["state"] == "interrupted" and "signal" in shown[victim]["note"]

    # the next launch resubmits the unfinished cells only; the cancelled one resumes to the same metrics
    done = lfo("ablate", "--grid", str(grid), "--runs-dir", str(runs), "--launcher", "slurm", "--max-parallel", "2",
               env=slurm, check=False)
    assert done.returncode == 1 and "failed: bad__s0" in done.stdout  # the bad cell fails again, alone
    assert _marker(runs, "base__s1")["job_id"] == jobs[2]  # the finished cell was not submitted again
    assert _marker(runs, victim)["job_id"].split("_")[0] != array
    log = (runs / "logs" / f"{victim}.log").read_text()
    assert log.count("=== ") == 2 and " resume on " in log
    assert states(runs, slurm) == {"base__s0": "done", "bad__s0": "failed", "base__s1": "done"}
    for cell in ("base__s0", "base__s1"):
        assert logged_values(runs / cell) == logged_values(local_runs / cell), cell


def test_a_grid_on_ray_survives_a_killed_worker_with_the_local_launchers_metrics(tiny, local_runs, ray_head):
    grid, runs = write_grid(tiny, "ref", steps=STEPS), tiny / "ray_runs"
    cells = ("base__s0", "base__s1")
    victim = cells[0]
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
    for cell in cells:
        marker = json.loads((runs / "cells" / f"{cell}.json").read_text())
        assert marker["launcher"] == "ray" and marker["state"] == "done" and marker["job_id"]
        assert logged_values(runs / cell) == logged_values(local_runs / cell), cell
    assert json.loads((runs / "cells" / f"{victim}.json").read_text())["pid"] != worker

"""`lfo ablate`: grid parsing/validation, the argv it builds, skip/resume/failure, a real kill of the driver."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from lfo_cli.ablate.cells import expand
from lfo_cli.ablate.grid import cell_argv, load_grid
from lfo_cli.ablate.runner import Lock, is_complete, run_grid
from lfo_cli.cli import app
from lfo_cli.errors import LfoError

sys.path.insert(0, str(Path(__file__).parent))
from run_files import rows_by  # noqa: E402

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]

# A stand-in for `lfo train` (which needs a trained warm start): records its start, optionally
# sleeps / fails, and finishes by writing summary.json with status complete, like the trainer.
CELL_SCRIPT = textwrap.dedent(
    """
    import json, os, pathlib, sys, time
    out, seed, cell = pathlib.Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    with open(out.parent / "starts.txt", "a") as fh:
        fh.write(cell + "\\n")
    out.mkdir(parents=True, exist_ok=True)
    (out / "pid.tmp").write_text(str(os.getpid()))
    os.replace(out / "pid.tmp", out / "pid")  # atomic: the test reads it the moment it appears
    print("overrides:", sys.argv[4:], "threads:", os.environ.get("OMP_NUM_THREADS"), flush=True)
    time.sleep(float(os.environ.get("CELL_SLEEP", "0")))
    if os.environ.get("FAIL_SEED") == str(seed):
        print("boom", flush=True)
        sys.exit(3)
    if os.environ.get("NO_SUMMARY") != "1":
        (out / "summary.json").write_text(json.dumps({"status": "complete"}))
    """
)


def _grid(tmp_path: Path, **extra) -> Path:
    script = tmp_path / "cell.py"
    script.write_text(CELL_SCRIPT)
    data = {
        "base": "dual_lora_micro",
        "seeds": [0, 1],
        "set": {"trainer.max_steps": 2},
        "axes": {"wm.coef": [0, 0.5]},
        "command": ["{python}", str(script), "{out}", "{seed}", "{cell}", "{overrides}"],
        **extra,
    }
    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _starts(runs: Path) -> list[str]:
    p = runs / "starts.txt"
    return p.read_text().split() if p.exists() else []


# ---- the grid as data --------------------------------------------------------------------------
def test_real_train_argv_and_resume_argv(tmp_path):
    path = tmp_path / "g.yaml"
    path.write_text(yaml.safe_dump({
        "base": "dual_lora_micro", "seeds": [3], "set": ["trainer.max_steps=5"],
        "axes": {"wm.coef": [0.5], "wm.schedule": ["wm_first:50"]},
        "cells": [{"id": "none", "wm.coef": 0}],
    }))
    grid = load_grid(path, extra_set=["model.name=micro"])
    cells = expand(grid, tmp_path / "runs")
    assert [c.cell_id for c in cells] == ["coef-0.5__schedule-wm_first-50__s3", "none__s3"]
    c = cells[0]
    assert cell_argv(grid, c) == [
        sys.executable, "-m", "lfo_cli", "train", "--recipe", "dual_lora_micro",
        "--set", "trainer.max_steps=5", "--set", "wm.coef=0.5", "--set", "wm.schedule=wm_first:50",
        "--set", "model.name=micro", "--seed", "3", "--out", str(tmp_path / "runs" / c.cell_id),
    ]
    assert cell_argv(grid, c, resume=True) == [sys.executable, "-m", "lfo_cli", "train", "--resume", str(c.run_dir)]
    # the resolved recipe is what `lfo train` would record: overrides applied, seed set
    assert c.resolved["wm"]["schedule"] == "wm_first:50" and c.resolved["seed"] == 3
    assert c.resolved["trainer"]["max_steps"] == 5
    assert cells[1].resolved["wm"]["coef"] == 0.0


@pytest.mark.parametrize(
    "content, needle",
    [
        ("base: dual_lora_micro\nseeds: [0]\naxes: {wm.coeff: [0, 1]}\n", "wm.coeff"),
        ("base: dual_lora_micro\nseeds: [0]\naxes: {wm.predict: [phone, banana]}\n", "banana"),
        ("base: dual_lora_micro\nseeds: [0]\naxes: {wm.coef: [0, 1]\n", "malformed YAML"),
        ("base: dual_lora_micro\nseeds: [0]\naxes: {}\n", "no cells"),
        ("base: dual_lora_micro\nseeds: [0]\naxes: {wm.coef: []}\n", "non-empty"),
        ("base: dual_lora_micro\nseeds: []\naxes: {wm.coef: [0]}\n", "seeds"),
        ("seeds: [0]\naxes: {wm.coef: [0]}\n", "base"),
        ("base: no_such_recipe\nseeds: [0]\naxes: {wm.coef: [0]}\n", "no_such_recipe"),
        ("base: dual_lora_micro\nseeds: [0]\naxes: {wm.coef: [0]}\nsteps: 3\n", "unknown grid key"),
        ("- just\n- a list\n", "mapping"),
    ],
)
def test_bad_grid_exits_2_with_one_line(tmp_path, content, needle):
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    result = CliRunner().invoke(app, ["ablate", "--grid", str(path), "--runs-dir", str(tmp_path / "runs")])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0], result.stderr
    assert not (tmp_path / "runs").exists()  # nothing launched, nothing written


def test_unknown_grid_name_exits_2():
    result = CliRunner().invoke(app, ["ablate", "--grid", "no_such_grid"])
    assert result.exit_code == 2 and "no_such_grid" in result.stderr


def test_shipped_grids_all_validate():
    names = sorted(p.stem for p in (REPO / "recipes" / "grids").glob("*.yaml"))
    expected = {f"{a}_{s}" for a in ("lambda", "predict", "rank", "schedule", "coupling") for s in ("cpu", "gpu")}
    assert expected | {"cpu_headline"} <= set(names)
    for name in names:
        grid = load_grid(name)
        cells = expand(grid, Path("/nonexistent"))
        # calibration probes are one-seed, pilots two: neither is a study
        assert len(grid.seeds) >= 3 or name.startswith("calibration_") or name.endswith("_pilot"), name
        assert cells and all(c.resolved["kind"] == "grpo" for c in cells)
        if name.endswith("_cpu") or name == "cpu_headline":
            assert "micro" in grid.base, name
    lam = {c.resolved["wm"]["coef"] for c in expand(load_grid("lambda_cpu"), Path("/x"))}
    assert lam == {0.0, 0.1, 0.3, 0.5, 1.0, 2.0}
    predict = expand(load_grid("predict_cpu"), Path("/x"))
    assert {(c.resolved["wm"]["predict"], c.resolved["wm"]["coef"] == 0) for c in predict} >= {
        ("phone", False), ("phone_form", False), ("all", False), ("phone", True)}
    headline = expand(load_grid("cpu_headline", extra_set=["model.name=smollm2-135m"]), Path("/x"))
    assert {c.resolved["model"]["name"] for c in headline} == {"smollm2-135m"}  # one --set switches the model



def test_cells_run_seed_major_so_a_stopped_grid_holds_whole_seeds():
    cells = expand(load_grid("observation_cpu"), Path("/x"), validate=False)
    conditions = list(dict.fromkeys(c.condition for c in cells))
    seeds = list(dict.fromkeys(c.seed for c in cells))
    assert [(c.seed, c.condition) for c in cells] == [(s, k) for s in seeds for k in conditions]
    assert len(seeds) >= 4 and conditions[0] == "baseline"

# ---- running ----------------------------------------------------------------------------------
def test_failed_cell_is_recorded_and_the_rest_run(tmp_path, monkeypatch):
    monkeypatch.setenv("FAIL_SEED", "1")
    grid = load_grid(_grid(tmp_path))
    runs = tmp_path / "runs"
    cells = expand(grid, runs)
    records = run_grid(grid, cells, runs, parallel=2, show=False, poll_s=0.05)
    status = {r.cell.cell_id: (r.status, r.exit_code) for r in records}
    assert status == {"coef-0__s0": ("complete", 0), "coef-0__s1": ("failed", 3),
                      "coef-0.5__s0": ("complete", 0), "coef-0.5__s1": ("failed", 3)}
    rows = rows_by(runs / "runs.csv", "cell_id")
    assert rows["coef-0__s1"]["status"] == "failed" and rows["coef-0__s1"]["exit_code"] == "3"
    log = Path(rows["coef-0__s1"]["log"])
    assert "boom" in log.read_text() and "trainer.max_steps=2" in log.read_text()
    if "OMP_NUM_THREADS" not in os.environ:  # two cells at a time: each gets half the cores
        assert f"threads: {max(1, len(os.sched_getaffinity(0)) // 2)}" in log.read_text()
    assert rows["coef-0.5__s0"]["wm.coef"] == "0.5" and rows["coef-0.5__s0"]["seed"] == "0"

    # re-run: complete cells are skipped, failed ones retried (and now succeed)
    monkeypatch.delenv("FAIL_SEED")
    records = run_grid(grid, cells, runs, parallel=1, show=False, poll_s=0.05)
    assert all(r.status == "complete" for r in records)
    assert sorted(_starts(runs)) == sorted(["coef-0__s0", "coef-0__s1", "coef-0.5__s0", "coef-0.5__s1",
                                            "coef-0__s1", "coef-0.5__s1"])
    assert "log" in rows_by(runs / "runs.csv", "cell_id")["coef-0__s1"] and "=== " in log.read_text()


def test_exit_zero_without_summary_is_not_complete(tmp_path, monkeypatch):
    monkeypatch.setenv("NO_SUMMARY", "1")
    grid = load_grid(_grid(tmp_path, seeds=[0], axes={"wm.coef": [0.5]}))
    runs = tmp_path / "runs"
    [rec] = run_grid(grid, expand(grid, runs), runs, show=False, poll_s=0.05)
    assert rec.status == "failed" and rec.exit_code == 0 and "no summary.json" in rec.note
    (rec.cell.run_dir / ".complete").touch()  # the marker alone also counts as complete
    assert is_complete(rec.cell.run_dir)


def test_run_dir_with_another_recipe_is_refused(tmp_path):
    grid_path = _grid(tmp_path, seeds=[0], axes={"wm.coef": [0.5]})
    runs = tmp_path / "runs"
    cell = expand(load_grid(grid_path), runs)[0]
    cell.run_dir.mkdir(parents=True)
    other = dict(cell.resolved, wm={**cell.resolved["wm"], "coef": 2.0})
    (cell.run_dir / "recipe.yaml").write_text(yaml.safe_dump(other))
    result = CliRunner().invoke(app, ["ablate", "--grid", str(grid_path), "--runs-dir", str(runs)])
    assert result.exit_code == 2 and "different recipe" in result.stderr and "wm" in result.stderr
    (cell.run_dir / "recipe.yaml").write_text(yaml.safe_dump(cell.resolved))  # the same recipe is fine
    result = CliRunner().invoke(app, ["ablate", "--grid", str(grid_path), "--runs-dir", str(runs), "--dry-run",
                                      "--json"])
    assert result.exit_code == 0
    [row] = json.loads(result.stdout)["cells"]
    assert row["status"] == "started"


def test_lock_refuses_a_second_driver(tmp_path):
    with Lock(tmp_path / ".ablate.lock"):
        with pytest.raises(LfoError, match="another `lfo ablate`"):
            with Lock(tmp_path / ".ablate.lock"):
                pass
    with Lock(tmp_path / ".ablate.lock"):  # released on exit
        pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purposes
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split()[2] == "Z")


@pytest.mark.long
def test_kill_ablate_and_rerun_finishes_only_the_missing_cells(tmp_path):
    grid_path = _grid(tmp_path)
    runs = tmp_path / "runs"
    cmd = [sys.executable, "-m", "lfo_cli", "ablate", "--grid", str(grid_path), "--runs-dir", str(runs)]
    env = {**os.environ, "CELL_SLEEP": "1.5"}
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    running = None
    while time.monotonic() < deadline:
        if (runs / "runs.csv").exists():
            rows = rows_by(runs / "runs.csv", "cell_id")
            done = [c for c, r in rows.items() if r["status"] == "complete"]
            running = [c for c, r in rows.items() if r["status"] == "running"]
            if len(done) == 2 and running and (runs / running[0] / "pid").exists():
                break
        assert proc.poll() is None, "lfo ablate ended before it could be killed"
        time.sleep(0.05)
    else:
        pytest.fail("lfo ablate did not reach 2 complete cells in time")
    child_pid = int((runs / running[0] / "pid").read_text())
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    # the cell that was running dies with its driver (no orphan left to race with the re-run)
    t0 = time.monotonic()
    while _alive(child_pid) and time.monotonic() - t0 < 10:
        time.sleep(0.05)
    assert not _alive(child_pid)
    assert not (runs / running[0] / "summary.json").exists()
    first = _starts(runs)
    assert len(first) == 3

    out = subprocess.run(cmd + ["--json"], cwd=REPO, env={**os.environ, "CELL_SLEEP": "0"}, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["counts"] == {"complete": 4}
    second = _starts(runs)[len(first):]
    # only the killed cell and the never-started one ran again
    assert sorted(second) == sorted([running[0]] + [c for c in rows_by(runs / "runs.csv", "cell_id") if c not in first])
    assert len(second) == 2
    assert all(r["status"] == "complete" for r in rows_by(runs / "runs.csv", "cell_id").values())


def test_parallel_cells_share_the_cores(tmp_path, monkeypatch):
    from lfo_cli.ablate.runner import child_env

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))  # the cores this process may use
    assert child_env(1)["OMP_NUM_THREADS"] == "8"
    assert child_env(2)["OMP_NUM_THREADS"] == "4"
    assert child_env(16)["OMP_NUM_THREADS"] == "1"
    monkeypatch.setenv("OMP_NUM_THREADS", "3")  # the user's setting wins
    assert child_env(2)["OMP_NUM_THREADS"] == "3"


def test_dry_run_table_prints_list_values_literally(tmp_path):
    """`--set` values are printed as text: `[bold]` is a module name here, not rich markup."""
    grid_path = _grid(tmp_path, seeds=[0], axes={"lora.target_modules": [["bold"]]})
    result = CliRunner().invoke(app, ["ablate", "--grid", str(grid_path), "--runs-dir", str(tmp_path / "runs"),
                                      "--dry-run"], env={"COLUMNS": "1000"})
    assert result.exit_code == 0, result.output
    [argv] = [line for line in result.output.splitlines() if "lora.target_modules=" in line]
    assert "lora.target_modules=[bold]" in argv


def test_dry_run_prints_paste_able_commands_and_estimates_from_finished_cells(tmp_path):
    """Cells run in order on the first free slot: 4 cells at --parallel 2, two finished (10 and 20 min, one
    per condition), one started at half its steps: left = 10 x 0.5 (condition 0) + 20 (condition 0.5)."""
    grid_path, runs = _grid(tmp_path, command=None), tmp_path / "runs"
    cells = expand(load_grid(grid_path), runs)
    assert [c.cell_id for c in cells] == ["coef-0__s0", "coef-0.5__s0", "coef-0__s1", "coef-0.5__s1"]
    args = ["ablate", "--grid", str(grid_path), "--runs-dir", str(runs), "--dry-run", "--parallel", "2"]
    fresh = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert fresh.exit_code == 0 and "no estimate: no cell of this grid has finished yet" in fresh.output
    lines = [ln for ln in fresh.output.splitlines() if ln.startswith("lfo train --recipe dual_lora_micro")]
    assert len(lines) == 4 and "--set trainer.max_steps=2 --set wm.coef=0.5 --seed 0 --out" in lines[1]
    for c in cells[:2]:
        c.run_dir.mkdir(parents=True)
        (c.run_dir / "summary.json").write_text(json.dumps({"status": "complete"}))
    started = cells[2].run_dir
    started.mkdir(parents=True)
    (started / "recipe.yaml").write_text(yaml.safe_dump(cells[2].resolved))
    (started / "checkpoint-1").mkdir()
    (runs / "runs.csv").write_text("cell_id,status,duration_s\ncoef-0__s0,complete,600\ncoef-0.5__s0,complete,1200\n")
    out = json.loads(CliRunner().invoke(app, [*args, "--json"]).stdout)
    left = {r["cell_id"]: (r["status"], r["minutes_left"], r["estimate_from"]) for r in out["cells"]}
    assert left["coef-0__s1"] == ("started", 5.0, "condition")
    assert left["coef-0.5__s1"] == ("pending", 20.0, "condition")
    assert out["wall_minutes"] == 20.0  # two slots: 5 and 20 side by side
    assert out["cells"][2]["command"] == f"lfo train --resume {started}"
    shown = CliRunner().invoke(app, args, env={"COLUMNS": "200"}).output
    assert "estimated wall time of the 2 cells left at --parallel 2: 0.3 h" in shown
    assert shown.count("lfo train") == 2  # only what is left


def test_ablate_list_shows_each_grid_with_its_description():
    from lfo_cli.ablate.grid import available_grids

    listed = json.loads(CliRunner().invoke(app, ["ablate", "--list", "--json"]).stdout)
    assert [g["name"] for g in listed] == available_grids()
    assert all(g["description"] and "\n" not in g["description"] for g in listed)  # one line each
    text = CliRunner().invoke(app, ["ablate", "--list"]).stdout
    assert "observation_cpu" in text and "company exceptions" in text
    missing = CliRunner().invoke(app, ["ablate"])
    assert missing.exit_code == 2 and "--list" in missing.stderr


def test_a_cell_can_run_at_a_subset_of_the_grids_seeds(tmp_path):
    """A calibration: baselines at two seeds, each probe at one."""
    path = _grid(tmp_path, axes={}, cells=[{"id": "baseline", "wm.coef": 0},
                                           {"id": "probe-0.05", "wm.coef": 0.05, "seeds": [1]}])
    cells = expand(load_grid(path), tmp_path / "runs")
    assert [c.cell_id for c in cells] == ["baseline__s0", "baseline__s1", "probe-0.05__s1"]
    for bad, says in (([2], "subset of the grid's seeds"), ([], "subset"), ("1", "subset")):
        with pytest.raises(LfoError, match=says):
            load_grid(_grid(tmp_path, axes={}, cells=[{"id": "p", "wm.coef": 0.1, "seeds": bad}]))
    with pytest.raises(LfoError, match="needs an 'id'"):
        load_grid(_grid(tmp_path, axes={}, cells=[{"wm.coef": 0.1, "seeds": [0]}]))

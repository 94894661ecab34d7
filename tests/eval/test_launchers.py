"""The launchers' common ground without an engine: settings, resources, extras, markers, --status, the lock.
The engines themselves run in tests/cluster (a real SLURM and a real Ray cluster)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from lfo_cli.ablate import launchers
from lfo_cli.ablate.grid import load_grid
from lfo_cli.ablate.launcher_base import ClusterSettings, Launcher
from lfo_cli.ablate.state import Lock, cell_status
from lfo_cli.cli import app
from lfo_cli.errors import LfoError

CELL = textwrap.dedent(
    """
    import json, pathlib, sys
    out, seed = pathlib.Path(sys.argv[1]), int(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    if seed == 1:
        print("error: seed 1 cannot run here", flush=True)
        sys.exit(2)
    (out / "summary.json").write_text(json.dumps({"status": "complete"}))
    """
)


def _grid(tmp_path: Path, **extra) -> Path:
    (tmp_path / "cell.py").write_text(CELL)
    data = {"base": "dual_lora_micro", "seeds": [0, 1], "axes": {"wm.coef": [0]},
            "command": ["{python}", str(tmp_path / "cell.py"), "{out}", "{seed}"], **extra}
    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_the_local_launcher_writes_the_markers_that_status_reads(tmp_path):
    runs = tmp_path / "runs"
    result = CliRunner().invoke(app, ["ablate", "--grid", str(_grid(tmp_path)), "--runs-dir", str(runs)])
    assert result.exit_code == 1  # seed 1 fails
    status = CliRunner().invoke(app, ["ablate", "--status", "--runs-dir", str(runs), "--json"])
    assert status.exit_code == 0, status.output
    cells = {c["cell_id"]: c for c in json.loads(status.stdout)["cells"]}
    assert cells["coef-0__s0"]["state"] == "done" and cells["coef-0__s0"]["launcher"] == "local"
    assert cells["coef-0__s1"]["state"] == "failed"
    assert cells["coef-0__s1"]["note"] == "error: seed 1 cannot run here"
    # the same from the grid file, and the table form
    table = CliRunner().invoke(app, ["ablate", "--status", "--grid", str(tmp_path / "grid.yaml"), "--runs-dir",
                                     str(runs)])
    assert table.exit_code == 0 and "1 done, 1 failed" in " ".join(table.stdout.split())  # wrapped by a long path


def test_a_started_cell_without_a_live_driver_is_interrupted(tmp_path):
    grid = load_grid(_grid(tmp_path))
    from lfo_cli.ablate.cells import expand

    cell = expand(grid, tmp_path / "runs", validate=False)[0]
    cell.run_dir.mkdir(parents=True)
    assert cell_status(cell, tmp_path / "runs", None, False).state == "pending"
    (cell.run_dir / "recipe.yaml").write_text("{}")
    st = cell_status(cell, tmp_path / "runs", None, False)
    assert st.state == "interrupted" and "resumes" in st.note
    from lfo_cli.ablate.state import write_marker

    write_marker(tmp_path / "runs", cell.cell_id, launcher="slurm", state="running", job_id="7_0")
    assert cell_status(cell, tmp_path / "runs", {"7_0": "running"}, False).state == "running"
    assert cell_status(cell, tmp_path / "runs", {}, False).state == "interrupted"  # SLURM no longer holds it


def test_status_needs_a_grid_or_a_runs_dir_and_refuses_an_empty_one(tmp_path):
    r = CliRunner().invoke(app, ["ablate", "--status"])
    assert r.exit_code == 2 and "--status needs --grid NAME or --runs-dir DIR" in r.output
    r = CliRunner().invoke(app, ["ablate", "--status", "--runs-dir", str(tmp_path)])
    assert r.exit_code == 2 and "holds no runs.csv" in r.output


def test_a_missing_extra_is_one_line_naming_the_pip_command(tmp_path, monkeypatch):
    real = launchers.importlib.util.find_spec
    monkeypatch.setattr(launchers.importlib.util, "find_spec", lambda n: None if n == "submitit" else real(n))
    r = CliRunner().invoke(app, ["ablate", "--grid", str(_grid(tmp_path)), "--launcher", "slurm"])
    assert r.exit_code == 2
    assert r.output.strip() == ("error: --launcher slurm needs submitit: pip install 'lfo[slurm]' "
                                "(or pip install submitit)")


@pytest.mark.parametrize("args, needle", [
    (["--launcher", "kubernetes"], "--launcher must be one of local, slurm, ray"),
    (["--detach"], "--detach is for --launcher slurm"),
])
def test_bad_launcher_options_exit_2(tmp_path, args, needle):
    r = CliRunner().invoke(app, ["ablate", "--grid", str(_grid(tmp_path)), *args])
    assert r.exit_code == 2 and needle in r.output


def test_help_and_the_local_launcher_import_no_engine():
    code = ("import sys; from typer.testing import CliRunner; from lfo_cli.cli import app; "
            "from lfo_cli.commands.ablate import _make_launcher; _make_launcher('local', None); "
            "assert CliRunner().invoke(app, ['ablate', '--help']).exit_code == 0; "
            "print(sorted(m for m in ('submitit', 'ray') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_cluster_settings_layer_user_grid_file_and_command_line(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    (tmp_path / "xdg" / "lfo").mkdir(parents=True)
    (tmp_path / "xdg" / "lfo" / "cluster.yaml").write_text(yaml.safe_dump(
        {"slurm": {"partition": "cpu", "account": "lab", "time_min": 30, "setup": "module load cuda"},
         "ray": {"address": "10.0.0.1:6379"}}))
    grid = load_grid(_grid(tmp_path))
    s = launchers.load_settings("slurm", grid)
    assert (s.partition, s.account, s.time_min, s.setup) == ("cpu", "lab", 30, ["module load cuda"])
    (tmp_path / "grid.cluster.yaml").write_text(yaml.safe_dump({"slurm": {"partition": "gpu", "gpus": 1}}))
    s = launchers.load_settings("slurm", grid)
    assert (s.partition, s.account, s.gpus) == ("gpu", "lab", 1)  # beside the grid wins over the user's
    explicit = tmp_path / "mine.yaml"
    explicit.write_text(yaml.safe_dump({"slurm": {"account": "other"}}))
    s = launchers.load_settings("slurm", grid, explicit, partition="debug", time_min=None)
    assert (s.partition, s.account, s.time_min) == ("debug", "other", 30)  # the command line wins; None is unset
    assert launchers.load_settings("ray", grid).address == "10.0.0.1:6379"


@pytest.mark.parametrize("content, needle", [
    ({"kube": {}}, "unknown section(s) kube"),
    ({"slurm": {"partitions": "x"}}, "slurm: unknown setting(s) partitions"),
    ({"slurm": {"time_min": 0}}, "time_min must be an integer >= 1"),
    ({"slurm": {"sbatch": [1]}}, "sbatch is a list of strings"),
])
def test_a_bad_cluster_config_is_one_clear_error(tmp_path, content, needle):
    f = tmp_path / "c.yaml"
    f.write_text(yaml.safe_dump(content))
    with pytest.raises(LfoError, match=None) as err:
        launchers.load_settings("slurm", load_grid(_grid(tmp_path)), f)
    assert needle in str(err.value)


@pytest.mark.parametrize("resources, needle", [
    ({"cpus": 0}, "resources.cpus: must be >= 1"),
    ({"gpus": -1}, "resources.gpus: must be >= 0"),
    ({"mem_gb": 0}, "resources.mem_gb: must be > 0"),
    ({"time_min": 1.5}, "resources.time_min: expected an integer"),
    ({"gpu": 1}, "unknown key(s) gpu"),
    ("4 cpus", "expected a mapping"),
])
def test_bad_grid_resources_exit_2(tmp_path, resources, needle):
    r = CliRunner().invoke(app, ["ablate", "--grid", str(_grid(tmp_path, resources=resources)), "--dry-run"])
    assert r.exit_code == 2 and needle in r.output


def test_grid_resources_reach_the_launcher(tmp_path):
    grid = load_grid(_grid(tmp_path, resources={"cpus": 4, "gpus": 1, "mem_gb": 32, "time_min": 240}))
    assert (grid.resources.cpus, grid.resources.gpus, grid.resources.mem_gb, grid.resources.time_min) == (4, 1, 32.0, 240)
    assert Launcher().threads(grid) == 4
    assert Launcher(ClusterSettings(cpus=2)).threads(grid) == 2


def test_the_lock_names_its_holder(tmp_path):
    with Lock(tmp_path / ".ablate.lock", "slurm"):
        with pytest.raises(LfoError) as err:
            with Lock(tmp_path / ".ablate.lock"):
                pass
    assert f"pid {os.getpid()} on " in str(err.value) and "launcher slurm" in str(err.value)


def test_the_gpu_grids_dry_run_prints_their_cost_from_the_measured_step_time(tmp_path):
    r = CliRunner().invoke(app, ["ablate", "--grid", "reading_gpu", "--runs-dir", str(tmp_path / "rg"), "--dry-run",
                                 "--parallel", "8", "--json"])
    assert r.exit_code == 0, r.output
    plan = json.loads(r.stdout)
    assert len(plan["cells"]) == 48 and plan["estimate_from"] == "step time"
    assert plan["gpu_hours"] == pytest.approx(48 * 90 * 38.2 / 3600)  # cells x steps x measured step time
    assert plan["wall_minutes"] == pytest.approx(6 * 90 * 38.2 / 60)  # 48 cells, 8 at a time
    tw = CliRunner().invoke(app, ["ablate", "--grid", "textworld_gpu", "--runs-dir", str(tmp_path / "tg"), "--dry-run"])
    assert tw.exit_code == 0 and "18 cells x 90 training steps = 17.2 GPU-hours" in tw.stdout
    qwen = CliRunner().invoke(app, ["ablate", "--grid", "reading_gpu_qwen3", "--runs-dir", str(tmp_path / "rq"),
                                    "--dry-run"])
    assert qwen.exit_code == 0 and "48 cells x 90 training steps = 46.7 GPU-hours" in qwen.stdout


@pytest.mark.parametrize("estimate, needle", [
    ({"step_s": 0, "source": "x"}, "estimate.step_s: a measured step time"),
    ({"step_s": 30}, "expected {step_s: SECONDS, source: WHERE MEASURED}"),
    ({"step_s": 30, "source": " "}, "say where the step time was measured"),
])
def test_a_bad_estimate_exits_2(tmp_path, estimate, needle):
    r = CliRunner().invoke(app, ["ablate", "--grid", str(_grid(tmp_path, estimate=estimate)), "--dry-run"])
    assert r.exit_code == 2 and needle in r.output

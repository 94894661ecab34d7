"""scripts/grid_times.py: a grid's per-run minutes, a resumed run counted as one run, and the totals."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _cell(root: Path, cell: str, starts: list[str], duration: float | None, steps: list[float], status: str,
          run_seconds: float | None = None) -> dict:
    run = root / cell
    run.mkdir(parents=True)
    (root / "logs").mkdir(exist_ok=True)
    (root / "logs" / f"{cell}.log").write_text("".join(
        f"=== {t} {'start' if i == 0 else 'resume'}: lfo train ...\nGRPO: ...\n" for i, t in enumerate(starts)))
    rows = [{"step": i + 1, "step_time": t} for i, t in enumerate(steps)]
    rows.insert(1, {"step": 1, "eval_seconds": 7.0})  # an evaluation's seconds count as timed work too
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if status == "complete":
        (run / "summary.json").write_text(json.dumps({"status": "complete",
                                                      **({"run_seconds": run_seconds} if run_seconds else {})}))
    return {"cell_id": cell, "condition": cell.split("__")[0], "seed": 0, "status": status,
            "duration_s": "" if duration is None else duration, "run_dir": str(run)}


def test_minutes_per_run_and_the_grids_totals(tmp_path):
    root = tmp_path / "grid"
    root.mkdir()
    cells = [
        _cell(root, "a__s0", ["2026-01-01 10:00:00"], 600.0, [100.0, 100.0, 93.0], "complete"),  # 300 s timed: ratio 2
        _cell(root, "b__s0", ["2026-01-01 10:00:00"], 900.0, [150.0, 150.0, 143.0], "complete"),  # ratio 2
        _cell(root, "c__s0", ["2026-01-01 10:10:00", "2026-01-02 09:00:00"], 60.0, [120.0, 120.0, 113.0],
              "complete"),  # resumed: 360 s timed x the median ratio 2
        _cell(root, "d__s0", ["2026-01-01 10:15:00", "2026-01-02 09:00:00"], 30.0, [743.0], "complete",
              run_seconds=750.0),  # summary's run_seconds is timed work too: x 2
        _cell(root, "e__s0", ["2026-01-02 09:30:00"], None, [5.0], "running"),
    ]
    with (root / "runs.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(cells[0]))
        w.writeheader()
        w.writerows(cells)
    out = tmp_path / "times.csv"
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "grid_times.py"), str(root), "--csv", str(out)],
                          capture_output=True, text=True, check=True)
    with out.open(newline="") as fh:
        got = {r["cell_id"]: r for r in csv.DictReader(fh)}
    assert [(got[c]["method"], got[c]["invocations"]) for c in ("a__s0", "b__s0", "c__s0", "d__s0", "e__s0")] == [
        ("measured", "1"), ("measured", "1"), ("estimated", "2"), ("estimated", "2"), ("incomplete", "1")]
    assert [float(got[c]["minutes"]) for c in ("a__s0", "b__s0", "c__s0", "d__s0")] == [10.0, 15.0, 12.0, 25.0]
    assert got["e__s0"]["minutes"] == ""
    # 62 minutes on one thread each: 1.03 CPU-hours, half that of wall time two at a time
    assert "4/5 cells timed" in done.stdout and "1.0 CPU-hours; 0.5 h of wall time at 2 at once" in done.stdout
    assert "10.0 / 13.5 / 25.0 (min / median / max)" in done.stdout


def test_a_dir_without_runs_csv_is_one_error(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "grid_times.py"), str(tmp_path)],
                          capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.startswith("error:") and len(done.stderr.splitlines()) == 1


@pytest.mark.parametrize("parallel", [1, 4])
def test_active_wall_time_divides_by_the_runs_at_once(tmp_path, parallel):
    sys.path.insert(0, str(ROOT / "scripts"))
    from grid_times import totals

    rows = [{"minutes": 30.0, "method": "measured", "first_start": "", "finished": None}] * 4
    t = totals(rows, parallel)
    assert t["cpu_hours"] == 2.0 and t["active_wall_hours"] == pytest.approx(2.0 / parallel)

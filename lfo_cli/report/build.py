"""`lfo report`: run dirs -> tidy table, figures (PNG + CSV), tables and ``index.md``.

Every number in ``index.md`` is computed here from the runs on disk; when the data cannot support a
statement the text says so ("not reached", "insufficient runs", "no effect detected"). Output is
deterministic: sorted rows, fixed float formats, fixed bootstrap seeds and PNGs without a software
or date stamp, so re-running on the same runs gives byte-identical files.
"""


from __future__ import annotations

import math
from pathlib import Path

from lfo_cli import run_record as rr
from lfo_cli.errors import LfoError
from lfo_cli.io import atomic_write_json, read_json
from lfo_cli.report import calibration, declared, gain_section, study
from lfo_cli.report.document import Report
from lfo_cli.report.format import Writer, clean
from lfo_cli.report.index import write_index
from lfo_cli.report.load import assign_conditions, condition_order, load_runs
from lfo_cli.report.plan import load_plan
from lfo_cli.report.run_stats import seed_key
from lfo_cli.report.training import training_sections
from lfo_cli.report.wmil_section import wmil_section


def build_report(paths: list[Path], out: Path, corr_window: int | None = None) -> dict:
    """Write the whole report into ``out``; return the machine-readable summary (also summary.json)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    plt.rcParams.update({"figure.max_open_warning": 0, "path.simplify": False})
    runs, skipped = load_runs(paths)
    if not runs:
        where = ", ".join(str(p) for p in paths)
        extra = f" ({len(skipped)} unreadable: {skipped[0][1]})" if skipped else ""
        raise LfoError(f"no run dirs found under {where}{extra}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rep = Report(out, Writer(out), runs, skipped)
    plan = load_plan(paths)
    varying = assign_conditions(runs, plan)
    train = sorted([r for r in runs if r.kind == "grpo"], key=lambda r: (r.condition, *seed_key(r)))
    wmil = sorted([r for r in runs if r.kind == "wmil"], key=lambda r: (r.condition, *seed_key(r)))
    others = sorted({r.kind for r in runs} - {"grpo", "wmil"})

    _tidy(rep, pd)
    rep.summary.update({
        "runs": len(runs), "training_runs": len(train), "wmil_runs": len(wmil),
        "other_runs": {k: sum(r.kind == k for r in runs) for k in others},
        "skipped": [{"run": s, "reason": why} for s, why in skipped],
    })
    if train:
        if gain_section.applies(train):  # one run per condition: each against its own start, first
            gain_section.gain_section(rep, train, pd, plt)
        training_sections(rep, train, varying.get("grpo", []), corr_window, pd, plt)
        if study.applies(train):
            study.study_section(rep, train, condition_order(train, "grpo", varying.get("grpo", [])), pd, plt)
        if plan is None and calibration.applies(train):  # a declared study's arms are not calibration probes
            calibration.calibration_section(rep, train, pd)
        if declared.applies(plan, train):
            declared.declared_section(rep, plan, train, pd, plt)
    else:
        rep.notes.append("No training (`lfo train`, kind grpo) runs: learning curves, sample efficiency, ablations, "
                         "gradient norms, difficulty, behaviour and transfer sections are skipped.")
    if wmil:
        wmil_section(rep, wmil, varying.get("wmil", []), pd, plt)
    else:
        rep.notes.append("No WMIL (`lfo wmil train`) runs: the WMIL section is skipped.")
    write_index(rep, train, wmil, others)
    rep.writer.files.append("summary.json")
    rep.writer.files.append("manifest.json")
    summary = clean(rep.summary)
    summary["files"] = sorted(set(rep.writer.files))
    atomic_write_json(out / "summary.json", summary)
    _manifest(out, summary["files"])
    return summary


def _manifest(out: Path, files: list[str]) -> None:
    """Remove files a previous report wrote that this one did not (no stale figures), then record ours."""
    old = out / "manifest.json"
    if old.is_file():
        try:
            previous = read_json(old).get("files", [])
        except Exception:  # noqa: BLE001 - a corrupt manifest only disables the clean-up
            previous = []
        for name in previous:
            if name not in files and "/" not in name and (out / name).is_file():
                (out / name).unlink()
    atomic_write_json(out / "manifest.json", {"files": files})


def _tidy(rep: Report, pd) -> None:
    recs = []
    for r in rep.runs:
        for row in r.rows:
            tasks = row.get(rr.TASKS_SEEN, math.nan)
            for k, v in row.items():
                if k in (rr.STEP, rr.TASKS_SEEN):
                    continue
                recs.append((r.name, r.kind, r.condition, r.seed if r.seed is not None else -1, row[rr.STEP], tasks, k, v))
    df = pd.DataFrame(recs, columns=["run", "kind", "condition", "seed", "step", "tasks_seen", "metric", "value"])
    df = df.sort_values(["run", "step", "metric"], kind="stable")
    rep.writer.csv("tidy.csv.gz", df)  # every logged value: the largest file, gzipped
    runs_df = pd.DataFrame([{"run": r.name, "kind": r.kind, "condition": r.condition, "seed": r.seed,
                             "status": r.status, "rows": len(r.rows), "commit": r.commit or "",
                             "last_step": max((row[rr.STEP] for row in r.rows), default=math.nan)}
                            for r in sorted(rep.runs, key=lambda r: r.name)])
    rep.writer.csv("runs.csv", runs_df)


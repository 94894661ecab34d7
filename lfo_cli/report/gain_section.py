""""Gain over the start": with one run per condition, the only comparison a report can make is each run against
its own step 0, on the same validation episodes (paired per episode, bootstrap interval: the run's
``val/vs_start/...``), for success and each sub-skill its world names. A table (``gain_over_start.csv``), the
curves behind it (``gain_curves.png`` + ``.csv``: training reward per step, validation success and the skills at
each evaluation) and one sentence per comparison, the words `lfo train` ends with."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from lfo_cli import run_record as rr
from lfo_cli.report.document import Report
from lfo_cli.report.final_metrics import world_of
from lfo_cli.report.gain import gain_rows
from lfo_cli.report.load import Run


def applies(train: list[Run]) -> bool:
    """One run per condition (several seeds: the paired sections compare conditions instead), and a run that
    holds a comparison with its start."""
    return bool(train) and max(Counter(r.condition for r in train).values()) == 1 and \
        any(gain_rows(r.summary) for r in train)


def gain_section(rep: Report, train: list[Run], pd, plt) -> None:
    skills = dict(world_of(train).paired_skills)
    rows = []
    for r in train:
        for row in gain_rows(r.summary, skills):
            rows.append({"run": Path(r.name).name, **row})
    if not rows:
        return
    table = pd.DataFrame(rows, columns=["run", "split", "measure", "step", "start", "final", "diff", "diff_low",
                                        "diff_high", "n", "side", "sentence"])
    rep.writer.csv("gain_over_start.csv", table)
    rep.summary["gains"] = [{k: row[k] for k in ("run", "measure", "label", "side", "diff", "diff_low", "diff_high",
                                                 "sentence")} for row in rows]
    md = ["### Gain over the start\n",
          "Each run's last validation against its own step 0 (the warm start) on the same episodes, paired per "
          "episode; 95% bootstrap interval of the difference, in points. A gain is claimed only where the interval "
          "lies above 0.\n",
          "| run | measure | step | start | final | difference [95% CI] | episodes |",
          "| --- | --- | --- | --- | --- | --- | --- |"]
    for row in rows:
        md.append(f"| `{row['run']}` | {row['split']} {row['label']} | {row['step']} | {100 * row['start']:.1f}% | "
                  f"{100 * row['final']:.1f}% | {100 * row['diff']:+.1f} [{100 * row['diff_low']:+.1f}, "
                  f"{100 * row['diff_high']:+.1f}] | {row['n']} |")
    md.append("\nData: `gain_over_start.csv`.")
    rep.md.append("\n".join(md))
    _curves(rep, train, skills, pd, plt)


def _curves(rep: Report, train: list[Run], skills: dict[str, str], pd, plt) -> None:
    """Training reward per step, and validation success and each skill at each evaluation, per run."""
    measures = [(rr.VAL_SUCCESS, "validation success")] + [(rr.metric(rr.VAL, s), f"validation: {w}")
                                                            for s, w in skills.items()]
    points = []
    for r in train:
        for row in r.rows:
            step = row.get("step")
            if step is None:
                continue
            if rr.REWARD in row:
                points.append({"run": Path(r.name).name, "step": step, "metric": rr.REWARD, "value": row[rr.REWARD]})
            for key, _ in measures:
                if key in row:
                    points.append({"run": Path(r.name).name, "step": step, "metric": key, "value": row[key]})
    curves = pd.DataFrame(points, columns=["run", "step", "metric", "value"])
    if curves.empty:
        return
    curves = curves.sort_values(["run", "metric", "step"], kind="stable").reset_index(drop=True)
    rep.writer.csv("gain_curves.csv", curves)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for i, (run, sub) in enumerate(curves.groupby("run", sort=True)):
        reward = sub[sub.metric == rr.REWARD]
        left.plot(reward.step, reward.value, color=f"C{i % 10}", linewidth=0.8, alpha=0.5)
        left.plot(reward.step, reward.value.rolling(5, min_periods=1).mean(), color=f"C{i % 10}", linewidth=2,
                  label=f"{run} (mean of the last 5 steps)")
        for j, (key, label) in enumerate(measures):
            val = sub[sub.metric == key]
            if not val.empty:
                right.plot(val.step, val.value, marker="os^vD"[j % 5], color=f"C{(i + j) % 10}",
                           linestyle="--" if key == rr.VAL_SUCCESS else "-", label=f"{label} ({run})")
    left.set(xlabel="training step", ylabel="mean reward of the step's rollouts", title="Training reward")
    right.set(xlabel="training step", ylabel="share of validation episodes", ylim=(-0.02, 1.02),
              title="Validation, same episodes at every evaluation")
    left.legend(fontsize=7)
    right.legend(fontsize=7)
    fig.tight_layout()
    rep.writer.figure("gain_curves.png", fig)
    rep.md.append("![gain over the start](gain_curves.png)\n\nData: `gain_curves.csv`.")

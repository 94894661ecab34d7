"""A run against its own start: its last validation and its step 0 on the same episodes, paired per episode
(`val/vs_start/...` of a run's summary, :func:`lfo_cli.train.run_metrics.vs_start`), for success and for each
sub-skill its world names (``World.paired_skills``). One sentence each, the same words on the console
(`lfo train`, `lfo report`) and in a report: "better than at step 0 by X [CI]" only where the paired interval
lies above 0, else said plainly."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lfo_cli import run_record as rr

SPLIT_LABELS = {rr.VAL: "validation", rr.HELDOUT: "held-out"}


def gain_row(summary: Mapping[str, Any], prefix: str = rr.VAL, skill: str | None = None) -> dict[str, Any] | None:
    """One comparison's numbers (start, final, diff and its 95% interval, n, side: +1 above 0, -1 below, 0
    holds 0), or None where the summary has no such comparison."""
    def get(stat: str):
        return summary.get(rr.vs_start_key(prefix, stat, skill=skill))

    diff, low, high, n = get(rr.MEAN_DIFF), get("diff_low"), get("diff_high"), get("n")
    if diff is None or low is None or high is None or not n or get(rr.START_SUCCESS) is None:
        return None
    return {"split": SPLIT_LABELS.get(prefix, prefix), "measure": skill or rr.SUCCESS, "step": summary.get("steps"),
            "start": get(rr.START_SUCCESS), "final": get(rr.FINAL_SUCCESS), "diff": diff, "diff_low": low,
            "diff_high": high, "n": int(n), "side": 1 if low > 0 else -1 if high < 0 else 0}


def gain_sentence(row: Mapping[str, Any], label: str | None = None) -> str:
    """"validation success at step 30: 50.0% -> 60.0% over 300 paired episodes: better than at step 0 by 10.0
    points [95% CI +4.0, +16.0]" (``label``: the measure's words, e.g. a skill's)."""
    pts = lambda x: f"{100 * x:+.1f}"  # noqa: E731
    ci = f"[95% CI {pts(row['diff_low'])}, {pts(row['diff_high'])}]"
    by = f"{100 * abs(row['diff']):.1f} points {ci}"
    what = {1: f"better than at step 0 by {by}", -1: f"worse than at step 0 by {by}"}.get(
        row["side"], f"no change from step 0 detected: {pts(row['diff'])} points {ci} holds 0")
    return (f"{row['split']} {label or row['measure']} at step {row['step']}: {100 * row['start']:.1f}% -> "
            f"{100 * row['final']:.1f}% over {row['n']} paired episodes: {what}")


def gain_rows(summary: Mapping[str, Any], skills: Mapping[str, str] = {}, prefix: str = rr.VAL) -> list[dict[str, Any]]:
    """Success, then each of ``skills`` (name -> words) the summary compares, each row with its ``label`` (the
    measure's words) and ``sentence``."""
    rows = []
    for skill in (None, *skills):
        row = gain_row(summary, prefix, skill)
        if row is not None:
            label = skills[skill] if skill else rr.SUCCESS
            rows.append({**row, "label": label, "sentence": gain_sentence(row, label)})
    return rows


def gain_line(summary: Mapping[str, Any], prefix: str = rr.VAL) -> str | None:
    """The success sentence alone (None without both evaluations)."""
    row = gain_row(summary, prefix)
    return gain_sentence(row) if row else None

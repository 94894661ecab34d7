"""What a warm-start run shows of its evaluation: ``eval_by_difficulty.{csv,png}`` and a summary table."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lfo_cli import run_record as rr
from lfo_cli.io import atomic_write_text


def write_eval_tables(out_dir: Path, summary: dict[str, Any]) -> None:
    """eval_by_difficulty.csv and .png (model vs the noisy teacher on the same val tasks)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    diffs = sorted({int(k.rsplit("_d", 1)[1]) for k in summary
                    if k.startswith(rr.EVAL_SUCCESS_AT) and "_" not in k.rsplit("_d", 1)[1]})
    df = pd.DataFrame(
        {
            "difficulty": diffs,
            "episodes": [summary.get(f"{rr.EVAL_EPISODES_AT}{d}") for d in diffs],
            "model_success": [summary.get(f"{rr.EVAL_SUCCESS_AT}{d}") for d in diffs],
            "teacher_success": [summary.get(f"{rr.TEACHER_SUCCESS_AT}{d}") for d in diffs],
        }
    )
    atomic_write_text(out_dir / "eval_by_difficulty.csv", df.to_csv(index=False))
    fig, ax = plt.subplots(figsize=(5, 3))
    x = range(len(diffs))
    ax.bar([i - 0.2 for i in x], df["model_success"].fillna(0), width=0.4, label="warm-started model")
    ax.bar([i + 0.2 for i in x], df["teacher_success"].fillna(0), width=0.4, label="teacher (prior + noise)")
    ax.set_xticks(list(x), [str(d) for d in diffs])
    ax.set_xlabel("difficulty")
    ax.set_ylabel("val success")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=7)
    ax.set_title(f"valid tool calls: {summary[rr.EVAL_VALID_TOOL_CALL_RATE]:.1%}")
    fig.tight_layout()
    tmp = out_dir / ".eval_by_difficulty.png.tmp"
    fig.savefig(tmp, format="png", dpi=120)
    plt.close(fig)
    tmp.replace(out_dir / "eval_by_difficulty.png")


def summary_rows(summary: dict[str, Any], categories: Mapping[str, tuple] | None = None) -> list[tuple[str, str]]:
    """The few figures a warm start is judged by, as (label, value) rows; every metric is in summary.json. Of each
    of the world's ``categories`` (``World.episode_categories``), the share of its first value."""
    def f(key: str, fmt: str = ".3f") -> str | None:
        v = summary.get(key)
        return format(v, fmt) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    def by_difficulty(prefix: str) -> str | None:
        got = [(d, v) for d in range(1, 6) if (v := f(f"{prefix}{d}", ".2f")) is not None]
        if not got:
            return None
        ds = [d for d, _ in got]
        label = f"d{ds[0]}-{ds[-1]}" if ds == list(range(ds[0], ds[-1] + 1)) and len(ds) > 1 else ", ".join(f"d{d}" for d in ds)
        return f"{label}: " + " / ".join(v for _, v in got)

    by_d, teacher = by_difficulty(rr.EVAL_SUCCESS_AT), by_difficulty(rr.TEACHER_SUCCESS_AT)
    rows = [
        ("SFT", f"{f(rr.TRAIN_STEPS, 'd') or '?'} steps, {f(rr.TRAIN_SECONDS, '.0f') or '?'} s, final loss "
                f"{f(rr.TRAIN_LOSS, '.3f') or '?'}"),
        ("data", f"{f('data/trajectories', 'd')} trajectories -> {f('data/sequences', 'd')} sequences"
                 if f("data/trajectories", "d") and f("data/sequences", "d") else None),
        ("valid tool calls", f(rr.EVAL_VALID_TOOL_CALL_RATE)),
        ("well-formed turns", f(rr.EVAL_WELLFORMED_TURN_RATE)),
        ("success", f(rr.EVAL_SUCCESS_RATE)),
        ("success by difficulty", by_d),
        ("the teacher, by difficulty", teacher),
        *((f"{name}: {values[0]}".replace("_", " "), f(rr.eval_category(name, values[0])))
          for name, values in (categories or {}).items() if values and values[0]),
    ]
    return [(k, v) for k, v in rows if v]


def print_summary(summary: dict[str, Any], categories: Mapping[str, tuple] | None = None) -> None:
    from rich.console import Console
    from rich.table import Table

    eps = summary.get(rr.EVAL_EPISODES)
    title = (f"warm start: {eps} val episodes at temperature {summary.get(rr.EVAL_TEMPERATURE, 1.0):.1f}" if eps
             else "warm start")
    table = Table(title=title, caption="every metric: summary.json")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for k, v in summary_rows(summary, categories):
        table.add_row(k, v)
    Console().print(table)


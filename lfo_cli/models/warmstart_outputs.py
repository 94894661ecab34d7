"""What a warm-start run shows of its evaluation: ``eval_by_difficulty.{csv,png}`` and a summary table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lfo_cli.io import atomic_write_text


def write_eval_tables(out_dir: Path, summary: dict[str, Any]) -> None:
    """eval_by_difficulty.csv and .png (model vs the noisy teacher on the same val tasks)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    diffs = sorted({int(k.rsplit("_d", 1)[1]) for k in summary if k.startswith("eval/success_d") and "_" not in k.rsplit("_d", 1)[1]})
    df = pd.DataFrame(
        {
            "difficulty": diffs,
            "episodes": [summary.get(f"eval/episodes_d{d}") for d in diffs],
            "model_success": [summary.get(f"eval/success_d{d}") for d in diffs],
            "teacher_success": [summary.get(f"teacher/success_d{d}") for d in diffs],
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
    ax.set_title(f"valid tool calls: {summary['eval/valid_tool_call_rate']:.1%}")
    fig.tight_layout()
    tmp = out_dir / ".eval_by_difficulty.png.tmp"
    fig.savefig(tmp, format="png", dpi=120)
    plt.close(fig)
    tmp.replace(out_dir / "eval_by_difficulty.png")


def print_summary(summary: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"warm start: evaluation on val tasks (temperature {summary.get('eval/temperature', 1.0):.1f})")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for k, v in summary.items():
        if k.startswith(("eval/", "teacher/", "data/", "train/")):
            table.add_row(k, f"{v:.3f}" if isinstance(v, float) else str(v))
    Console().print(table)


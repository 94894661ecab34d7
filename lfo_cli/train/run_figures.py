"""A GRPO run's own curves vs tasks seen: ``curves.csv`` (the data) and ``curves.png``."""

from __future__ import annotations

from pathlib import Path

from lfo_cli import run_record as rr
from lfo_cli.io import atomic_write_text, iter_jsonl

FIGURE_METRICS = (
    (rr.VAL_SUCCESS, "validation success"),
    (rr.LOSS_POLICY, "policy loss"),
    (rr.LOSS_WM, "world-model loss"),
    (rr.WM_TOKEN_ACC, "world-model token accuracy"),
    (rr.GRAD_POLICY, "grad norm: policy adapter"),
    (rr.GRAD_WM, "grad norm: world-model adapter"),
)


def write_run_figures(run_dir: Path) -> list[str]:
    """The run's own curves vs tasks seen: `curves.csv` (the data) and `curves.png`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    path = Path(run_dir) / rr.METRICS_FILE
    if not path.is_file():
        return []
    df = pd.DataFrame(list(iter_jsonl(path)))
    present = [(k, t) for k, t in FIGURE_METRICS if k in df.columns and df[k].notna().any()]
    if not present:
        return []
    cols = [rr.STEP, rr.TASKS_SEEN] + [k for k, _ in present]
    table = df[cols].groupby([rr.STEP, rr.TASKS_SEEN], as_index=False).last().sort_values(rr.STEP)
    atomic_write_text(Path(run_dir) / "curves.csv", table.to_csv(index=False, float_format="%.6g"))
    fig, axes = plt.subplots(1, len(present), figsize=(3.2 * len(present), 2.8), squeeze=False)
    for ax, (key, title) in zip(axes[0], present, strict=True):
        sub = table[[rr.TASKS_SEEN, key]].dropna()
        ax.plot(sub[rr.TASKS_SEEN], sub[key], marker="." if len(sub) < 30 else None)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("tasks seen", fontsize=8)
        ax.tick_params(labelsize=7)
    fig.tight_layout()
    tmp = Path(run_dir) / ".curves.png.tmp"
    fig.savefig(tmp, format="png", dpi=110, metadata={"Software": None})
    plt.close(fig)
    tmp.replace(Path(run_dir) / "curves.png")
    return ["curves.csv", "curves.png"]

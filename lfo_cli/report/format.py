"""Formatting and writing for `lfo report`: numbers for text, JSON-safe values, markdown tables, and a
writer that records every file it writes (the report's manifest). Deterministic: fixed float formats,
PNGs without a software or date stamp."""

from __future__ import annotations

import gzip
import io
import math
from pathlib import Path
from typing import Any

from lfo_cli import stats
from lfo_cli.io import atomic_write_bytes, atomic_write_text


def finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def interval_side(low: Any, high: Any) -> int:
    """Which side of 0 an interval lies on: +1 when it lies above 0, -1 below, 0 when it holds 0 or an end is
    missing or not finite."""
    if finite(low) and low > 0:
        return 1
    if finite(high) and high < 0:
        return -1
    return 0


def num(x: Any) -> str:
    """One number for text: integers and large values without decimals, else 3 significant digits."""
    if not finite(x):
        return "n/a"
    if abs(x) < 1e-12:  # float residue of a mean of cancelling differences (e.g. 5.8e-19) reads as 0
        return "0"
    if abs(x) >= 100 or float(x).is_integer():
        return f"{x:.0f}"
    return f"{x:.3g}"


def est(e: stats.Estimate | dict) -> str:
    d = e.as_dict() if hasattr(e, "as_dict") else e
    if not finite(d.get("value")):
        return "n/a"
    if finite(d.get("low")) and finite(d.get("high")):
        return f"{num(d['value'])} [{num(d['low'])}, {num(d['high'])}]"
    return f"{num(d['value'])} (n={d.get('n', 1)}, no CI)"


def pval(p: Any) -> str:
    return "n/a" if not finite(p) else f"{p:.3g}"


# Significant digits a report keeps of a float: a statistic's last bits differ between CPUs (SIMD width and
# BLAS kernels change the summation order), and the report must regenerate byte for byte on any machine.
SIGNIFICANT = 12


def clean(obj: Any) -> Any:
    """JSON-safe: nan/inf -> None, floats to :data:`SIGNIFICANT` digits, tuples -> lists, dataclasses via as_dict."""
    if hasattr(obj, "as_dict"):
        obj = obj.as_dict()
    if isinstance(obj, dict):
        return {str(k): clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [clean(v) for v in obj]
    if isinstance(obj, float):
        return float(f"{obj:.{SIGNIFICANT}g}") if math.isfinite(obj) else None
    if hasattr(obj, "item") and not isinstance(obj, (str, bytes)):  # numpy scalars
        return clean(obj.item())
    return obj


class Writer:
    """Writes into the report dir (atomically) and remembers what it wrote (for manifest.json)."""

    def __init__(self, out: Path):
        self.out = Path(out)
        self.files: list[str] = []

    def csv(self, name: str, df) -> str:
        """``name`` ending in ``.gz``: gzip with no timestamp, so the same table gives the same bytes."""
        text = df.to_csv(index=False, float_format="%.6g", lineterminator="\n")
        if name.endswith(".gz"):
            atomic_write_bytes(self.out / name, gzip.compress(text.encode("utf-8"), mtime=0))
        else:
            atomic_write_text(self.out / name, text)
        self.files.append(name)
        return name

    def text(self, name: str, text: str) -> str:
        atomic_write_text(self.out / name, text)
        self.files.append(name)
        return name

    def figure(self, name: str, fig) -> str:
        import matplotlib.pyplot as plt

        buf = io.BytesIO()
        # No Software/date stamp: the same data gives the same bytes.
        fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
        plt.close(fig)
        atomic_write_bytes(self.out / name, buf.getvalue())
        self.files.append(name)
        return name


def md_table(df, columns: list[str] | None = None) -> str:
    cols = columns or list(df.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, row in df.iterrows():
        cells = []
        for c in cols:
            v = row[c]
            cells.append(num(v) if isinstance(v, float) else str(v))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)

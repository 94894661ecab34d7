"""The report being written: its writer, the markdown sections, the machine-readable summary and notes."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lfo_cli.report.format import Writer
from lfo_cli.report.load import Run


@dataclass
class Report:
    out: Path
    writer: Writer
    runs: list[Run]
    skipped: list[tuple[str, str]]
    md: list[str] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # figures/sections skipped, with why

"""What the WMIL commands print: a rich table, every column right-aligned, at least 120 characters wide."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def print_table(title: str, columns: Sequence[str], rows: Iterable[Sequence[str]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for col in columns:
        table.add_column(col, justify="right")
    for row in rows:
        table.add_row(*row)
    Console(width=max(Console().width, 120)).print(table)

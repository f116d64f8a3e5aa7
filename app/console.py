"""Terminal output of the CLI: aligned tables (rich), JSON for scripts, and progress."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

STATE_STYLES = {
    "succeeded": "green",
    "completed": "green",
    "failed": "red",
    "timed_out": "red",
    "lost": "red",
    "dead": "bold red",
    "running": "cyan",
    "queued": "yellow",
    "paused": "yellow",
    "cancelled": "dim",
    "skipped": "dim",
}


def console() -> Console:
    # Rendered at the terminal's width, or wide enough for tables when piped.
    return Console(highlight=False, width=None if sys.stdout.isatty() else 200)


def fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def table(
    rows: Sequence[dict[str, Any]], columns: Sequence[str], title: str | None = None
) -> Table:
    out = Table(
        title=escape(title) if title else None, header_style="bold", box=None, pad_edge=False
    )
    for column in columns:
        out.add_column(column.upper(), no_wrap=column != "error", overflow="fold")
    for row in rows:
        cells = []
        for column in columns:
            text = fmt(row.get(column))
            style = STATE_STYLES.get(text) if column.endswith("state") else None
            cells.append(f"[{style}]{text}[/]" if style else escape(text))
        out.add_row(*cells)
    return out


def print_table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> None:
    console().print(table(rows, columns))


def to_json(value: Any, *, indent: int | None = 2) -> str:
    return json.dumps(value, default=_json_value, indent=indent, sort_keys=indent is None)


def _json_value(value: Any) -> Any:
    if isinstance(value, Decimal):
        return float(value)
    return fmt(value)


def print_json(value: Any) -> None:
    click.echo(to_json(value))


@contextmanager
def progress(description: str, total: int | None) -> Iterator[Progress]:
    """A progress bar on stderr, only on a terminal (scripts get no stray output)."""
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
        disable=not sys.stderr.isatty(),
    )
    with bar:
        bar.add_task(description, total=total)
        yield bar

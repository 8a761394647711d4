"""How list commands print: a Rich table that fits the terminal, ``--json`` for programs,
``--csv`` for spreadsheets, and ``-o/--format`` to choose the columns (as sacct and squeue
do)."""

import json
import re
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from gpupool.model import SpecError
from gpupool.spreadsheet import csv_text

FORMAT_HELP = "Comma list of columns to show, of: "
# C0 and C1 control characters (ESC starts terminal sequences; CSI is \x9b) and DEL
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def visible(text: str) -> str:
    """``text`` with every control character shown as an escape (``\x1b``): a job's name or
    reason never reaches the terminal of whoever lists it as a sequence the terminal obeys."""
    return CONTROL.sub(lambda m: f"\\x{ord(m[0]):02x}", text)


class SafeTable(Table):
    """A table of strings that came from the server: control characters made visible and
    Rich markup (``[red]``, ``[link=...]``) shown as the text it is."""

    def __init__(self, *headers: str, **kwargs: Any):
        if isinstance(kwargs.get("title"), str):
            kwargs["title"] = escape(visible(kwargs["title"]))
        super().__init__(*headers, **kwargs)

    def add_row(self, *cells: Any, **kwargs: Any) -> None:
        safe = [escape(visible(c)) if isinstance(c, str) else c for c in cells]
        super().add_row(*safe, **kwargs)

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "caption" and isinstance(value, str):
            value = escape(visible(value))
        super().__setattr__(name, value)


def local(t: float | None) -> str:
    """Epoch seconds as ISO 8601 in the user's zone (``TZ``), to the minute (tables; their
    caption or the command's help says the zone once)."""
    if t is None:
        return "-"
    return datetime.fromtimestamp(t).astimezone().strftime("%Y-%m-%d %H:%M")


def _offset(stamp: datetime) -> str:
    """An aware time's UTC offset as +08:00."""
    z = stamp.strftime("%z")
    return f"{z[:3]}:{z[3:]}"


def zoned(t: float | None) -> str:
    """``local`` with its UTC offset, for a time said in a sentence: 2026-12-21 09:00 +08:00."""
    if t is None:
        return "-"
    return f"{local(t)} {_offset(datetime.fromtimestamp(t).astimezone())}"


def zone_now() -> str:
    """The user's UTC offset now, for a table's caption: UTC+08:00."""
    return "UTC" + _offset(datetime.now().astimezone())


def epoch(text: str | None) -> float | None:
    """An ISO 8601 time the API gave (``2027-01-31T16:00:00Z``) as epoch seconds."""
    if text is None:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


# a moment in UTC as the server writes one into a sentence (a reason, an error): to the
# minute or the second, with Z or +00:00
UTC_STAMP = re.compile(r"\b(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2})(:\d{2}(?:\.\d+)?)?(?:Z|\+00:00)")


def users_zone(text: str) -> str:
    """The server's words with every UTC moment in them said in the user's zone, with its
    offset (``expected start by 2026-12-03T15:04Z`` → ``… by 2026-12-03 23:04 +08:00``): the
    API writes UTC, a person reads their own time (issue 59)."""

    def local_stamp(m: re.Match[str]) -> str:
        seconds = m[3] or ""
        at = datetime.fromisoformat(f"{m[1]}T{m[2]}{seconds}+00:00").astimezone()
        shown = at.strftime("%Y-%m-%d %H:%M:%S" if seconds[1:3] not in ("", "00") else
                            "%Y-%m-%d %H:%M")  # fmt: skip
        return f"{shown} {_offset(at)}"

    return UTC_STAMP.sub(local_stamp, text)


def show(data: Any, as_json: bool, text: str | Table) -> None:
    """``data`` as JSON, or a table or a line for people."""
    if as_json:
        typer.echo(json.dumps(data, indent=2))
    elif isinstance(text, Table):
        Console().print(text)
    else:
        typer.echo(visible(text))


def pick_columns(spec: str | None, known: Sequence[str], default: Sequence[str]) -> list[str]:
    """The columns ``-o`` asked for (all known ones by name), or ``default``."""
    if spec is None:
        return list(default)
    columns = [c.strip() for c in spec.split(",") if c.strip()]
    unknown = [c for c in columns if c not in known]
    if unknown or not columns:
        raise SpecError(
            f"format: unknown column {unknown[0] if unknown else ''!r} (known: {', '.join(known)})",
            field="format",
        )
    return columns


def plain(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.2f}"
    if isinstance(value, list | tuple):
        return ",".join(map(str, value))
    return str(value)


def emit(
    rows: list[dict[str, Any]],
    columns: Sequence[str],
    *,
    as_json: bool = False,
    as_csv: bool = False,
    cell: Callable[[dict[str, Any], str], str] | None = None,
    caption: str | None = None,
    title: str | None = None,
    dim: Callable[[dict[str, Any]], bool] | None = None,
    headers: dict[str, str] | None = None,
    wide: bool = False,
    empty: str | None = None,
    cut: str | None = None,
    note: str | None = None,
) -> None:
    """Print ``rows`` (dicts) with the chosen ``columns``: JSON (whole rows), CSV or a table
    without borders. ``cell`` renders one value (default ``plain``); ``headers`` renames
    columns in the table; ``wide`` lets lines grow past the terminal instead of wrapping
    cells (squeue -l); ``empty``: the line printed instead of a table without rows; ``cut``:
    the last column, cut to what the terminal leaves it (one line a row) unless ``wide``;
    ``note``: a line after the table, as wide as the terminal (a caption wraps to the
    table's width)."""
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    if not rows and empty is not None and not as_csv:
        typer.echo(empty)
        return
    render = cell or (lambda row, column: plain(row.get(column)))
    cells = [[visible(render(r, c)) for c in columns] for r in rows]
    if as_csv:  # cells a spreadsheet reads as text (a job named =HYPERLINK(...) stays text)
        typer.echo(csv_text(columns, cells), nl=False)
        return
    names = [(headers or {}).get(c, c) for c in columns]
    if cut is not None and not wide and columns and columns[-1] == cut:
        widths = [max([len(n), *(len(c[i]) for c in cells)]) for i, n in enumerate(names[:-1])]
        room = max(12, Console().width - sum(widths) - 2 * len(widths))
        for line in cells:
            if len(line[-1]) > room:
                line[-1] = line[-1][: room - 1] + "…"
    table = SafeTable(*names, box=None, pad_edge=False, header_style="bold", title=title)
    for r, row_cells in zip(rows, cells, strict=True):
        table.add_row(*row_cells, style="dim" if dim and dim(r) else None)
    table.caption = caption
    Console(width=100_000 if wide else None).print(table)
    if note:
        typer.echo(visible(note))

"""CSV cells a spreadsheet reads as text, never as a formula: a job's name, a tenant's or a
reason is anybody's text, and ``=HYPERLINK(...)`` opened in Excel or LibreOffice would run
(OWASP's CSV injection). A cell that begins with ``=``, ``+``, ``-``, ``@``, a tab or a
carriage return gets a leading ``'``, unless it is a plain number (a credit's -100.00)."""

import csv
import io
from collections.abc import Iterable, Sequence

LEADERS = ("=", "+", "-", "@", "\t", "\r")


def safe_cell(value: object) -> str:
    text = "" if value is None else str(value)
    if not text.startswith(LEADERS):
        return text
    try:
        float(text)
    except ValueError:
        return "'" + text
    return text


def csv_text(header: Sequence[object] | None, rows: Iterable[Sequence[object]]) -> str:
    """Rows as CSV with every cell made safe."""
    out = io.StringIO()
    writer = csv.writer(out)
    if header is not None:
        writer.writerow([safe_cell(c) for c in header])
    writer.writerows([safe_cell(c) for c in row] for row in rows)
    return out.getvalue()

"""An invoice (the dict ``gpupool.billing.invoice`` makes) as CSV: its number when final, or
the moment a draft counts to; its lines, its total (pure)."""

from datetime import datetime
from zoneinfo import ZoneInfo

from gpupool.spreadsheet import csv_text

COLUMNS = ("description", "quantity", "unit", "unit_price", "amount")


def invoice_csv(out: dict) -> str:
    rows: list[list[object]] = []
    if out.get("number"):
        rows.append(["number", out["number"], "", "", ""])
    elif out.get("draft") and out.get("as_of"):  # a draft "so far": to when
        moment = datetime.fromtimestamp(out["as_of"], ZoneInfo(out["zone"]))
        rows.append(["draft so far, to", moment.isoformat(timespec="seconds"), "", "", ""])
    rows.append(list(COLUMNS))
    rows += [[line[k] for k in COLUMNS] for line in out["lines"]]
    rows.append(["total", "", "", "", out["total"]])
    return csv_text(None, rows)

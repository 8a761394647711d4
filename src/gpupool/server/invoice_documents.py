"""An invoice (the dict ``gpupool.billing.invoice`` makes) as the response a client asked
for: JSON, CSV, a printable HTML page or a PDF of that page."""

import time
from typing import Literal
from urllib.parse import quote

from fastapi.responses import HTMLResponse, PlainTextResponse, Response

from gpupool.billing.invoice_csv import invoice_csv
from gpupool.billing.invoice_html import DOCUMENT_HEADERS, invoice_html
from gpupool.billing.invoice_pdf import PdfUnavailable, invoice_pdf
from gpupool.server.errors import ApiError

Format = Literal["json", "csv", "html", "pdf"]


def filename(out: dict, ext: str) -> str:
    """``2026-11-algo.pdf``, or the number's when the invoice is final."""
    stem = out.get("number") or f"{out['month']}-{out['tenant']}"
    return f"{stem}.{ext}"


def attachment(name: str) -> str:
    """A download's header for ``name``: an ASCII fallback, and the name itself in UTF-8
    (RFC 6266) — a team named 研发部 made the header unsendable, and the PDF a 500."""
    fallback = "".join(c if c.isascii() and c.isprintable() and c not in '"\\' else "_"
                       for c in name)  # fmt: skip
    if fallback == name:
        return f'attachment; filename="{name}"'
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(name, safe='')}"


def invoice_response(
    out: dict, format: Format, lang: str, issued: float | None = None
) -> dict | Response:
    """``out`` in ``format``; ``issued`` is the time the page says it was made."""
    if format == "json":
        return out
    if format == "csv":
        return PlainTextResponse(invoice_csv(out), media_type="text/csv")
    page = invoice_html(out, lang, issued if issued is not None else time.time())
    if format == "html":
        return HTMLResponse(page, headers=DOCUMENT_HEADERS)
    try:
        pdf = invoice_pdf(page, lang)
    except PdfUnavailable as exc:
        raise ApiError(503, str(exc), exc.field or "format") from None
    headers = {**DOCUMENT_HEADERS, "Content-Disposition": attachment(filename(out, "pdf"))}
    return Response(pdf, media_type="application/pdf", headers=headers)

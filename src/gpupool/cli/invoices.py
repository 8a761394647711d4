"""``gpupool billing issue`` and ``gpupool billing invoices``: month-end invoicing in one
command — every tenant's invoice, drafts then final and numbered, saved as PDF, HTML and CSV."""

from pathlib import Path

import typer

from gpupool.cli.client import JSON_OPT, client_command
from gpupool.cli.output import emit, zoned
from gpupool.client import ApiClient
from gpupool.model import SpecError

COLUMNS = ["id", "tenant", "month", "state", "number", "total", "kind"]
FORMATS = ("pdf", "html", "csv")


def save_document(api: ApiClient, path: str, to: str, **params: object) -> None:
    """GET a document (HTML, CSV or PDF) and write it to ``to``; a folder or a path that
    cannot be written is an error naming it."""
    from gpupool.model import SpecError

    body = api.get(path, **params)
    data = body if isinstance(body, bytes) else str(body).encode()
    try:
        Path(to).write_bytes(data)
    except OSError as exc:
        raise SpecError(f"{to}: cannot write it: {exc.strerror}", field="file") from None


def register_issuing(billing_app: typer.Typer) -> None:
    @billing_app.command("issue")
    @client_command
    def billing_issue(
        month: str = typer.Option(..., help="YYYY-MM"),
        zone: str = typer.Option(
            None,
            help="The time zone its month is in [default: the server's billing zone, "
            "Asia/Shanghai]",
        ),
        final: bool = typer.Option(
            False, "--final", help="Number and freeze them (the month must be over)"
        ),
        out: str = typer.Option(None, help="Save each as PDF, HTML and CSV in this folder"),
        lang: str = typer.Option("zh", help="The documents' language: zh or en"),
        as_json: bool = JSON_OPT,
    ) -> None:
        """Issue every tenant's invoice for a month (admins, company-wide finance): drafts,
        made again by each run, or with --final numbered and never changed again."""
        folder = Path(out) if out else None
        try:
            if folder is not None and folder.exists() and not folder.is_dir():
                raise SpecError(f"out: {out} is not a folder", field="out")
        except OSError as exc:  # a name too long for the file system, say
            raise SpecError(f"--out: {out}: {exc.strerror}", field="out") from None
        with ApiClient.from_env() as api:
            rows = api.post(
                "/api/v1/billing/invoices/issue", {"month": month, "zone": zone, "final": final}
            )
            if zone is None:  # the month was the server's billing zone's
                zone = rows[0]["zone"] if rows else api.get("/api/v1/status")["billing_zone"]
            if folder is not None:
                try:
                    folder.mkdir(parents=True, exist_ok=True)
                except OSError as exc:
                    what = f"--out: cannot make the folder {out}: {exc.strerror}"
                    raise SpecError(what, field="out") from None
                for r in rows:
                    stem = r["number"] or f"{r['month']}-{r['tenant']}-draft"
                    for fmt in FORMATS:
                        save_document(
                            api,
                            f"/api/v1/billing/invoices/{r['id']}",
                            str(folder / f"{stem}.{fmt}"),
                            format=fmt,
                            lang=lang,
                        )
        state = "final" if final else "draft"
        counted = [r["as_of"] for r in rows if r.get("as_of") and r["state"] == "draft"]
        emit(
            rows,
            COLUMNS,
            as_json=as_json,
            title=f"{month} invoices ({zone})",
            caption=f"{sum(r['changed'] for r in rows)} {state} made"
            + (f", so far: to {zoned(min(counted))}" if counted else "")
            + (f"; saved in {out}" if out else ""),
            empty=f"nothing to bill for {month} ({zone}): no usage, rental plan or credit in "
            "it; no invoice made",
        )

    @billing_app.command("invoices")
    @client_command
    def billing_invoices(
        month: str = typer.Option(None, help="YYYY-MM"),
        tenant: str = typer.Option(None, help="Only this tenant's"),
        as_json: bool = JSON_OPT,
    ) -> None:
        """Issued invoices you may read (see gpupool billing issue)."""
        with ApiClient.from_env() as api:
            rows = api.get("/api/v1/billing/invoices", month=month, tenant=tenant)
        emit(rows, COLUMNS, as_json=as_json, empty="no issued invoice")

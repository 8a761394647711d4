"""Issued invoices: the month-end run (admins and company-wide finance) that makes every
tenant's invoice — drafts, then final and numbered — and the issued documents (JSON, CSV,
HTML, PDF) for those who read invoices. The rules are ``gpupool.server.issuing``."""

import time
from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field
from sqlalchemy import select

from gpupool.billing.money import cny
from gpupool.model import SpecError
from gpupool.server.db.tables import IssuedInvoiceRow
from gpupool.server.deps import Caller, Ctx, Id, require
from gpupool.server.errors import ApiError, not_found
from gpupool.server.invoice_documents import Format, invoice_response
from gpupool.server.issuing import NotReady, issue_month, month_bodies
from gpupool.server.routes.billing import READERS, company_wide, iso_utc
from gpupool.server.schemas import Strict

router = APIRouter(prefix="/api/v1/billing", tags=["billing"])


class IssueIn(Strict):
    month: str = Field(pattern=r"^\d{4}-(0[1-9]|1[0-2])$", description="YYYY-MM")
    zone: str | None = Field(
        None, max_length=64, description="its month's time zone (default: the billing_zone)"
    )
    final: bool = Field(False, description="number and freeze them (the month must be over)")


class IssuedOut(BaseModel):
    id: int
    tenant: str
    month: str
    zone: str
    state: Literal["draft", "final"]
    number: str | None
    total: str
    kind: str
    mode: str
    issued_at: str
    finalised_at: str | None
    as_of: float | None = Field(
        None, description="a draft: running jobs are counted up to this moment (epoch seconds)"
    )
    changed: bool = Field(True, description="issue: made by this run (False: final already)")


def _out(r: IssuedInvoiceRow, changed: bool = True) -> IssuedOut:
    return IssuedOut(
        id=r.id,
        tenant=r.tenant,
        month=r.month,
        zone=r.zone,
        state=r.state,
        number=r.number,
        total=cny(r.total_fen),
        kind=r.body.get("kind", "chargeback"),
        mode=r.body.get("mode", "card-hour"),
        issued_at=iso_utc(r.issued_at),
        finalised_at=iso_utc(r.finalised_at) if r.finalised_at is not None else None,
        as_of=r.body.get("as_of") if r.state == "draft" else None,
        changed=changed,
    )


@router.post("/invoices/issue", response_model=list[IssuedOut])
def issue(body: IssueIn, ctx: Ctx, who: Caller, request: Request) -> list[IssuedOut]:
    """Make every tenant's invoice for a month in one go: drafts (made again by each run), or
    with ``final`` numbered and frozen — refused until the month is over and metered to its
    end. Final invoices are left as they are."""
    company_wide(who, "month-end invoices")
    now, issuer = time.time(), ctx.settings.invoice_issuer
    zone = body.zone or ctx.settings.billing_zone
    try:
        drafts = None
        if not body.final:  # computed from a read, the write lock held for the writes only
            with ctx.db.read() as s:
                drafts = month_bodies(s, body.month, zone, final=False, now=now, issuer=issuer)
        with ctx.db.write() as s:
            issued = issue_month(
                s, body.month, zone, final=body.final, who=who.user, now=now,
                issuer=issuer, bodies=drafts,
            )  # fmt: skip
            out = [_out(i.row, i.changed) for i in issued]
    except NotReady as exc:
        raise ApiError(409, str(exc), exc.field or "month") from None
    except SpecError as exc:
        raise ApiError(422, str(exc), exc.field or "month") from None
    state = "final" if body.final else "draft"
    request.state.audit_target = f"{state} invoices for {body.month} ({len(out)})"
    return out


@router.get("/invoices", response_model=list[IssuedOut])
def list_issued(
    ctx: Ctx,
    who: Caller,
    month: Annotated[str | None, Query(pattern=r"^\d{4}-\d{2}$")] = None,
    tenant: Annotated[str | None, Query(max_length=100)] = None,
) -> list[IssuedOut]:
    """Issued invoices the caller may read, newest month first."""
    require(who, READERS, "reading invoices")
    q = select(IssuedInvoiceRow).order_by(IssuedInvoiceRow.month.desc(), IssuedInvoiceRow.tenant)
    if month is not None:
        q = q.where(IssuedInvoiceRow.month == month)
    if tenant is not None:
        q = q.where(IssuedInvoiceRow.tenant == tenant)
    with ctx.db.read() as s:
        return [_out(r) for r in s.execute(q).scalars() if who.sees(r.tenant)]


@router.get("/invoices/{invoice_id}", response_model=None)
def get_issued(
    invoice_id: Id,
    ctx: Ctx,
    who: Caller,
    format: Annotated[Format, Query(description="json, csv, html or pdf")] = "json",
    lang: Annotated[Literal["zh", "en"], Query()] = "zh",
) -> dict | Response:
    """One issued invoice as it was issued (a final one never changes)."""
    require(who, READERS, "reading invoices")
    with ctx.db.read() as s:
        row = s.get(IssuedInvoiceRow, invoice_id)
        if row is None or not who.sees(row.tenant):
            raise not_found(f"invoice {invoice_id}")
        body, issued = dict(row.body), row.finalised_at or row.issued_at
    period = body.get("period") or {}
    if isinstance(period.get("start"), int | float):
        body["period"] = {"start": iso_utc(period["start"]), "end": iso_utc(period["end"])}
    body["id"] = invoice_id
    return invoice_response(body, format, lang, issued)

"""Usage records (metered quantities) and a per-tenant, per-model summary that includes what
live allocations have used so far."""

import time
from typing import Annotated

from fastapi import APIRouter, Query
from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from gpupool.billing.invoice import month_bounds, parts
from gpupool.model import SpecError
from gpupool.server.auth import Principal
from gpupool.server.db.tables import UsageRow
from gpupool.server.deps import Caller, Ctx, Limit, Offset, human
from gpupool.server.errors import ApiError
from gpupool.server.ledger import live_entries
from gpupool.server.routes.billing import BillingZone
from gpupool.server.routes.views import page, scoped
from gpupool.server.schemas import Page, UsageOut

router = APIRouter(prefix="/api/v1", tags=["usage"])
Since = Annotated[float | None, Query(ge=0, le=1e11, description="epoch seconds")]
QUANTITIES = ("device_seconds", "compute_pct_seconds", "mem_mib_seconds", "cpu_milli_seconds")


@router.get("/usage", response_model=Page[UsageOut])
def list_usage(
    ctx: Ctx,
    who: Caller,
    limit: Limit = 100,
    offset: Offset = 0,
    tenant: Annotated[str | None, Query(max_length=100)] = None,
    since: Since = None,
    until: Since = None,
) -> Page[UsageOut]:
    """Usage records of released allocations, newest first, within the caller's tenants."""
    human(who)
    q = scoped(
        select(UsageRow).order_by(UsageRow.id.desc()),
        UsageRow.tenant,
        who,
        {UsageRow.tenant: tenant},
    )
    if since is not None:
        q = q.where(UsageRow.end >= since)
    if until is not None:
        q = q.where(UsageRow.end < until)
    with ctx.db.read() as s:
        rows, total = page(s, q, limit, offset)
        items = [UsageOut.model_validate(r, from_attributes=True) for r in rows]
    return Page(items=items, total=total, limit=limit, offset=offset)


def usage_totals(
    s: Session, who: Principal, since: float | None, until: float | None, now: float
) -> dict[tuple[str, str], dict[str, int]]:
    """Per (tenant, model) the visible tenants' quantities in [since, until): records inside
    it, the part inside it of records crossing its edges (by time, as an invoice splits them
    at a month's), plus live allocations metered up to now — the one way every view counts
    a period."""
    totals: dict[tuple[str, str], dict[str, int]] = {}

    def add(tenant: str, model: str, values: dict[str, int]) -> None:
        acc = totals.setdefault((tenant, model), dict.fromkeys(QUANTITIES, 0))
        for k in QUANTITIES:
            acc[k] += int(values[k])

    lo = since if since is not None else float("-inf")
    hi = until if until is not None else float("inf")
    sums = (func.sum(getattr(UsageRow, k)) for k in QUANTITIES)
    inside = select(UsageRow.tenant, UsageRow.model, *sums).group_by(
        UsageRow.tenant, UsageRow.model
    )
    if since is not None:
        inside = inside.where(UsageRow.start >= since)
    if until is not None:
        inside = inside.where(UsageRow.end <= until)
    for tenant, model, *values in s.execute(inside):
        if who.sees(tenant):
            add(tenant, model, dict(zip(QUANTITIES, values, strict=True)))
    if since is not None or until is not None:  # records crossing an edge: their part inside
        edges = []
        if since is not None:
            edges.append((UsageRow.start < since) & (UsageRow.end > since))
        if until is not None:
            edges.append((UsageRow.start < until) & (UsageRow.end > until))
        crossing = select(UsageRow).where(or_(*edges))
        for r in s.execute(crossing).scalars():
            if not who.sees(r.tenant):
                continue
            share = sum(part for *_, part in parts(r, lo, hi, ()))  # the invoice's own split
            add(r.tenant, r.model, {k: round(getattr(r, k) * share) for k in QUANTITIES})
    # live allocations: what their workloads ran since their last checkpoint, inside the
    # window (a client's "until now" is a moment before the server's now: it still counts them)
    upto = now if until is None else min(until, now)
    for e in live_entries(s, upto, since=since, keep=who.sees):
        add(e.tenant, e.model, {k: getattr(e, k) for k in QUANTITIES})
    return totals


@router.get("/usage/summary")
def usage_summary(
    ctx: Ctx,
    who: Caller,
    since: Since = None,
    until: Since = None,
    month: Annotated[
        str | None,
        Query(pattern=r"^\d{4}-\d{2}$", description="YYYY-MM, instead of since and until"),
    ] = None,
    zone: BillingZone = None,
) -> dict[str, object]:
    """Totals per tenant and device model: released allocations (records ending in the
    window) plus live allocations metered up to now (``as_of``). ``month``: a calendar month
    in ``zone`` (default: the billing zone, as invoices and reports count a month)."""
    human(who)
    zone = zone or ctx.settings.billing_zone
    if month is not None:
        if since is not None or until is not None:
            raise ApiError(422, "month: give month, or since and until, not both", "month")
        try:
            since, until = month_bounds(month, zone)
        except SpecError as exc:
            raise ApiError(422, str(exc), exc.field or "month") from None
    now = time.time()
    with ctx.db.read() as s:
        totals = usage_totals(s, who, since, until, now)
    return {
        "since": since,
        "until": until,
        "month": month,
        "zone": zone if month is not None else None,
        "as_of": now,
        "items": [{"tenant": t, "model": m, **v} for (t, m), v in sorted(totals.items())],
    }

"""A tenant's invoice for a month from the state of record: its usage records, rental plans,
billing settings and the price catalog, handed to the pure ``gpupool.billing.invoice``."""

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpupool.billing.catalog import DEFAULT_MONTHLY_FEN, Catalog, Price
from gpupool.billing.invoice import Task, Usage, invoice, month_bounds
from gpupool.server.db.tables import (
    AllocationRow,
    CreditRow,
    JobRow,
    PriceRow,
    TenantBillingRow,
    UsageRow,
)
from gpupool.server.lifecycle import unmetered_rows
from gpupool.server.rentals import plans_between


def catalog(s: Session) -> Catalog:
    """The list prices, then every price an admin set (each from its date)."""
    rows = s.execute(select(PriceRow).order_by(PriceRow.effective_from, PriceRow.id)).scalars()
    entries = [Price(m, fen) for m, fen in DEFAULT_MONTHLY_FEN.items()]
    entries += [Price(r.model, r.monthly_fen, r.effective_from, r.hourly_fen) for r in rows]
    return Catalog(entries)


def live_usage(s: Session, tenant: str, now: float) -> list[Usage]:
    """What the tenant's live allocations used since their last checkpoint, up to ``now``
    (not yet in any usage record)."""
    out = []
    live = s.execute(
        select(AllocationRow).where(AllocationRow.tenant == tenant, AllocationRow.state == "active")
    ).scalars()
    fields = ("model", "start", "end", "compute_pct_seconds", "mem_mib_seconds")
    for a in live:
        out += [Usage(*(r[k] for k in fields)) for r in unmetered_rows(s, a, now)]
    return out


def month_invoice(
    s: Session,
    tenant: str,
    month: str,
    zone: str,
    mode: str | None = None,
    *,
    live_until: float | None = None,
) -> dict:
    """The invoice (``mode`` None: the tenant's own); raises SpecError on bad input. With
    ``live_until``, live allocations count up to that moment (month-to-date spend)."""
    start, end = month_bounds(month, zone)
    usage = UsageRow.__table__.c
    rows = s.execute(
        select(
            usage.model, usage.start, usage.end, usage.compute_pct_seconds, usage.mem_mib_seconds
        ).where(usage.tenant == tenant, usage.end > start, usage.start < end)
    ).all()
    records = [Usage(*r) for r in rows]
    if live_until is not None:
        records += live_usage(s, tenant, live_until)
    settings = s.get(TenantBillingRow, tenant)
    mode = mode or (settings.mode if settings else "card-hour")
    tasks = []
    if mode == "per-task":
        jobs = s.execute(
            select(JobRow).where(
                JobRow.tenant == tenant,
                JobRow.finished_at >= start,
                JobRow.finished_at < end,
                JobRow.state.in_(("succeeded", "failed")),
            )
        ).scalars()
        tasks = [
            Task(j.id, j.priority_class, j.finished_at) for j in jobs if j.finished_at is not None
        ]
    out = invoice(
        tenant,
        month,
        records,
        catalog(s),
        mode=mode,
        zone=zone,
        plans=plans_between(s, tenant, start, end),
        tasks=tasks,
        task_prices=dict(settings.task_prices) if settings else {},
        discount_pct=settings.discount_pct if settings else 0,
        credits=[
            (c.reason, c.amount_fen)
            for c in s.execute(
                select(CreditRow)
                .where(CreditRow.tenant == tenant, CreditRow.month == month)
                .order_by(CreditRow.id)
            ).scalars()
        ],
    )
    out["kind"] = settings.kind if settings else "chargeback"
    return out

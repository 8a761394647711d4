"""A tenant's invoice for a month from the state of record: its usage records, rental plans,
billing settings and the price catalog, handed to the pure ``gpupool.billing.invoice``."""

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpupool.billing.breakdown import JobUsage, breakdown, descendants, sub_teams
from gpupool.billing.catalog import DEFAULT_MONTHLY_FEN, Catalog, Price
from gpupool.billing.invoice import Task, Usage, invoice, month_bounds
from gpupool.server.db.tables import (
    CreditRow,
    JobRow,
    PriceRow,
    TenantBillingRow,
    TenantRow,
)
from gpupool.server.ledger import Entry, entries
from gpupool.server.rentals import plans_between


def catalog(s: Session) -> Catalog:
    """The list prices, then every price an admin set (each from its date)."""
    rows = s.execute(select(PriceRow).order_by(PriceRow.effective_from, PriceRow.id)).scalars()
    entries = [Price(m, fen) for m, fen in DEFAULT_MONTHLY_FEN.items()]
    entries += [Price(r.model, r.monthly_fen, r.effective_from, r.hourly_fen) for r in rows]
    return Catalog(entries)


def usage_of(
    s: Session, tenant: str, start: float, end: float, live_until: float | None
) -> list[Entry]:
    """The tenant's ledger of [start, end) (``gpupool.server.ledger``): its usage records
    and, with ``live_until``, what its live allocations used up to that moment."""
    return entries(s, start, end, live_until, tenant=tenant)


def who_ran(s: Session, rows: list[Entry], start: float, end: float) -> dict:
    """The invoice's breakdown (``gpupool.billing.breakdown``): users and names of the jobs."""
    ids = sorted({r.job_id for r in rows})
    about: dict[int, tuple[str, str]] = {}
    for i in range(0, len(ids), 500):
        chunk = ids[i : i + 500]
        q = select(JobRow.id, JobRow.submitted_by, JobRow.name).where(JobRow.id.in_(chunk))
        about.update({job: (user, name or "") for job, user, name in s.execute(q)})
    return breakdown(
        (
            JobUsage(
                r.job_id,
                *about.get(r.job_id, ("?", "")),
                r.borrowed,
                r.model,
                r.start,
                r.end,
                r.compute_pct_seconds,
            )
            for r in rows
        ),
        start,
        end,
    )


def tenant_parents(s: Session) -> dict[str, str | None]:
    """Every tenant's parent (None at the top), by name."""
    rows = s.execute(select(TenantRow.name, TenantRow.parent).order_by(TenantRow.name))
    return {name: parent for name, parent in rows}


def sub_teams_of(
    s: Session,
    tenant: str,
    month: str,
    zone: str,
    live_until: float | None,
    parents: dict[str, str | None] | None = None,
) -> list[dict]:
    """What the invoices of the teams below ``tenant`` say, for its own invoice to list."""
    parents = tenant_parents(s) if parents is None else parents
    below = descendants(tenant, parents)
    bodies = {t: month_invoice(s, t, month, zone, live_until=live_until) for t in below}
    return sub_teams(tenant, parents, bodies)


def month_invoice(
    s: Session,
    tenant: str,
    month: str,
    zone: str,
    mode: str | None = None,
    *,
    live_until: float | None = None,
    issuer: str = "",
) -> dict:
    """The invoice (``mode`` None: the tenant's own); raises SpecError on bad input. With
    ``live_until``, live allocations count up to that moment (month-to-date spend).
    ``issuer``: who issues it (the ``invoice_issuer`` setting), printed at its top."""
    start, end = month_bounds(month, zone)
    rows = usage_of(s, tenant, start, end, live_until)
    records = [
        Usage(r.model, r.start, r.end, r.compute_pct_seconds, r.mem_mib_seconds) for r in rows
    ]
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
    if live_until is not None:  # running jobs counted up to then: a draft says so
        out["as_of"] = live_until
    out["breakdown"] = who_ran(s, rows, start, end)
    if issuer:
        out["issuer"] = issuer
    return out

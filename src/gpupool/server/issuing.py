"""Month-end invoicing ("月底一键出账单"): one run makes every tenant's invoice for a month —
drafts, made again by each run while the month is open to corrections — then, once the month
is over and metered to its end, final ones: numbered, stored as computed, never changed.

A final invoice's body is what it said when it was finalised; a credit, a late usage
correction or a price fix afterwards belongs to a later month's invoice."""

from dataclasses import dataclass

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from gpupool.billing.breakdown import sub_teams
from gpupool.billing.invoice import month_bounds
from gpupool.model import SpecError
from gpupool.server.db.tables import AllocationRow, IssuedInvoiceRow
from gpupool.server.invoicing import month_invoice, tenant_parents


class NotReady(SpecError):
    """The month cannot be finalised yet (not over, or not metered to its end)."""


@dataclass(frozen=True)
class Issued:
    row: IssuedInvoiceRow
    changed: bool  # made or made again by this run (False: final already, left alone)


def number_for(s: Session, month: str) -> str:
    """The next number of ``month``: ``GP-202611-0001``, ``-0002``, ... in finalising order."""
    prefix = f"GP-{month.replace('-', '')}-"
    taken = s.execute(
        select(func.count()).where(IssuedInvoiceRow.number.like(f"{prefix}%"))
    ).scalar_one()
    return f"{prefix}{taken + 1:04d}"


def check_closed(s: Session, month: str, zone: str, now: float) -> None:
    """Refuse to finalise a month that is not over, or whose live allocations are not yet
    metered up to its end (the hourly checkpoint after midnight does that)."""
    _, end = month_bounds(month, zone)
    if end > now:
        raise NotReady(
            f"month: {month} is not over in {zone}; only drafts can be made", field="month"
        )
    unmetered = s.execute(
        select(func.count()).where(
            AllocationRow.state == "active",
            AllocationRow.created_at < end,
            or_(AllocationRow.metered_until.is_(None), AllocationRow.metered_until < end),
        )
    ).scalar_one()
    if unmetered:
        raise NotReady(
            f"month: {unmetered} running allocation(s) are not metered up to the end of {month} "
            "yet; the next hourly checkpoint closes it — finalise after it",
            field="month",
        )


def month_bodies(
    s: Session, month: str, zone: str, *, final: bool, now: float, issuer: str = ""
) -> dict[str, dict]:
    """Every tenant's invoice body for ``month`` (a draft counts running jobs up to now; a
    final month is metered to its end), computed from one read of the state of record —
    outside the write transaction that stores them, so month-end invoicing holds the
    database's write lock for the writes alone, not for the computing."""
    month_bounds(month, zone)  # a bad month or zone is refused before anything is computed
    parents = tenant_parents(s)
    bodies = {
        tenant: month_invoice(
            s, tenant, month, zone, live_until=None if final else now, issuer=issuer
        )
        for tenant in parents
    }
    for tenant, body in bodies.items():  # a parent lists what its sub-teams' invoices say
        teams = sub_teams(tenant, parents, bodies)
        if teams:
            body["sub_teams"] = teams
    return bodies


def issue_month(
    s: Session,
    month: str,
    zone: str,
    *,
    final: bool,
    who: str,
    now: float,
    issuer: str = "",
    bodies: dict[str, dict] | None = None,
) -> list[Issued]:
    """Make (or make again) every tenant's draft for ``month``; with ``final``, number them
    and freeze them. Tenants with nothing to bill and no earlier draft get none. ``bodies``:
    drafts computed beforehand (``month_bodies``); a final run computes its own here, once
    the month is checked closed, in the transaction that numbers them."""
    month_bounds(month, zone)  # a bad month or zone is refused before anything is written
    if final:
        check_closed(s, month, zone, now)
        bodies = month_bodies(s, month, zone, final=True, now=now, issuer=issuer)
    elif bodies is None:
        bodies = month_bodies(s, month, zone, final=False, now=now, issuer=issuer)
    existing = {
        r.tenant: r
        for r in s.execute(
            select(IssuedInvoiceRow).where(IssuedInvoiceRow.month == month).with_for_update()
        ).scalars()
    }
    out = []
    for tenant, body in bodies.items():
        row = existing.get(tenant)
        if row is not None and row.state == "final":
            out.append(Issued(row, changed=False))
            continue
        if row is not None and row.zone != zone:
            raise SpecError(
                f"zone: {tenant}'s {month} invoice was issued in {row.zone}, not {zone}",
                field="zone",
            )
        if row is None and not _anything(body, bodies):
            continue  # nothing to bill or to list
        number = number_for(s, month) if final else None  # before the row joins the session
        if row is None:
            row = IssuedInvoiceRow(tenant=tenant, month=month, zone=zone)
            s.add(row)
        row.state, row.number = ("final", number) if final else ("draft", None)
        row.finalised_at = now if final else None
        row.total_fen, row.issued_by, row.issued_at = body["total_fen"], who, now
        row.body = {**body, "draft": not final, "number": number}
        s.flush()  # the next number counts this one
        out.append(Issued(row, changed=True))
    s.flush()
    return out


def _anything(body: dict, bodies: dict[str, dict]) -> bool:
    """Whether an invoice bills anything, or lists a sub-team that does (a department's
    invoice of a month none of its teams used is nothing: it was numbered ¥0.00, issue 59)."""
    teams = [t["tenant"] for t in body.get("sub_teams") or []]
    return bool(body["lines"]) or any(bodies[t]["lines"] for t in teams if t in bodies)


def is_final(s: Session, tenant: str, month: str) -> bool:
    return (
        s.execute(
            select(IssuedInvoiceRow.id).where(
                IssuedInvoiceRow.tenant == tenant,
                IssuedInvoiceRow.month == month,
                IssuedInvoiceRow.state == "final",
            )
        ).first()
        is not None
    )

"""Rental plans as the billing maths and the scheduler see them, read from their rows."""

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpupool.billing.plans import Plan
from gpupool.server.db.tables import RentalPlanRow


def plan_of(r: RentalPlanRow) -> Plan:
    return Plan(
        r.id,
        r.tenant,
        r.model,
        r.cards,
        r.start,
        r.end,
        r.total_fen,
        r.cancelled_at,
        r.kind,
        r.periods,
        r.payment,
    )


def active_plans(s: Session, now: float) -> list[Plan]:
    """Plans in force at ``now`` (started, not ended, not cancelled)."""
    rows = s.execute(
        select(RentalPlanRow).where(RentalPlanRow.start <= now, RentalPlanRow.end > now)
    ).scalars()
    return [p for p in map(plan_of, rows) if p.active(now)]


def plans_between(s: Session, tenant: str, start: float, end: float) -> list[Plan]:
    """A tenant's plans that overlap [start, end)."""
    rows = s.execute(
        select(RentalPlanRow).where(
            RentalPlanRow.tenant == tenant, RentalPlanRow.start < end, RentalPlanRow.end > start
        )
    ).scalars()
    return [plan_of(r) for r in rows]

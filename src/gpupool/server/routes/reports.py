"""Cost reports for finance and team leads: card-hours per tenant, model and day; the jobs
that cost the most; the cost of cards held idle (under 5% utilisation by telemetry)."""

import time
from typing import Annotated, Literal

from fastapi import APIRouter, Query
from sqlalchemy import or_, select

from gpupool.billing.invoice import month_bounds
from gpupool.billing.reports import IdleHold, JobUsage, daily_usage, idle_costs, job_costs
from gpupool.model import SpecError
from gpupool.server.auth import Role
from gpupool.server.db.tables import AllocationRow, JobRow
from gpupool.server.deps import Caller, Ctx, require
from gpupool.server.errors import ApiError, not_found
from gpupool.server.invoicing import catalog
from gpupool.server.ledger import entries
from gpupool.server.lifecycle import device_models
from gpupool.server.routes.billing import READERS, BillingZone

router = APIRouter(prefix="/api/v1/billing", tags=["billing"])
Report = Literal["usage", "top-jobs", "idle"]


@router.get("/reports/{report}")
def report(
    report: Report,
    ctx: Ctx,
    who: Caller,
    month: Annotated[str, Query(pattern=r"^\d{4}-\d{2}$", description="YYYY-MM")],
    zone: BillingZone = None,
    tenant: Annotated[str | None, Query(max_length=100)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 10,
) -> dict[str, object]:
    """``usage``: card-hours per tenant, GPU model and local day; ``top-jobs``: the jobs
    whose card-hours cost the most at list prices; ``idle``: per tenant, card-hours held
    while the cards reported under 5% utilisation, and their cost, and how many of them
    interactive sessions held. Only the tenants the caller may read (finance and admins: all);
    members may ask ``top-jobs`` for the cost of their own jobs."""
    mine_only = report == "top-jobs" and who.role is Role.MEMBER  # members: their own jobs
    if not mine_only:
        require(who, READERS, "reading cost reports")
    if tenant is not None and not who.sees(tenant):  # as every tenant-scoped route answers
        raise not_found(f"tenant {tenant}")
    zone = zone or ctx.settings.billing_zone
    try:
        start, end = month_bounds(month, zone)
    except SpecError as exc:
        raise ApiError(422, str(exc), exc.field or "month") from None
    now = time.time()
    with ctx.db.read() as s:
        cat = catalog(s)
        if report == "idle":
            q = (
                select(AllocationRow, JobRow.interactive)
                .join(JobRow, JobRow.id == AllocationRow.job_id)
                .where(
                    AllocationRow.created_at < end,
                    or_(AllocationRow.released_at.is_(None), AllocationRow.released_at >= start),
                    AllocationRow.idle_pct_seconds > 0,
                )
            )
            holds = []
            for a, interactive in s.execute(q).all():
                if not who.sees(a.tenant) or (tenant is not None and a.tenant != tenant):
                    continue
                models = sorted({c.model for c in device_models(s, a.placement).values()}) or [
                    "cpu"
                ]
                at = min(a.released_at or now, end - 1)
                holds.append(IdleHold(a.tenant, a.job_id, models[0], a.idle_pct_seconds, at,
                                      interactive is not None))  # fmt: skip
            rows = idle_costs(holds, cat)
        else:
            own = select(JobRow.id).where(JobRow.submitted_by == who.user) if mine_only else None
            records = [
                JobUsage(e.tenant, e.job_id, e.model, e.start, e.end, e.compute_pct_seconds)
                for e in entries(s, start, end, now, keep=who.sees, tenant=tenant, jobs=own)
            ]
            if report == "usage":
                rows = daily_usage(records, start, end, zone)
            else:
                rows = job_costs(records, cat, start, end, limit)
    return {
        "report": report,
        "month": month,
        "zone": zone,
        "as_of": now,  # what running jobs used is counted up to this moment
        "draft": end > now,
        "items": rows,
    }

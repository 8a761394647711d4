"""Fair share over time as sshare and sprio show it, within the caller's tenants."""

import math
import time
from typing import Annotated

from fastapi import APIRouter, Query
from sqlalchemy import select

from gpupool.server.db.tables import JobRow
from gpupool.server.deps import Caller, Ctx, Limit, ServerContext, human
from gpupool.server.fair_view import FairShareNow, fair_share_now, priority_parts
from gpupool.server.fairshare_schemas import PrioritiesOut, PriorityOut, ShareOut, SharesOut
from gpupool.server.routes.views import scoped

router = APIRouter(prefix="/api/v1", tags=["fairshare"])


def _fair_share(ctx: ServerContext) -> FairShareNow:
    """The fair-share view, computed once per ``FAIR_VIEW_TTL_S`` for every caller (it reads
    every tenant's usage history: per request, a member could keep the workers busy)."""
    got = ctx.fair_views.get("now")
    if got is not None:
        return got
    with ctx.fair_view_lock:  # one computes, the others wait for it
        got = ctx.fair_views.get("now")
        if got is None:
            with ctx.db.read() as s:
                got = fair_share_now(s, ctx.settings, time.time())
            ctx.fair_views.put("now", got)
    return got


@router.get("/fairshare", response_model=SharesOut)
def shares(ctx: Ctx, who: Caller) -> SharesOut:
    """Every tenant the caller sees, depth first in the Fair Tree's order (sshare)."""
    human(who)
    fs = _fair_share(ctx)
    items = []
    for r in fs.fairshare.rows():
        if not who.sees(r.tenant):
            continue
        siblings_seen = who.visible is None or (r.parent is not None and who.sees(r.parent))
        level = None if math.isinf(r.level_fs) else r.level_fs
        items.append(
            ShareOut(
                tenant=r.tenant,
                parent=r.parent,
                raw_shares=r.raw_shares,
                norm_shares=r.norm_shares,
                raw_usage=round(r.raw_usage, 4),
                norm_usage=r.norm_usage if siblings_seen else None,
                level_fs=level if siblings_seen else None,
                fairshare=r.fairshare,
                rank=r.rank,
                used=round(r.used, 4),
                borrowing=r.borrowing,
            )
        )
    return SharesOut(half_life_h=fs.half_life_h, active=fs.active,
                     weight=ctx.settings.fairshare_weight, items=items)  # fmt: skip


@router.get("/priority", response_model=PrioritiesOut)
def priorities(
    ctx: Ctx,
    who: Caller,
    limit: Limit = 100,
    tenant: Annotated[str | None, Query(max_length=100)] = None,
    user: Annotated[str | None, Query(max_length=100, description="submitted by")] = None,
) -> PrioritiesOut:
    """Pending jobs' priorities split into their parts (sprio), highest first."""
    human(who)
    now = time.time()
    q = scoped(
        select(JobRow).where(JobRow.state == "pending").order_by(JobRow.id),
        JobRow.tenant,
        who,
        {JobRow.tenant: tenant, JobRow.submitted_by: user},
    )
    with ctx.db.read() as s:
        jobs = list(s.execute(q.limit(limit)).scalars())
    fs = _fair_share(ctx)
    with ctx.db.read() as s:
        parts = priority_parts(s, ctx.settings, now, fs, jobs)
    parts.sort(key=lambda p: (-p.priority, p.job_id))
    items = [PriorityOut(**{k: getattr(p, k) for k in PriorityOut.model_fields}) for p in parts]
    return PrioritiesOut(active=fs.active, items=items)

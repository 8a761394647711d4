"""Fair share over time as sshare and sprio show it, within the caller's tenants."""

import math
import time
from typing import Annotated

from fastapi import APIRouter, Query
from sqlalchemy import select

from gpupool.server.db.tables import JobRow
from gpupool.server.deps import Caller, Ctx, Limit, human
from gpupool.server.fair_view import fair_share_now, priority_parts
from gpupool.server.fairshare_schemas import PrioritiesOut, PriorityOut, ShareOut, SharesOut
from gpupool.server.routes.views import scoped

router = APIRouter(prefix="/api/v1", tags=["fairshare"])


@router.get("/fairshare", response_model=SharesOut)
def shares(ctx: Ctx, who: Caller) -> SharesOut:
    """Every tenant the caller sees, depth first in the Fair Tree's order (sshare)."""
    human(who)
    now = time.time()
    with ctx.db.read() as s:
        fs = fair_share_now(s, ctx.settings, now)
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
        fs = fair_share_now(s, ctx.settings, now)
        parts = priority_parts(s, ctx.settings, now, fs, jobs)
    parts.sort(key=lambda p: (-p.priority, p.job_id))
    items = [PriorityOut(**{k: getattr(p, k) for k in PriorityOut.model_fields}) for p in parts]
    return PrioritiesOut(active=fs.active, items=items)

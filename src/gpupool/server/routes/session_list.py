"""The running interactive sessions a caller may see (``gpupool sessions``), each with its
idle time as the culling counts it (``interactive.culling``), its idle timeout and where
that was set, and the release an idle warning announced."""

import time
from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel
from sqlalchemy import select

from gpupool.server.db.tables import AllocationNodeRow, AllocationRow, JobRow
from gpupool.server.deps import Caller, Ctx, human
from gpupool.server.errors import not_found
from gpupool.server.interactive.cull_duty import read_tree
from gpupool.server.interactive.idle_policy import IdleRule, resolve

router = APIRouter(prefix="/api/v1", tags=["sessions"])


class SessionOut(BaseModel):
    job_id: int
    name: str
    tenant: str
    interactive: str
    priority_class: str
    submitted_by: str
    nodes: list[str]
    started_at: float | None  # None: its workload has not started (it is not idle yet)
    idle_since: float | None
    idle_s: float  # 0 until its workload started
    gpu_active_at: float | None
    input_at: float | None
    idle_timeout_s: int  # 0: never culled
    idle_warning_s: int
    policy_from: str  # where its idle rule was set
    release_at: float | None  # an idle warning stands: released then unless it is used


@router.get("/sessions", response_model=list[SessionOut])
def list_sessions(
    ctx: Ctx,
    who: Caller,
    tenant: Annotated[str | None, Query(max_length=100)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 200,
) -> list[SessionOut]:
    """Running interactive sessions of the tenants the caller sees (of ``tenant`` alone when
    given), oldest first."""
    human(who)
    if tenant is not None and not who.sees(tenant):  # as every tenant-scoped route answers
        raise not_found(f"tenant {tenant}")
    now = time.time()
    q = (
        select(AllocationRow, JobRow)
        .join(JobRow, JobRow.id == AllocationRow.job_id)
        .where(AllocationRow.state == "active", JobRow.interactive.is_not(None))
        .order_by(AllocationRow.id)
    )
    if tenant is not None:
        q = q.where(AllocationRow.tenant == tenant)
    if who.visible is not None:
        q = q.where(AllocationRow.tenant.in_(who.visible))
    st = ctx.settings
    default = IdleRule(st.session_idle_timeout_s, st.session_idle_warning_s)
    out: list[SessionOut] = []
    with ctx.db.read() as s:
        rows = s.execute(q.limit(limit)).all()
        if not rows:
            return []
        tree = read_tree(s)
        nodes: dict[int, list[str]] = {}
        ids = [a.id for a, _ in rows]
        for alloc_id, node in s.execute(
            select(AllocationNodeRow.allocation_id, AllocationNodeRow.node)
            .where(AllocationNodeRow.allocation_id.in_(ids))
            .order_by(AllocationNodeRow.node)
        ):
            nodes.setdefault(alloc_id, []).append(node)
        for a, j in rows:
            r = resolve(j.tenant, j.priority_class, tree.policies, tree.parents, default)
            since = None
            if a.started_at is not None:
                since = max(a.started_at, a.active_at or 0.0, a.input_at or 0.0)
            out.append(
                SessionOut(
                    job_id=j.id,
                    name=j.name,
                    tenant=j.tenant,
                    interactive=str(j.interactive),
                    priority_class=j.priority_class,
                    submitted_by=j.submitted_by,
                    nodes=nodes.get(a.id, []),
                    started_at=a.started_at,
                    idle_since=since,
                    idle_s=0.0 if since is None else max(0.0, now - since),
                    gpu_active_at=a.active_at,
                    input_at=a.input_at,
                    idle_timeout_s=r.rule.timeout_s,
                    idle_warning_s=r.rule.warning_s,
                    policy_from=r.source(),
                    release_at=a.idle_release_at,
                )
            )
    return out

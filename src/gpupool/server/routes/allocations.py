"""Allocations: listing, and the agent's fenced status reports and log uploads."""

import time
from typing import Annotated

from fastapi import APIRouter, Query
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from gpupool.model.protocol import AllocationOut
from gpupool.server.admission import refuse
from gpupool.server.auth import Principal, Role
from gpupool.server.db.rows_changed import rows_changed
from gpupool.server.db.tables import (
    AllocationNodeRow,
    AllocationRow,
    JobLogRow,
    JobRow,
    TenantRow,
)
from gpupool.server.deps import Caller, Ctx, Id, Limit, Offset, human
from gpupool.server.errors import ApiError, forbidden, not_found
from gpupool.server.lifecycle import finish, meter_to_reported_end, move
from gpupool.server.liveness import after_lost
from gpupool.server.routes.views import allocation_out, page, scoped
from gpupool.server.schemas import CheckpointedIn, JobStatusIn, LogChunkIn, Page
from gpupool.server.workload_start import late_start, start_parts

router = APIRouter(prefix="/api/v1", tags=["allocations"])


@router.get("/allocations", response_model=Page[AllocationOut])
def list_allocations(
    ctx: Ctx,
    who: Caller,
    limit: Limit = 100,
    offset: Offset = 0,
    state: Annotated[str | None, Query(max_length=20)] = None,
    tenant: Annotated[str | None, Query(max_length=100)] = None,
    node: Annotated[str | None, Query(max_length=200)] = None,
) -> Page[AllocationOut]:
    human(who)
    q = scoped(
        select(AllocationRow).order_by(AllocationRow.id.desc()),
        AllocationRow.tenant,
        who,
        {AllocationRow.state: state, AllocationRow.tenant: tenant},
    )
    if node is not None:
        q = q.join(AllocationNodeRow, AllocationNodeRow.allocation_id == AllocationRow.id).where(
            AllocationNodeRow.node == node
        )
    with ctx.db.read() as s:
        rows, total = page(s, q, limit, offset)
        return Page(
            items=[allocation_out(a) for a in rows], total=total, limit=limit, offset=offset
        )


def _agent_may(who: Principal, alloc: AllocationRow) -> None:
    """Admins, or an agent of a node the allocation touches."""
    nodes = {n["node"] for n in alloc.placement["nodes"]}
    if who.is_admin or (who.role is Role.AGENT and (who.node == "*" or who.node in nodes)):
        return
    raise forbidden(f"{who.user} may not act for allocation {alloc.id}")


def _locked(s: Session, alloc_id: int, who: Principal) -> AllocationRow:
    """The allocation, locked for this write, when ``who`` may act for it."""
    alloc = s.get(AllocationRow, alloc_id, with_for_update=True)
    if alloc is None:
        raise not_found(f"allocation {alloc_id}")
    _agent_may(who, alloc)
    return alloc


@router.post("/allocations/{alloc_id}/status", response_model=AllocationOut)
def report_status(alloc_id: Id, body: JobStatusIn, ctx: Ctx, who: Caller) -> AllocationOut:
    """An agent reports that an allocation's job started or ended. The ``generation`` must be
    the allocation's and the allocation still live: a stale order is refused with 409 (the
    late end of a released allocation's workload still corrects its meter). A node's part is
    metered from its workload's start (``started_at``, else when the running report is heard)."""
    now = time.time()
    with ctx.db.write() as s:
        alloc = _locked(s, alloc_id, who)
        live = alloc.state == "active" and alloc.generation == body.generation
        if live:
            out = _apply_report(s, alloc, body, who, now)
        else:
            _late_end(s, alloc, body, who)
            state, generation = alloc.state, alloc.generation
    if not live:  # refused once the correction is committed
        raise ApiError(
            409,
            f"stale: allocation {alloc_id} is {state} at generation {generation}, report was "
            f"for generation {body.generation}",
            "generation",
        )
    if body.state != "running":
        ctx.loop.wake()
    return out


@router.post("/allocations/{alloc_id}/checkpointed", status_code=204)
def report_checkpoint(alloc_id: Id, body: CheckpointedIn, ctx: Ctx, who: Caller) -> None:
    """The job saved a checkpoint: a preemption now loses only what it did since (victims
    lose least work first). 409 for a stale generation or an ended allocation."""
    now = time.time()
    with ctx.db.write() as s:
        alloc = _locked(s, alloc_id, who)
        if alloc.state != "active" or alloc.generation != body.generation:
            raise ApiError(409, f"stale: allocation {alloc_id} is not live at generation "
                           f"{body.generation}", "generation")  # fmt: skip
        at = max(alloc.created_at, min(body.at, now))
        alloc.checkpointed_at = max(alloc.checkpointed_at or 0.0, at)


def _apply_report(
    s, alloc: AllocationRow, body: JobStatusIn, who: Principal, now: float
) -> AllocationOut:
    job = s.get(JobRow, alloc.job_id, with_for_update=True)
    assert job is not None
    actor, part = who.user, _part(who, body)
    if body.state == "running" or body.started_at is not None:
        # an end report says when it started too: its running report may have been lost
        start_parts(s, alloc, part, body.started_at, now)
    if body.state == "running":
        if body.port is not None:  # a replica's port, as its agent chose and published it
            alloc.port = body.port
        if job.state == "admitted":
            move(s, job, "running", now, body.reason or "started", actor)
    elif body.state == "lost":
        reason = body.reason or "lost on its node"
        finish(s, job, "lost", now, reason, actor, body.ended_at, part)
        after_lost(s, job, now, reason, actor)
    elif body.state == "succeeded" and _parts_left(s, alloc, part, now):
        pass  # the gang's other parts still run: it goes on
    else:
        job.exit_code = body.exit_code
        why = body.reason or (
            f"exit code {body.exit_code}" if body.exit_code is not None else body.state
        )
        # a failed part: the others run until they are told to stop; a gang's last part to
        # succeed ends the whole
        failed_part = part if body.state == "failed" else None
        finish(s, job, body.state, now, why, actor, body.ended_at, failed_part)
    return allocation_out(alloc)


def _late_end(s, alloc: AllocationRow, body: JobStatusIn, who: Principal) -> bool:
    """The end of a workload the server already released (its node had been cut off) corrects
    what was metered for it — or meters it, when its start had not been heard; the report
    stays refused as stale."""
    if alloc.generation != body.generation or body.state == "running" or body.ended_at is None:
        return False
    part = _part(who, body)
    if body.started_at is not None and late_start(s, alloc, part, body.started_at, body.ended_at):
        return True
    return meter_to_reported_end(s, alloc, body.ended_at, part)


def _part(who: Principal, body: JobStatusIn) -> str | None:
    """The node whose part a report is: a node-scoped token speaks for its own node only."""
    return (who.node if who.node not in (None, "*") else None) or body.node


def _parts_left(s, alloc: AllocationRow, node: str | None, now: float) -> bool:
    """A part of a job spanning nodes ended well: whether others still run (the job succeeds
    when its last part does, as a Slurm job when its last task has; a failure ends it at
    once). A report that names no node (an older agent) ends the job as before."""
    nodes = {n["node"] for n in alloc.placement["nodes"]}
    if len(nodes) < 2 or node not in nodes:
        return False
    row = s.get(AllocationNodeRow, (alloc.id, node))
    if row is not None and row.ended_at is None:
        row.ended_at = now
    ended = s.execute(
        select(AllocationNodeRow.node).where(
            AllocationNodeRow.allocation_id == alloc.id, AllocationNodeRow.ended_at.is_not(None)
        )
    ).scalars()
    return bool(nodes - set(ended))


@router.post("/allocations/{alloc_id}/logs", status_code=204)
def upload_logs(alloc_id: Id, body: LogChunkIn, ctx: Ctx, who: Caller) -> None:
    """Append a chunk of a job's stdout or stderr (agents); 429 once the tenant's logs
    reached its limit (the agent then keeps no more of that job's output)."""
    with ctx.db.write() as s:
        alloc = s.get(AllocationRow, alloc_id)
        if alloc is None:
            raise not_found(f"allocation {alloc_id}")
        _agent_may(who, alloc)
        # no database text column holds NUL (PostgreSQL refuses it): kept as a visible escape
        text = body.text.replace("\x00", "\\x00")
        limit = ctx.limits.get(s, alloc.tenant).log_mib
        added = (
            update(TenantRow)
            .where(
                TenantRow.name == alloc.tenant,
                TenantRow.log_bytes + len(text) <= limit * 1024 * 1024,
            )
            .values(log_bytes=TenantRow.log_bytes + len(text))
        )
        if rows_changed(s, added) == 0:
            raise refuse("log_mib", limit, alloc.tenant, "; this output was not kept")
        s.add(JobLogRow(job_id=alloc.job_id, time=time.time(), stream=body.stream, text=text))

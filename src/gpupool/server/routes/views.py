"""Rows to response bodies, and the paging helper every list shares."""

from typing import Any

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session

from gpupool.model.job import job_shape
from gpupool.model.protocol import AllocationOut
from gpupool.server.auth import Principal
from gpupool.server.db.tables import (
    AllocationRow,
    JobRow,
    ServiceReplicaRow,
    ServiceRow,
    StartEstimateRow,
)
from gpupool.server.schemas import JobOut, StartEstimateOut

API = "/api/v1"


def scoped(
    query: Select[Any], tenant_column: Any, who: Principal, filters: dict[Any, Any]
) -> Select[Any]:
    """Only rows of tenants the caller sees, and rows whose columns equal the given filters
    (``None`` filters are ignored)."""
    if who.visible is not None:
        query = query.where(tenant_column.in_(who.visible))
    for column, value in filters.items():
        if value is not None:
            query = query.where(column == value)
    return query


def page(session: Session, query: Select[Any], limit: int, offset: int) -> tuple[list[Any], int]:
    total = session.execute(select(func.count()).select_from(query.subquery())).scalar_one()
    items = list(session.execute(query.limit(limit).offset(offset)).scalars())
    return items, total


def allocation_out(a: AllocationRow) -> AllocationOut:
    return AllocationOut(
        id=a.id,
        job_id=a.job_id,
        tenant=a.tenant,
        generation=a.generation,
        state=a.state,
        borrowed=a.borrowed,
        action=a.action,
        after=list(a.after or []),
        nodes=a.placement["nodes"],
        created_at=a.created_at,
        started_at=a.started_at,
        released_at=a.released_at,
        release_reason=a.release_reason,
    )


def replica_services(s: Session, job_ids: list[int]) -> dict[int, str]:
    """Job id -> the name of the service whose replica it is (jobs the autoscaler owns)."""
    if not job_ids:
        return {}
    rows = s.execute(
        select(ServiceReplicaRow.job_id, ServiceRow.name)
        .join(ServiceRow, ServiceRow.id == ServiceReplicaRow.service_id)
        .where(ServiceReplicaRow.job_id.in_(job_ids))
    ).all()
    return {job_id: name for job_id, name in rows}


def estimate_out(j: JobRow, e: StartEstimateRow | None) -> StartEstimateOut | None:
    """A stored estimate of a job still waiting since the plan that made it."""
    if e is None or j.state != "pending" or e.computed_at < j.queued_at:
        return None
    return StartEstimateOut(start=e.start, nodes=list(e.nodes or []), basis=e.basis,
                            computed_at=e.computed_at)  # fmt: skip


def job_out(
    j: JobRow,
    alloc: AllocationRow | None = None,
    service: str | None = None,
    estimate: StartEstimateRow | None = None,
) -> JobOut:
    return JobOut(
        id=j.id,
        tenant=j.tenant,
        name=j.name,
        request=j.request,
        shape=job_shape(j.request, j.gang_size),
        kind=j.kind,
        priority_class=j.priority_class,
        priority=j.priority,
        gang_size=j.gang_size,
        max_runtime_s=j.max_runtime_s,
        on_preempt=j.on_preempt,
        on_lost=j.on_lost,
        checkpoint=j.checkpoint,
        lost_gpu_s=round(j.lost_gpu_s or 0.0, 1),
        command=list(j.command or []),
        image=j.image,
        state=j.state,
        reason=j.reason,
        wait_code=j.wait_code or "",
        submitted_by=j.submitted_by,
        submit_time=j.submit_time,
        started_at=j.started_at,
        finished_at=j.finished_at,
        exit_code=j.exit_code,
        idempotency_key=j.idempotency_key,
        held=bool(j.held),
        dependency=list(j.dependency or []),
        array_job=j.array_job,
        array_index=j.array_index,
        array_limit=j.array_limit,
        output=j.output,
        error=j.error,
        chdir=j.chdir,
        submit_dir=j.submit_dir,
        begin_at=j.begin_at,
        nodelist=j.nodelist,
        exclude=j.exclude,
        replaces=j.replaces,
        service=service,
        interactive=j.interactive,
        allocation=allocation_out(alloc) if alloc is not None else None,
        estimate=estimate_out(j, estimate),
        logs_url=f"{API}/jobs/{j.id}/logs",
        events_url=f"{API}/jobs/{j.id}/events",
    )

"""scancel and scontrol habits: cancel a job or a whole array, hold a pending job, release
it, requeue a running one."""

import time
from typing import Annotated

from fastapi import APIRouter, Query, Request
from pydantic import Field
from sqlalchemy import select
from sqlalchemy.orm import Session

from gpupool.server.auth import Principal
from gpupool.server.db.tables import JobEventRow, JobRow
from gpupool.server.deps import Caller, Ctx, Id, human, may_manage
from gpupool.server.errors import ApiError, not_found
from gpupool.server.lifecycle import HOLDING, TERMINAL, finish
from gpupool.server.routes.jobs import visible_job
from gpupool.server.routes.views import job_out
from gpupool.server.schemas import JobOut

router = APIRouter(prefix="/api/v1", tags=["jobs"])


class CancelOut(JobOut):
    """The job cancelled — on an array's id, its first task — and every job the call
    cancelled."""

    cancelled: list[int] = Field(
        default_factory=list, description="the jobs cancelled: the job, or the array's tasks"
    )


@router.post("/jobs/{job_id}/cancel", response_model=CancelOut)
def cancel(
    job_id: Id,
    ctx: Ctx,
    who: Caller,
    request: Request,
    task: Annotated[
        int | None,
        Query(ge=0, le=2**31 - 1, description="With an array's id: only its task of this index"),
    ] = None,
) -> CancelOut:
    """Cancel a job (scancel ID); its allocation, if any, is released and metered now. On an
    array's id (its first task's), every task not yet ended — pending and running — in one
    transaction; with ``task``, only that task (scancel ID_TASK)."""
    human(who)
    now = time.time()
    with ctx.db.write() as s:
        job = visible_job(s, who, job_id, lock=True)
        may_manage(who, job.tenant, "cancel jobs")
        array = job.array_job == job.id
        if task is not None:
            job = _task(s, who, job, task)
            tasks, target = [job], f"job {job.id} (array {job_id} task {task})"
        elif array:
            tasks = _live_tasks(s, job_id)
            target = f"array {job_id} ({len(tasks)} tasks)"
            if not tasks:
                raise ApiError(409, f"array {job_id}: every task has ended already", "state")
        else:
            tasks, target = [job], f"job {job_id}"
        for t in tasks:
            if t.state in TERMINAL:
                raise ApiError(409, f"job {t.id} already {t.state}", "state")
            may_manage(who, t.tenant, "cancel jobs")  # an array's tasks share its tenant
            finish(s, t, "cancelled", now, f"cancelled by {who.user}", who.user)
        out = CancelOut(**job_out(job).model_dump(), cancelled=[t.id for t in tasks])
    request.state.audit_target = target
    ctx.loop.wake()
    return out


def _task(s: Session, who: Principal, array: JobRow, index: int) -> JobRow:
    """Task ``index`` of ``array`` (its first task), locked."""
    if array.array_job != array.id:
        what = "a plain job" if array.array_job is None else f"a task of array {array.array_job}"
        raise ApiError(422, f"task: job {array.id} is {what}, not an array's id", "task")
    if index == array.array_index:
        return array
    found = s.execute(
        select(JobRow)
        .where(JobRow.array_job == array.id, JobRow.array_index == index)
        .with_for_update()
    ).scalar_one_or_none()
    if found is None or not who.sees(found.tenant):
        raise not_found(f"task {index} of array {array.id}")
    return found


def _live_tasks(s: Session, array_id: int) -> list[JobRow]:
    """The tasks of an array not yet ended, locked in id order."""
    return list(
        s.execute(
            select(JobRow)
            .where(JobRow.array_job == array_id, JobRow.state.not_in(sorted(TERMINAL)))
            .order_by(JobRow.id)
            .with_for_update()
        ).scalars()
    )


def _note(job: JobRow, now: float, reason: str, actor: str) -> JobEventRow:
    """An event for a change that keeps the state (a hold, a release): the history shows it
    and other processes' scheduler loops notice it."""
    return JobEventRow(
        job_id=job.id,
        time=now,
        from_state=job.state,
        to_state=job.state,
        reason=reason,
        actor=actor,
    )


@router.post("/jobs/{job_id}/hold", response_model=JobOut)
def hold(job_id: Id, ctx: Ctx, who: Caller, request: Request) -> JobOut:
    """Keep a pending job from starting until it is released (scontrol hold)."""
    human(who)
    with ctx.db.write() as s:
        job = visible_job(s, who, job_id, lock=True)
        may_manage(who, job.tenant, "hold jobs")
        if job.state != "pending":
            raise ApiError(409, f"job {job_id} is {job.state}; only pending jobs are held", "state")
        job.held = True
        job.reason = f"held by {who.user}"
        job.wait_code = ""
        s.add(_note(job, time.time(), job.reason, who.user))
        out = job_out(job)
    request.state.audit_target = f"job {job_id}"
    return out


@router.post("/jobs/{job_id}/release", response_model=JobOut)
def release_hold(job_id: Id, ctx: Ctx, who: Caller, request: Request) -> JobOut:
    """Let a held job be scheduled again (scontrol release)."""
    human(who)
    with ctx.db.write() as s:
        job = visible_job(s, who, job_id, lock=True)
        may_manage(who, job.tenant, "release jobs")
        if not job.held:
            raise ApiError(409, f"job {job_id} is not held", "held")
        job.held = False
        job.reason = "queued"
        job.wait_code = ""
        s.add(_note(job, time.time(), f"released by {who.user}", who.user))
        out = job_out(job)
    request.state.audit_target = f"job {job_id}"
    ctx.loop.wake()
    return out


@router.post("/jobs/{job_id}/requeue", response_model=JobOut)
def requeue(
    job_id: Id,
    ctx: Ctx,
    who: Caller,
    request: Request,
    hold: Annotated[bool, Query(description="Hold it once requeued (requeuehold)")] = False,
) -> JobOut:
    """Stop a running job and put it back in the queue (scontrol requeue): its devices are
    released and metered now, its agent stops the workload, and it starts again from the top."""
    human(who)
    with ctx.db.write() as s:
        job = visible_job(s, who, job_id, lock=True)
        may_manage(who, job.tenant, "requeue jobs")
        if job.state not in HOLDING:
            raise ApiError(
                409, f"job {job_id} is {job.state}; only admitted or running jobs are requeued"
            )
        finish(s, job, "pending", time.time(), f"requeued by {who.user}", who.user)
        if hold:
            job.held = True
            job.reason = f"requeued and held by {who.user}"
            job.wait_code = ""
        out = job_out(job)
    request.state.audit_target = f"job {job_id}"
    ctx.loop.wake()
    return out

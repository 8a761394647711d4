"""scontrol habits: hold a pending job, release it, requeue a running one."""

import time
from typing import Annotated

from fastapi import APIRouter, Query, Request

from gpupool.server.db.tables import JobEventRow, JobRow
from gpupool.server.deps import Caller, Ctx, Id, human, may_manage
from gpupool.server.errors import ApiError
from gpupool.server.lifecycle import HOLDING, finish
from gpupool.server.routes.jobs import visible_job
from gpupool.server.routes.views import job_out
from gpupool.server.schemas import JobOut

router = APIRouter(prefix="/api/v1", tags=["jobs"])


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

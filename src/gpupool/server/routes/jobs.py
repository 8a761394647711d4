"""Jobs: submit (idempotent), list, get, cancel, events, logs, and the queue view."""

import time
from functools import cache
from typing import Annotated

from fastapi import APIRouter, Header, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from sqlalchemy import Insert, select
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from gpupool.model import Job, SpecError, parse_request
from gpupool.model.batch import check_directory, check_output_path, check_pattern, expand_output
from gpupool.model.job import job_shape
from gpupool.model.workload import check_workload
from gpupool.scheduler.cycle import MIG_PERCENT
from gpupool.server.admission import admit
from gpupool.server.auth import Principal
from gpupool.server.db.tables import (
    AllocationRow,
    AuditRow,
    Base,
    JobEventRow,
    JobLogRow,
    JobRow,
    PriorityClassRow,
    TenantRow,
)
from gpupool.server.deps import (
    Caller,
    Ctx,
    Id,
    Limit,
    Offset,
    ServerContext,
    human,
    may_manage,
)
from gpupool.server.errors import ApiError, not_found
from gpupool.server.group_commit import Batch
from gpupool.server.kube_mirror import ACTOR as KUBE_ACTOR
from gpupool.server.middleware import audit_values
from gpupool.server.routes.views import estimate_out, job_out, page, replica_services, scoped
from gpupool.server.schemas import JobEventOut, JobIn, JobOut, Page, QueueEntry
from gpupool.server.snapshot import cached_request
from gpupool.server.start_estimates import estimates_of
from gpupool.server.submission import (
    add_array_tasks,
    array_spec,
    check_dependencies,
    check_node_names,
    checkpoint_of,
    held_command,
)

router = APIRouter(prefix="/api/v1", tags=["jobs"])
# Core inserts on the tables: the ORM's bulk-insert path cost 2-3x more per row here
EVENT_INSERT = JobEventRow.__table__.insert()
AUDIT_INSERT = AuditRow.__table__.insert()
# what must match for a repeated idempotency key to count as the same submission
SAME = ("request", "name", "kind", "priority_class", "priority", "gang_size", "max_runtime_s")


def visible_job(s: Session, who: Principal, job_id: int, *, lock: bool = False) -> JobRow:
    q = select(JobRow).where(JobRow.id == job_id)
    job = s.execute(q.with_for_update() if lock else q).scalar_one_or_none()
    if job is None or not who.sees(job.tenant):
        raise not_found(f"job {job_id}")  # another tenant's job does not exist for you
    if lock and job.submitted_by == KUBE_ACTOR:  # the pod is the job: change it there
        raise ApiError(
            409, f"job {job_id} is the Kubernetes pod {job.name}: act on the pod (kubectl)", "job"
        )
    return job


@cache
def _job_insert(sqlite: bool) -> Insert:
    """Insert a job unless its tenant already used its idempotency key (then no id comes
    back): one statement instead of a look-up before every insert."""
    table = JobRow.__table__
    stmt = (sqlite_insert if sqlite else postgresql_insert)(table)
    skip = stmt.on_conflict_do_nothing(index_elements=["tenant", "idempotency_key"])
    return skip.returning(table.c.id)


def _missing_names(
    ctx: ServerContext, names: list[tuple[type[Base], str]]
) -> list[tuple[type[Base], str]]:
    """Which tenants / priority classes are not known to exist (hits are cached a few s)."""
    return [(t, n) for t, n in names if not ctx.names.get((t.__tablename__, n))]


def _check_names(ctx: ServerContext, names: list[tuple[type[Base], str]]) -> None:
    """Look the uncached names up; remember those that exist, refuse the first that does not."""
    with ctx.db.read() as s:
        for table, name in names:
            if s.get(table, name) is None:
                if table is TenantRow:
                    raise ApiError(422, f"tenant: unknown tenant {name!r}", "tenant")
                ranked = select(PriorityClassRow.name).order_by(PriorityClassRow.value.desc())
                raise ApiError(
                    422,
                    f"priority_class: unknown class {name!r} (the classes: "
                    f"{', '.join(s.scalars(ranked))})",
                    "priority_class",
                )
            ctx.names.put((table.__tablename__, name), True)


def _spec(body: JobIn) -> str:
    return request_spec(body.request)


def request_spec(text: str) -> str:
    """The canonical request grammar of ``text``; 422 naming ``request`` when it is wrong."""
    try:
        request = parse_request(text)
    except SpecError as exc:
        raise ApiError(422, f"request: {exc}", "request") from None
    if request.mig_profile is not None and request.mig_profile not in MIG_PERCENT:
        known = ", ".join(sorted(MIG_PERCENT))
        raise ApiError(
            422,
            f"request: no GPU has MIG profile {request.mig_profile} (known: {known})",
            "request",
        )
    return request.to_spec()


def _existing(s: Session, tenant: str, key: str, body: JobIn, spec: str) -> JobRow | None:
    jobs = JobRow.__table__.c
    job_id = s.execute(
        select(jobs.id).where(jobs.tenant == tenant, jobs.idempotency_key == key)
    ).scalar_one_or_none()
    if job_id is None:
        return None
    job = s.get_one(JobRow, job_id)
    wanted = {**body.model_dump(include=set(SAME)), "request": spec}
    if any(getattr(job, k) != v for k, v in wanted.items()):
        raise ApiError(
            409,
            f"idempotency_key {key!r} was used for a different job ({job.id})",
            "idempotency_key",
        )
    return job


@router.post("/jobs", status_code=201, response_model=JobOut)
async def submit(
    body: JobIn,
    ctx: Ctx,
    who: Caller,
    request: Request,
    response: Response,
    idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
) -> JobOut:
    """Submit a job. A repeated ``idempotency_key`` (body or header) returns the first job.

    Runs on the event loop: checks that need no database happen here, and the write joins
    the next group commit (one transaction for every submission waiting at that moment)."""
    human(who)
    key = body.idempotency_key or idempotency_key
    tenant = body.tenant or who.tenant
    if tenant is None:
        raise ApiError(422, "tenant: required (your token has no tenant)", "tenant")
    names = _missing_names(ctx, [(TenantRow, tenant), (PriorityClassRow, body.priority_class)])
    if names:
        await run_in_threadpool(_check_names, ctx, names)
    may_manage(who, tenant, "submit jobs")
    spec = _spec(body)
    check_workload(body.command, body.env, body.image)  # SpecError: 422 naming the field
    for field in ("output", "error"):
        if getattr(body, field) is not None:  # the pattern, and what the job's name makes of it
            check_pattern(check_output_path(getattr(body, field), field), field)
            named = expand_output(getattr(body, field), 1, None, None, body.name, who.user, "n")
            check_output_path(named, field)
    for field in ("chdir", "submit_dir"):
        if getattr(body, field) is not None:
            check_directory(getattr(body, field), field)
    if ctx.capacity.stale():
        await run_in_threadpool(ctx.capacity.refresh, ctx.db)
    asked = Job(
        id="submission", request=cached_request(spec), tenant=tenant, gang_size=body.gang_size
    )
    never = ctx.capacity.never_for(asked)
    if never is not None:
        raise ApiError(422, f"request: {never}", "request")
    check_node_names(body, ctx.capacity.node_names())
    array = array_spec(body.array)
    tasks = len(array.indices) if array else 1
    if body.dependency:
        deps = sorted({d.job for d in body.dependency if d.job is not None})
        await run_in_threadpool(check_dependencies, ctx.db, who, tenant, deps)
    command = held_command(body)
    checkpoint = checkpoint_of(body, ctx.settings)
    now = time.time()
    fields = {
        **body.model_dump(
            exclude={"tenant", "request", "idempotency_key", "hold", "array", "allocation"}
        ),
        "command": command,
        "checkpoint": checkpoint,
        "nodelist": list(dict.fromkeys(body.nodelist)) if body.nodelist else None,
        "held": body.hold,
        "array_job": None,
        "array_index": array.indices[0] if array else None,
        "array_limit": array.limit if array else None,
        "tenant": tenant,
        "request": spec,
        "idempotency_key": key,
        "submitted_by": who.user,
        "state": "pending",
        "reason": f"held by {who.user}" if body.hold else "queued",
        "submit_time": now,
        "queued_at": now,
        "started_at": None,
        "finished_at": None,
        "exit_code": None,
        # an allocation (salloc) is a shell session: terminals open in it (docs/interactive.md)
        "interactive": body.interactive or ("shell" if body.allocation else None),
    }
    scope = request.scope

    def write(b: Batch) -> tuple[int, JobOut] | ApiError:
        row = dict(fields)  # the batch may run again alone: leave ``fields`` as it was
        refused = admit(b, ctx.limits, tenant, tasks)
        if refused is not None:  # a value, not raised: the batch's other submissions stand
            old = _existing(b.session, tenant, key, body, spec) if key else None
            return (200, job_out(old)) if old is not None else refused
        job_id = b.session.execute(_job_insert(ctx.db.is_sqlite), row).scalar_one_or_none()
        if job_id is None:  # the key was used before: that submission is the answer
            assert key is not None  # without a key there is no conflict to skip
            old = _existing(b.session, tenant, key, body, spec)
            if old is None:  # pragma: no cover - the conflicting row cannot vanish
                raise ApiError(409, f"idempotency_key {key!r}: conflict", "idempotency_key")
            b.later(AUDIT_INSERT, audit_values(scope, 200, f"job {old.id}"))
            return 200, job_out(old)
        ids = [job_id]
        if array is not None:
            ids = add_array_tasks(b.session, job_id, row, array)
        for task in ids:
            event = {
                "job_id": task,
                "time": now,
                "from_state": None,
                "to_state": "pending",
                "reason": "held" if body.hold else "",
                "actor": who.user,
            }
            b.later(EVENT_INSERT, event)
        target = f"job {job_id}" if array is None else f"array {job_id} ({len(ids)} tasks)"
        b.later(AUDIT_INSERT, audit_values(scope, 201, target))
        out = job_out(JobRow(id=job_id, **row))
        out.array_size = len(ids) if array is not None else None
        return 201, out

    answer = await ctx.writes.run(write)
    if isinstance(answer, ApiError):
        raise answer
    status, out = answer
    request.state.audited = True
    request.state.audit_target = f"job {out.id}"
    response.status_code = status
    return out


@router.get("/jobs", response_model=Page[JobOut])
def list_jobs(
    ctx: Ctx,
    who: Caller,
    limit: Limit = 100,
    offset: Offset = 0,
    state: Annotated[str | None, Query(max_length=20)] = None,
    tenant: Annotated[str | None, Query(max_length=100)] = None,
    kind: Annotated[str | None, Query(max_length=20)] = None,
    user: Annotated[str | None, Query(max_length=100, description="submitted by")] = None,
    name: Annotated[str | None, Query(max_length=200)] = None,
    array: Annotated[int | None, Query(ge=1, le=2**62, description="tasks of this array")] = None,
) -> Page[JobOut]:
    human(who)
    q = scoped(
        select(JobRow).order_by(JobRow.id.desc()),
        JobRow.tenant,
        who,
        {
            JobRow.state: state,
            JobRow.tenant: tenant,
            JobRow.kind: kind,
            JobRow.submitted_by: user,
            JobRow.name: name,
            JobRow.array_job: array,
        },
    )
    with ctx.db.read() as s:
        jobs, total = page(s, q, limit, offset)
        allocs = _active_allocations(s, [j.id for j in jobs])
        services = replica_services(s, [j.id for j in jobs])
        planned = estimates_of(s, [j.id for j in jobs if j.state == "pending"])
    items = [job_out(j, allocs.get(j.id), services.get(j.id), planned.get(j.id)) for j in jobs]
    return Page(items=items, total=total, limit=limit, offset=offset)


def _active_allocations(s: Session, job_ids: list[int]) -> dict[int, AllocationRow]:
    if not job_ids:
        return {}
    rows = s.execute(
        select(AllocationRow).where(
            AllocationRow.job_id.in_(job_ids), AllocationRow.state == "active"
        )
    ).scalars()
    return {a.job_id: a for a in rows}


@router.get("/jobs/{job_id}", response_model=JobOut)
def get_job(job_id: Id, ctx: Ctx, who: Caller) -> JobOut:
    human(who)
    with ctx.db.read() as s:
        job = visible_job(s, who, job_id)
        service = replica_services(s, [job.id]).get(job.id)
        planned = estimates_of(s, [job.id]).get(job.id)
        return job_out(job, _active_allocations(s, [job.id]).get(job.id), service, planned)


@router.get("/jobs/{job_id}/events", response_model=list[JobEventOut])
def events(job_id: Id, ctx: Ctx, who: Caller) -> list[JobEventOut]:
    human(who)
    with ctx.db.read() as s:
        visible_job(s, who, job_id)
        rows = s.execute(
            select(JobEventRow).where(JobEventRow.job_id == job_id).order_by(JobEventRow.id)
        ).scalars()
        return [JobEventOut.model_validate(r, from_attributes=True) for r in rows]


@router.get("/jobs/{job_id}/logs")
def logs(
    job_id: Id,
    ctx: Ctx,
    who: Caller,
    after: Annotated[int, Query(ge=0, le=2**62, description="return chunks after this id")] = 0,
    limit: Limit = 1000,
) -> dict[str, object]:
    """Log chunks the agent uploaded, oldest first; pass the last ``id`` as ``after`` to
    follow."""
    human(who)
    with ctx.db.read() as s:
        job = visible_job(s, who, job_id)
        rows = s.execute(
            select(JobLogRow)
            .where(JobLogRow.job_id == job_id, JobLogRow.id > after)
            .order_by(JobLogRow.id)
            .limit(limit)
        ).scalars()
        chunks = [{"id": r.id, "time": r.time, "stream": r.stream, "text": r.text} for r in rows]
        return {"job_id": job_id, "state": job.state, "chunks": chunks}


@router.get("/queue", response_model=Page[QueueEntry])
def queue(
    ctx: Ctx,
    who: Caller,
    limit: Limit = 100,
    offset: Offset = 0,
    tenant: Annotated[str | None, Query(max_length=100)] = None,
    user: Annotated[str | None, Query(max_length=100, description="submitted by")] = None,
) -> Page[QueueEntry]:
    """Pending jobs in queue order (priority class, then age), each with why it waits."""
    human(who)
    q = (
        select(JobRow)
        .join(PriorityClassRow, PriorityClassRow.name == JobRow.priority_class)
        .where(JobRow.state == "pending")
        .order_by(
            PriorityClassRow.value.desc(), JobRow.priority.desc(), JobRow.submit_time, JobRow.id
        )
    )
    q = scoped(q, JobRow.tenant, who, {JobRow.tenant: tenant, JobRow.submitted_by: user})
    now = time.time()
    with ctx.db.read() as s:
        jobs, total = page(s, q, limit, offset)
        planned = estimates_of(s, [j.id for j in jobs])
    items = [
        QueueEntry(
            id=j.id,
            tenant=j.tenant,
            submitted_by=j.submitted_by,
            name=j.name,
            request=j.request,
            priority_class=j.priority_class,
            waited_s=round(now - j.queued_at, 3),
            reason=j.reason,
            max_runtime_s=j.max_runtime_s,
            held=bool(j.held),
            array_job=j.array_job,
            array_index=j.array_index,
            gang_size=j.gang_size,
            shape=job_shape(j.request, j.gang_size),
            wait_code=j.wait_code or "",
            estimate=estimate_out(j, planned.get(j.id)),
        )
        for j in jobs
    ]
    return Page(items=items, total=total, limit=limit, offset=offset)

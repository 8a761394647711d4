"""Elastic inference services: create, list, show, pin, delete; ready endpoints for a load
balancer; the load history with the forecast against it. Replicas are jobs the leader's
reconciler starts and stops (``gpupool.server.services.reconcile``)."""

import time
from typing import Annotated

from fastapi import APIRouter, Query, Request
from sqlalchemy import select
from sqlalchemy.orm import Session

from gpupool.model import Job
from gpupool.model.workload import check_workload
from gpupool.server.admission import check_service
from gpupool.server.auth import Principal
from gpupool.server.db.tables import (
    JobRow,
    ServiceReplicaRow,
    ServiceRow,
    ServiceSampleRow,
    TenantRow,
)
from gpupool.server.deps import Caller, Ctx, human, may_manage
from gpupool.server.errors import ApiError, not_found
from gpupool.server.routes.jobs import request_spec
from gpupool.server.schemas import Name, TenantName
from gpupool.server.services.replica_nodes import replica_places
from gpupool.server.services.replicas import Replica, read_replicas, stop_replica
from gpupool.server.services.schemas import (
    EndpointOut,
    ReplicaOut,
    ScaleIn,
    ServiceIn,
    ServiceOut,
)
from gpupool.server.snapshot import cached_request

router = APIRouter(prefix="/api/v1", tags=["services"])
TenantQuery = Annotated[
    TenantName | None, Query(description="the service's tenant (default: yours)")
]


def service_out(s: Session, svc: ServiceRow, read: list[Replica] | None = None) -> ServiceOut:
    """The service with its replicas (``read``: already read with others', else read now)."""
    mine = read_replicas(s, [svc.id]) if read is None else read
    replicas = [
        ReplicaOut(job_id=r.job_id, state=r.state, node=r.node, endpoint=r.endpoint,
                   ready=r.ready, draining=r.draining_since is not None, parked=r.parked,
                   parked_on=r.parked_on, woke_in_s=r.woke_in_s)
        for r in sorted(mine, key=lambda r: r.job_id)
    ]  # fmt: skip
    return ServiceOut(
        id=svc.id, name=svc.name, tenant=svc.tenant, request=svc.request,
        command=list(svc.command), image=svc.image, min_replicas=svc.min_replicas,
        max_replicas=svc.max_replicas, metric=svc.metric, target=svc.target,
        utilisation=svc.utilisation, stable_s=svc.stable_s,
        scale_down_delay_s=svc.scale_down_delay_s, startup_s=svc.startup_s, policy=svc.policy,
        health_path=svc.health_path, warm=svc.warm, placement=svc.placement,
        pinned=svc.pinned, desired=svc.desired,
        ready=sum(1 for r in replicas if r.ready), status=svc.status, replicas=replicas,
        created_by=svc.created_by, created_at=svc.created_at,
    )  # fmt: skip


def find(s: Session, who: Principal, name: str, tenant: str | None, *, lock=False) -> ServiceRow:
    """The caller's service ``name`` (of ``tenant``, or the caller's own tenant; an admin
    without a tenant finds it when one tenant has a service of that name)."""
    q = select(ServiceRow).where(ServiceRow.name == name)
    owner = tenant or who.tenant
    if owner is not None:
        q = q.where(ServiceRow.tenant == owner)
    rows = [
        r for r in s.execute(q.with_for_update() if lock else q).scalars() if who.sees(r.tenant)
    ]
    if not rows:
        raise not_found(f"service {name}")  # another tenant's service does not exist for you
    if len(rows) > 1:
        raise ApiError(422, f"tenant: several tenants have a service {name!r}; name one", "tenant")
    return rows[0]


def _checked(body: ServiceIn) -> str:
    spec = request_spec(body.request)
    if not body.command and body.image is None:
        raise ApiError(422, "command: required (what does a replica run?)", "command")
    check_workload(body.command, body.env, body.image)  # SpecError: 422 naming the field
    for reserved in ("PORT", "GPUPOOL_SERVICE", "GPUPOOL_REPLICA_PORT", "GPUPOOL_CONTROL_PORT"):
        if reserved in body.env:
            raise ApiError(422, f"env: {reserved} is set by the service for each replica", "env")
    return spec


@router.post("/services", status_code=201, response_model=ServiceOut)
def create(body: ServiceIn, ctx: Ctx, who: Caller, request: Request) -> ServiceOut:
    """Create a service; the leader starts its ``min_replicas`` replicas at once."""
    human(who)
    tenant = body.tenant or who.tenant
    if tenant is None:
        raise ApiError(422, "tenant: required (your token has no tenant)", "tenant")
    may_manage(who, tenant, "create services")
    spec = _checked(body)
    if ctx.capacity.stale():
        ctx.capacity.refresh(ctx.db)
    never = ctx.capacity.never_for(Job(id="replica", request=cached_request(spec), tenant=tenant))
    if never is not None:
        raise ApiError(422, f"request: a replica can never run: {never}", "request")
    now = time.time()
    with ctx.db.write() as s:
        if s.get(TenantRow, tenant) is None:
            raise ApiError(422, f"tenant: unknown tenant {tenant!r}", "tenant")
        nowhere, warnings = replica_places(s)
        if nowhere is not None:
            raise ApiError(422, f"service: {nowhere}", "request")
        taken = select(ServiceRow.id).where(
            ServiceRow.tenant == tenant, ServiceRow.name == body.name
        )
        if s.execute(taken).first() is not None:
            raise ApiError(409, f"name: tenant {tenant} has a service {body.name!r}", "name")
        s.execute(select(TenantRow.name).where(TenantRow.name == tenant).with_for_update())
        check_service(s, tenant, ctx.limits.get(s, tenant), body.max_replicas)
        svc = ServiceRow(
            **body.model_dump(exclude={"tenant", "request"}),
            tenant=tenant, request=spec, pinned=None, desired=body.min_replicas,
            status="created; replicas start at the next pass", created_by=who.user,
            created_at=now,
        )  # fmt: skip
        s.add(svc)
        s.flush()
        out = service_out(s, svc).model_copy(update={"warnings": warnings})
    request.state.audit_target = f"service {tenant}/{body.name}"
    ctx.loop.wake()
    return out


@router.get("/services", response_model=list[ServiceOut])
def list_services(ctx: Ctx, who: Caller, tenant: TenantQuery = None) -> list[ServiceOut]:
    human(who)
    with ctx.db.read() as s:
        q = select(ServiceRow).order_by(ServiceRow.tenant, ServiceRow.name)
        if tenant is not None:
            q = q.where(ServiceRow.tenant == tenant)
        rows = [r for r in s.execute(q).scalars() if who.sees(r.tenant)]
        by_service: dict[int, list[Replica]] = {r.id: [] for r in rows}
        for replica in read_replicas(s, list(by_service)):  # one read for every service
            by_service[replica.service_id].append(replica)
        return [service_out(s, r, by_service[r.id]) for r in rows]


@router.get("/services/{name}", response_model=ServiceOut)
def show(name: Name, ctx: Ctx, who: Caller, tenant: TenantQuery = None) -> ServiceOut:
    human(who)
    with ctx.db.read() as s:
        return service_out(s, find(s, who, name, tenant))


@router.post("/services/{name}/scale", response_model=ServiceOut)
def scale(
    name: Name, body: ScaleIn, ctx: Ctx, who: Caller, request: Request, tenant: TenantQuery = None
) -> ServiceOut:
    """Pin the replicas (within min and max), or give them back to the autoscaler (null)."""
    human(who)
    with ctx.db.write() as s:
        svc = find(s, who, name, tenant, lock=True)
        may_manage(who, svc.tenant, "scale services")
        n = body.replicas
        if n is not None and not svc.min_replicas <= n <= svc.max_replicas:
            raise ApiError(
                422,
                f"replicas: {n} is outside {svc.min_replicas}..{svc.max_replicas} "
                "(the service's min_replicas and max_replicas)",
                "replicas",
            )
        svc.pinned = n
        out = service_out(s, svc)
    request.state.audit_target = f"service {out.tenant}/{name}"
    ctx.loop.wake()
    return out


@router.delete("/services/{name}", status_code=204)
def delete(name: Name, ctx: Ctx, who: Caller, request: Request, tenant: TenantQuery = None):
    """Delete a service: its replicas stop now (metered to now)."""
    human(who)
    now = time.time()
    with ctx.db.write() as s:
        svc = find(s, who, name, tenant, lock=True)
        may_manage(who, svc.tenant, "delete services")
        for (job_id,) in s.execute(
            select(ServiceReplicaRow.job_id).where(ServiceReplicaRow.service_id == svc.id)
        ).all():
            stop_replica(s, job_id, now, f"service {svc.name} deleted by {who.user}")
        request.state.audit_target = f"service {svc.tenant}/{name}"
        s.delete(svc)
    ctx.loop.wake()


@router.get("/services/{name}/endpoints", response_model=list[EndpointOut])
def endpoints(name: Name, ctx: Ctx, who: Caller, tenant: TenantQuery = None) -> list[EndpointOut]:
    """The replicas that answered their last health check and are not draining."""
    human(who)
    with ctx.db.read() as s:
        svc = find(s, who, name, tenant)
        rows = s.execute(
            select(ServiceReplicaRow.job_id, ServiceReplicaRow.endpoint)
            .join(JobRow, JobRow.id == ServiceReplicaRow.job_id)
            .where(ServiceReplicaRow.service_id == svc.id, ServiceReplicaRow.ready.is_(True),
                   ServiceReplicaRow.draining_since.is_(None),
                   ServiceReplicaRow.endpoint.is_not(None), JobRow.state == "running")
            .order_by(ServiceReplicaRow.job_id)
        ).all()  # fmt: skip
    return [EndpointOut(job_id=j, endpoint=e) for j, e in rows]


@router.get("/services/{name}/history")
def history(
    name: Name,
    ctx: Ctx,
    who: Caller,
    tenant: TenantQuery = None,
    hours: Annotated[float, Query(gt=0, le=24 * 14)] = 24,
) -> dict:
    """Load, replicas and the forecast made at each sample (one a minute) over ``hours``."""
    human(who)
    since = time.time() - hours * 3600
    with ctx.db.read() as s:
        svc = find(s, who, name, tenant)
        rows = s.execute(
            select(ServiceSampleRow.time, ServiceSampleRow.load, ServiceSampleRow.ready,
                   ServiceSampleRow.desired, ServiceSampleRow.forecast)
            .where(ServiceSampleRow.service_id == svc.id, ServiceSampleRow.time >= since)
            .order_by(ServiceSampleRow.time)
        ).all()  # fmt: skip
        status, policy, metric = svc.status, svc.policy, svc.metric
    return {
        "service": name,
        "policy": policy,
        "metric": metric,
        "status": status,
        "samples": [
            {"time": t, "load": load, "ready": r, "desired": d, "forecast": f}
            for t, load, r, d, f in rows
        ],
    }

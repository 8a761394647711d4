"""Tenants (a tree) and their quotas."""

import time

from fastapi import APIRouter, Request
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from gpupool.scheduler.cycle import MIG_PERCENT
from gpupool.scheduler.placement_json import placement_from_json
from gpupool.scheduler.tenants import usage_of
from gpupool.server.auth import Principal, Role
from gpupool.server.codec import check_resource, quota_from_engine, quota_to_engine
from gpupool.server.db.tables import (
    AllocationRow,
    DeviceRow,
    JobRow,
    QuotaRow,
    TenantRow,
)
from gpupool.server.deps import Caller, Ctx, Limit, Offset, human, may_administer
from gpupool.server.errors import ApiError, forbidden, not_found
from gpupool.server.overbooking import counted_in, overbooked
from gpupool.server.routes.guarantees import Level
from gpupool.server.routes.views import page
from gpupool.server.schemas import Page, QuotaIn, QuotaOut, TenantIn, TenantOut

router = APIRouter(prefix="/api/v1", tags=["tenants"])


def _used(s: Session, tenant: str) -> dict[str, int]:
    """What the tenant's live allocations hold, per quota resource (engine units)."""
    rows = s.execute(
        select(AllocationRow.job_id, AllocationRow.placement).where(
            AllocationRow.tenant == tenant, AllocationRow.state == "active"
        )
    ).all()
    if not rows:
        return {}
    nodes = {n["node"] for _, p in rows for n in p["nodes"]}
    models = {
        (d.node, d.index): d.model
        for d in s.execute(select(DeviceRow).where(DeviceRow.node.in_(nodes))).scalars()
    }
    total: dict[str, int] = {}
    for job_id, p in rows:
        for resource, amount in usage_of(
            placement_from_json(str(job_id), p), MIG_PERCENT, models
        ).items():
            total[resource] = total.get(resource, 0) + amount
    return total


def tenant_out(s: Session, t: TenantRow, with_usage: bool = False) -> TenantOut:
    used = _used(s, t.name) if with_usage else {}
    quotas = [
        QuotaOut(
            resource=q.resource,
            nominal=quota_from_engine(q.resource, q.nominal) or 0.0,
            borrowing_limit=quota_from_engine(q.resource, q.borrowing_limit),
            lending_limit=quota_from_engine(q.resource, q.lending_limit),
            used=quota_from_engine(q.resource, used.get(q.resource, 0)) if with_usage else None,
        )
        for q in s.execute(
            select(QuotaRow).where(QuotaRow.tenant == t.name).order_by(QuotaRow.resource)
        ).scalars()
    ]
    return TenantOut(name=t.name, parent=t.parent, weight=t.weight, quotas=quotas)


@router.post("/tenants", status_code=201, response_model=TenantOut)
def create_tenant(body: TenantIn, ctx: Ctx, who: Caller, request: Request) -> TenantOut:
    """Admins create any tenant; tenant-admins create tenants below their own."""
    human(who)
    if not who.is_admin:
        if who.role is not Role.TENANT_ADMIN or body.parent is None:
            raise forbidden("only admins create top-level tenants")
        if not who.sees(body.parent):
            raise forbidden(f"{body.parent} is outside {who.user}'s tenants")
    with ctx.db.write() as s:
        if s.get(TenantRow, body.name) is not None:
            raise ApiError(409, f"tenant {body.name} already exists", "name")
        if body.parent is not None and s.get(TenantRow, body.parent) is None:
            raise ApiError(422, f"parent: unknown tenant {body.parent!r}", "parent")
        row = TenantRow(
            name=body.name, parent=body.parent, weight=body.weight, created_at=time.time()
        )
        s.add(row)
        s.flush()
        out = tenant_out(s, row)
    request.state.audit_target = f"tenant {body.name}"
    ctx.forget_principals()  # subtrees grew
    ctx.capacity.invalidate()
    return out


@router.get("/tenants", response_model=Page[TenantOut])
def list_tenants(ctx: Ctx, who: Caller, limit: Limit = 100, offset: Offset = 0) -> Page[TenantOut]:
    human(who)
    q = select(TenantRow).order_by(TenantRow.name)
    if who.visible is not None:
        q = q.where(TenantRow.name.in_(who.visible))
    with ctx.db.read() as s:
        rows, total = page(s, q, limit, offset)
        items = [tenant_out(s, t, with_usage=True) for t in rows]
    return Page(items=items, total=total, limit=limit, offset=offset)


@router.get("/tenants/{name}", response_model=TenantOut)
def get_tenant(name: str, ctx: Ctx, who: Caller) -> TenantOut:
    human(who)
    with ctx.db.read() as s:
        t = s.get(TenantRow, name)
        if t is None or not who.sees(name):
            raise not_found(f"tenant {name}")
        return tenant_out(s, t, with_usage=True)


@router.delete("/tenants/{name}", status_code=204)
def delete_tenant(name: str, ctx: Ctx, who: Caller) -> None:
    """Only a tenant without sub-tenants, users or unfinished jobs can go."""
    human(who)
    with ctx.db.write() as s:
        t = s.get(TenantRow, name)
        if t is None or not who.sees(name):
            raise not_found(f"tenant {name}")
        may_administer(who, name, "delete the tenant")
        if s.execute(select(TenantRow.name).where(TenantRow.parent == name)).first():
            raise ApiError(409, f"tenant {name} has sub-tenants")
        if s.execute(select(JobRow.id).where(JobRow.tenant == name)).first():
            raise ApiError(409, f"tenant {name} has jobs; it is kept for their history")
        s.execute(delete(QuotaRow).where(QuotaRow.tenant == name))
        s.delete(t)
    ctx.forget_principals()
    ctx.names.clear()


@router.put("/tenants/{name}/quotas/{resource}", response_model=TenantOut)
def set_quota(name: str, resource: str, body: QuotaIn, ctx: Ctx, who: Caller) -> TenantOut:
    """Set one quota: ``gpu`` / ``gpu:MODEL`` in cards, ``gpu_mem`` in MiB, ``cpu`` in cores.
    The body's ``resource`` must match the path's."""
    human(who)
    canonical = check_resource(resource)
    if check_resource(body.resource) != canonical:
        raise ApiError(
            422, f"resource: body says {body.resource}, path says {resource}", "resource"
        )
    values = {
        k: quota_to_engine(canonical, getattr(body, k))
        for k in ("nominal", "borrowing_limit", "lending_limit")
    }
    with ctx.db.write() as s:
        t = s.get(TenantRow, name)
        if t is None or not who.sees(name):
            raise not_found(f"tenant {name}")
        may_administer(who, name, "set quotas")
        row = s.get(QuotaRow, (name, canonical), with_for_update=True)
        if row is None:
            s.add(QuotaRow(tenant=name, resource=canonical, **values))
        else:
            for k, v in values.items():
                setattr(row, k, v)
        s.flush()
        warnings, refused = _overbooked(s, who, name, canonical)
        if refused and ctx.settings.quota_overbooking == "refuse":
            raise ApiError(409, "; ".join(warnings) + " (quota_overbooking = refuse)", "nominal")
        out = tenant_out(s, t, with_usage=True)
        out.warnings = warnings
    ctx.capacity.invalidate()  # ceilings changed
    ctx.loop.wake()
    return out


def _overbooked(s: Session, who: Principal, tenant: str, resource: str) -> tuple[list[str], bool]:
    """What the guarantees overbook at every level from the pool down to ``tenant``'s (in
    words the caller may read), and whether a level ``tenant``'s guarantee takes part in is
    overbooked (what ``quota_overbooking = "refuse"`` refuses)."""
    level = Level(s, resource)
    words = overbooked(tenant, resource, level.parents, level.nominal, level.capacity,
                       level.shown, who.sees)  # fmt: skip
    mine = counted_in(tenant, level.parents, level.nominal)
    return words, any(o.over in mine for o in level.found())


@router.delete("/tenants/{name}/quotas/{resource}", response_model=TenantOut)
def delete_quota(name: str, resource: str, ctx: Ctx, who: Caller) -> TenantOut:
    human(who)
    canonical = check_resource(resource)
    with ctx.db.write() as s:
        t = s.get(TenantRow, name)
        if t is None or not who.sees(name):
            raise not_found(f"tenant {name}")
        may_administer(who, name, "delete quotas")
        row = s.get(QuotaRow, (name, canonical))
        if row is None:
            raise not_found(f"quota {canonical} of {name}")
        s.delete(row)
        s.flush()
        out = tenant_out(s, t, with_usage=True)
        # without its guarantee, its children's pass up: say what that overbooks
        out.warnings = _overbooked(s, who, name, canonical)[0]
    ctx.capacity.invalidate()  # ceilings changed
    ctx.loop.wake()
    return out

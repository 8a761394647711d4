"""A tenant's admission limits (``gpupool.server.admission``): everyone who sees the tenant
reads them with what it holds against each; admins set them."""

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from gpupool.server.admission import active_jobs, effective, services_held
from gpupool.server.auth import Role
from gpupool.server.db.tables import TenantRow
from gpupool.server.deps import Caller, Ctx, human, require
from gpupool.server.errors import not_found
from gpupool.server.schemas import Strict, TenantName

router = APIRouter(prefix="/api/v1", tags=["tenants"])


class LimitsIn(Strict):
    """Each limit, or null for the server's default."""

    jobs: int | None = Field(None, ge=1, le=10_000_000, description="jobs pending/held/running")
    array: int | None = Field(None, ge=1, le=1_000_000, description="tasks in one array")
    services: int | None = Field(None, ge=0, le=100_000)
    replicas: int | None = Field(
        None, ge=0, le=1_000_000, description="replicas its services may run together"
    )
    log_mib: int | None = Field(None, ge=1, le=10_000_000, description="MiB of job logs kept")


class LimitsOut(BaseModel):
    tenant: str
    limits: dict[str, int]  # in force
    own: dict[str, int]  # set for this tenant (the rest: the server's defaults)
    held: dict[str, int]  # what it holds against each (array: none; a per-submission bound)


def _out(ctx, s, row: TenantRow) -> LimitsOut:
    services, replicas = services_held(s, row.name)
    held = {
        "jobs": active_jobs(s, row.name),
        "services": services,
        "replicas": replicas,
        "log_mib": -(-(row.log_bytes or 0) // (1024 * 1024)),
    }
    limits = effective(row.limits, ctx.settings).as_dict()
    return LimitsOut(tenant=row.name, limits=limits, own=dict(row.limits or {}), held=held)


@router.get("/tenants/{name}/limits", response_model=LimitsOut)
def get_limits(name: TenantName, ctx: Ctx, who: Caller) -> LimitsOut:
    human(who)
    with ctx.db.read() as s:
        row = s.get(TenantRow, name)
        if row is None or not who.sees(name):
            raise not_found(f"tenant {name}")
        return _out(ctx, s, row)


@router.put("/tenants/{name}/limits", response_model=LimitsOut)
def set_limits(
    name: TenantName, body: LimitsIn, ctx: Ctx, who: Caller, request: Request
) -> LimitsOut:
    """Replace the tenant's own limits (admins): a field left null takes the default."""
    require(who, (Role.ADMIN,), "setting admission limits")
    with ctx.db.write() as s:
        row = s.get(TenantRow, name, with_for_update=True)
        if row is None:
            raise not_found(f"tenant {name}")
        row.limits = {k: v for k, v in body.model_dump().items() if v is not None}
        s.flush()
        out = _out(ctx, s, row)
    ctx.limits.forget(name)
    request.state.audit_target = f"limits of {name}"
    return out

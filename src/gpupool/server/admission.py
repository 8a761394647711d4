"""Per-tenant admission limits: how much of the pool's shared machinery one tenant may hold —
jobs waiting or running, tasks in one array, services, their replicas, log characters kept.
Admins set them per tenant (``PUT /tenants/{name}/limits``); a tenant without its own has the
server's defaults (``tenant_max_*``). A limit reached is a 429 that names it and its value,
so no tenant can flood the queue, the reconciler or the database for the others."""

import time
from dataclasses import asdict, dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from gpupool.server.db.tables import JobRow, ServiceRow, TenantRow
from gpupool.server.errors import ApiError
from gpupool.server.group_commit import Batch
from gpupool.server.settings import Settings

ACTIVE = ("pending", "admitted", "running", "preempted", "lost")  # not yet ended
CACHE_S = 5.0
FIELDS = {
    "jobs": ("tenant_max_jobs", "jobs pending, held or running"),
    "array": ("tenant_max_array", "tasks in one array"),
    "services": ("tenant_max_services", "services"),
    "replicas": ("tenant_max_replicas", "replicas its services may run together"),
    "log_mib": ("tenant_max_log_mib", "MiB of job logs kept"),
}


@dataclass(frozen=True, slots=True)
class Limits:
    jobs: int
    array: int
    services: int
    replicas: int
    log_mib: int

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def defaults(settings: Settings) -> Limits:
    return Limits(**{k: getattr(settings, name) for k, (name, _) in FIELDS.items()})


def effective(own: dict[str, int] | None, settings: Settings) -> Limits:
    """The tenant's own limits over the server's defaults (an own 0 services is 0)."""
    own, base = own or {}, defaults(settings).as_dict()
    return Limits(**{k: int(own[k] if own.get(k) is not None else base[k]) for k in FIELDS})


def refuse(name: str, limit: int, tenant: str, what: str = "") -> ApiError:
    meaning = FIELDS[name][1]
    return ApiError(
        429,
        f"limit: tenant {tenant} may have at most {limit} {meaning} ({name} = {limit}){what}; "
        "an admin can change it with gpupool tenant limits",
        "limit",
    )


class LimitCache:
    """Each tenant's limits, read at most every ``CACHE_S`` per process (submissions are
    many; limits change seldom)."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self._seen: dict[str, tuple[float, Limits]] = {}

    def get(self, s: Session, tenant: str) -> Limits:
        now = time.monotonic()
        hit = self._seen.get(tenant)
        if hit is not None and now - hit[0] < CACHE_S:
            return hit[1]
        own = s.execute(select(TenantRow.limits).where(TenantRow.name == tenant)).scalar()
        limits = effective(own, self.settings)
        self._seen[tenant] = (now, limits)
        return limits

    def forget(self, tenant: str) -> None:
        self._seen.pop(tenant, None)


def active_jobs(s: Session, tenant: str) -> int:
    return s.execute(
        select(func.count())
        .select_from(JobRow)
        .where(JobRow.state.in_(ACTIVE), JobRow.tenant == tenant)
    ).scalar_one()


def services_held(s: Session, tenant: str) -> tuple[int, int]:
    """The tenant's services and the replicas they may run together."""
    count, replicas = s.execute(
        select(func.count(), func.coalesce(func.sum(ServiceRow.max_replicas), 0)).where(
            ServiceRow.tenant == tenant
        )
    ).one()
    return int(count), int(replicas)


def check_service(s: Session, tenant: str, limits: Limits, max_replicas: int) -> None:
    """A new service fits the tenant's limits; else the 429 naming the one reached."""
    count, replicas = services_held(s, tenant)
    if count + 1 > limits.services:
        raise refuse("services", limits.services, tenant, f" (it has {count})")
    if replicas + max_replicas > limits.replicas:
        raise refuse(
            "replicas", limits.replicas, tenant, f" (its services may run {replicas} already)"
        )


def admit(b: Batch, cache: LimitCache, tenant: str, tasks: int) -> ApiError | None:
    """Whether ``tasks`` more jobs of ``tenant`` fit its limits, inside a group transaction:
    the tenant's active jobs are counted once per transaction and the ones it admits added,
    so a burst of submissions costs one count, and no burst passes the limit."""
    limits = cache.get(b.session, tenant)
    if tasks > limits.array:
        return refuse("array", limits.array, tenant, f" (this one has {tasks})")
    held = b.memo.get(("active", tenant))
    if held is None:
        held = active_jobs(b.session, tenant)
    b.memo[("active", tenant)] = held
    if held + tasks > limits.jobs:
        return refuse("jobs", limits.jobs, tenant, f" (it has {held})")
    b.memo[("active", tenant)] = held + tasks
    return None

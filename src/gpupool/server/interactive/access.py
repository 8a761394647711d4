"""Who may open a session, and where it runs.

A session's terminals are its tenant's: a member of that tenant, a
tenant-admin above it, or an admin may open them — an admin's opening of another tenant's
session is audited as such. Viewers and finance users read about sessions, never into them;
agents never. Another tenant's job and a job that does not exist are refused alike (403),
without saying whether it exists; a job the caller sees that is no session or is not
running, with 409 and why."""

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpupool.server.auth import Principal, Role
from gpupool.server.db.tables import AllocationRow, JobRow
from gpupool.server.errors import ApiError, forbidden


@dataclass(frozen=True, slots=True)
class Target:
    job_id: int
    alloc_id: int
    tenant: str
    kind: str  # shell
    node: str
    owner: str  # who submitted it


def may_open(who: Principal, tenant: str) -> bool:
    if who.is_admin:
        return True
    if who.role is Role.TENANT_ADMIN:
        return who.sees(tenant)
    return who.role is Role.MEMBER and who.tenant == tenant


def refused(job_id: int) -> ApiError:
    return forbidden(f"job {job_id} is not a running session of your tenant")


def target(s: Session, who: Principal, job_id: int, kind: str | None = None) -> Target:
    """The running session ``job_id`` the caller may open (of ``kind`` when given)."""
    job = s.get(JobRow, job_id)
    if job is None or not who.sees(job.tenant) or not may_open(who, job.tenant):
        raise refused(job_id)
    if job.interactive is None or (kind is not None and job.interactive != kind):
        raise ApiError(409, f"job {job_id} is not an interactive session (gpupool alloc and "
                       "srun --pty make one)", "job")  # fmt: skip
    if job.state != "running":
        raise ApiError(409, f"job {job_id} is {job.state}, not running: {job.reason}", "job")
    alloc = s.execute(
        select(AllocationRow).where(AllocationRow.job_id == job_id, AllocationRow.state == "active")
    ).scalar_one_or_none()
    if alloc is None:
        raise ApiError(409, f"job {job_id} holds no allocation now", "job")
    nodes = alloc.placement.get("nodes") or []
    return Target(job_id, alloc.id, job.tenant, job.interactive, nodes[0]["node"] if nodes
                  else "", job.submitted_by)  # fmt: skip


def audit_detail(who: Principal, t: Target) -> str:
    """What the audit log says of an opening: an admin's in another tenant, named so."""
    if who.is_admin:
        return f"admin {who.user} opened a session of tenant {t.tenant} (job {t.job_id})"
    return f"{who.user} opened session job {t.job_id} of tenant {t.tenant}"

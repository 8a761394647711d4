"""Job logs by policy: the server keeps a tenant's logs for ``log_retention_days`` after each
job ended, and at most its ``log_mib`` limit — past 80% of it the logs of its oldest ended
jobs go first, so a full tenant has room again and the newest logs stay. Each tenant's count
of characters held (what uploads are checked against) is set exact again at every pass."""

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from gpupool.server.admission import LimitCache
from gpupool.server.db.rows_changed import rows_changed
from gpupool.server.db.tables import JobLogRow, JobRow, TenantRow
from gpupool.server.lifecycle import TERMINAL

KEEP_OF_LIMIT = 0.8  # a tenant over its limit is pruned down to this share of it


def _held(tenant: str):
    return (
        select(func.coalesce(func.sum(func.length(JobLogRow.text)), 0))
        .join(JobRow, JobRow.id == JobLogRow.job_id)
        .where(JobRow.tenant == tenant)
        .scalar_subquery()
    )


def prune_logs(s: Session, now: float, retention_s: float, limits: LimitCache) -> int:
    """One pass; returns how many log chunks were deleted."""
    old = select(JobRow.id).where(JobRow.finished_at < now - retention_s)
    deleted = rows_changed(s, delete(JobLogRow).where(JobLogRow.job_id.in_(old)))
    for tenant in s.execute(select(TenantRow.name)).scalars().all():
        s.execute(update(TenantRow).where(TenantRow.name == tenant).values(log_bytes=_held(tenant)))
        held = s.execute(select(TenantRow.log_bytes).where(TenantRow.name == tenant)).scalar_one()
        keep = int(limits.get(s, tenant).log_mib * 1024 * 1024 * KEEP_OF_LIMIT)
        if held <= keep:
            continue
        per_job = s.execute(
            select(JobRow.id, func.sum(func.length(JobLogRow.text)))
            .join(JobLogRow, JobLogRow.job_id == JobRow.id)
            .where(JobRow.tenant == tenant, JobRow.state.in_(TERMINAL))
            .group_by(JobRow.id, JobRow.finished_at)
            .order_by(JobRow.finished_at, JobRow.id)
        ).all()
        drop = []
        for job_id, size in per_job:
            if held <= keep:
                break
            drop.append(job_id)
            held -= int(size)
        if drop:
            deleted += rows_changed(s, delete(JobLogRow).where(JobLogRow.job_id.in_(drop)))
            s.execute(
                update(TenantRow).where(TenantRow.name == tenant).values(log_bytes=_held(tenant))
            )
    return deleted

"""The work a preemption costs a job, metered as it is preempted (issue 49): card-seconds,
from what its allocation ran and whether it saves on a signal (``model.checkpoint``)."""

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from gpupool.model.checkpoint import work_lost_s
from gpupool.scheduler.placement_json import placement_from_json
from gpupool.server.db.tables import AllocationNodeRow, AllocationRow, JobRow


def started_at(session: Session, allocation_ids: list[int]) -> dict[int, float]:
    """When each allocation's first workload started (absent: none has)."""
    first = func.min(AllocationNodeRow.started_at)
    rows = session.execute(
        select(AllocationNodeRow.allocation_id, first)
        .where(AllocationNodeRow.allocation_id.in_(allocation_ids))
        .group_by(AllocationNodeRow.allocation_id)
    )
    return {alloc_id: started for alloc_id, started in rows if started is not None}


def preemption_cost(job: JobRow, alloc: AllocationRow, started: float | None, now: float) -> float:
    """Card-seconds lost by stopping ``job``'s ``alloc`` now: nothing before it started
    (``started``: when its first workload did); what it ran since its last checkpoint its
    agent passed on (else since it started), at most the grace it saves in when it saves on
    a signal."""
    if started is None:
        return 0.0
    cards = placement_from_json(str(job.id), alloc.placement).card_percent / 100
    grace = int(job.checkpoint["grace_s"]) if job.checkpoint else None
    return work_lost_s(cards, started, alloc.checkpointed_at, now, grace)

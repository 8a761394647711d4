"""A cycle's parks and wakes written (issue 49): the replica's allocation keeps its id and
its process, with its new placement (its card lent, or back), the jobs it waits for
(``after``: those vacated from its card) and a new generation, so the agent learns to put the
engine to sleep or wake it; what it held until now is metered first (a placement changed
mid-interval is billed as it was, then as it is)."""

from sqlalchemy import update
from sqlalchemy.orm import Session

from gpupool.scheduler.parking import card_of
from gpupool.scheduler.placement_json import placement_from_json, placement_to_json
from gpupool.scheduler.reasons import Wait
from gpupool.scheduler.session import CycleResult
from gpupool.server.db.tables import AllocationRow, JobRow, ServiceReplicaRow, UsageRow
from gpupool.server.lifecycle import unmetered_rows
from gpupool.server.meter_clock import metered_from


def apply_regrants(
    session: Session,
    result: CycleResult,
    allocation_of: dict[str, int],
    generation: int,
    now: float,
) -> int:
    """Write ``result``'s parks and wakes; returns how many were written."""
    done = 0
    for g in result.regrants:
        alloc_id = allocation_of.get(g.job_id)
        alloc = session.get(AllocationRow, alloc_id) if alloc_id is not None else None
        row = session.get(ServiceReplicaRow, int(g.job_id))
        if alloc is None or alloc.state != "active" or row is None:
            continue
        for usage in unmetered_rows(session, alloc, now):
            session.add(UsageRow(**usage))
        alloc.metered_until = max(metered_from(alloc), now)
        before = alloc.placement
        alloc.placement = placement_to_json(g.placement)
        alloc.after = [allocation_of[v] for v in g.after if v in allocation_of]
        alloc.borrowed = g.borrowed
        alloc.generation = generation
        if g.wake:
            row.parked, row.card = False, None
        else:
            row.parked, row.park_at = True, None
            row.card = card_of(placement_from_json(g.job_id, before))
        done += 1
    for job_id, why in result.unwoken.items():
        session.execute(
            update(JobRow)
            .where(JobRow.id == int(job_id))
            .values(reason=f"waking: {why}"[:2000], wait_code=Wait.WAKING.value)
        )
    return done

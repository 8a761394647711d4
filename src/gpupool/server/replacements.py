"""Make-before-break moves of inference replicas (defragmentation). The cycle asks for a copy
of a running replica at a new place; the commit creates it — a new job with the replica's
tenant, user, request and command, admitted there, naming the replica in ``replaces`` — and
once the copy runs, the loop ends the replica (``cancelled``, with a reason naming its copy),
so the room it held goes to the job defragmentation serves. A copy that fails to start
leaves the replica running: nothing is broken before its replacement runs."""

from collections.abc import Collection

from sqlalchemy import select
from sqlalchemy.orm import Session, aliased

from gpupool.scheduler.session import Binding, Replacement
from gpupool.server.db.tables import AllocationRow, AuditRow, JobEventRow, JobRow
from gpupool.server.lifecycle import HOLDING, active_allocation, finish

ACTOR = "scheduler"
COPIED = (
    "tenant", "name", "request", "kind", "priority_class", "priority", "gang_size",
    "max_runtime_s", "on_preempt", "on_lost", "command", "image", "env", "submitted_by",
    "output", "error", "chdir", "submit_dir", "checkpoint", "policy",
)  # fmt: skip


def replacing(session: Session, copies: Collection[int]) -> frozenset[str]:
    """Replicas whose copy is admitted or running while they still hold their room.
    ``copies``: the jobs with a live allocation that replace another (the snapshot knows
    them), so a cycle reads a few rows by id, not every live job."""
    if not copies:
        return frozenset()
    old = aliased(JobRow)
    rows = session.execute(
        select(JobRow.replaces)
        .join(old, old.id == JobRow.replaces)
        .where(JobRow.id.in_(copies), JobRow.state.in_(HOLDING), old.state.in_(HOLDING))
    ).scalars()
    return frozenset(str(r) for r in rows)


def create_copies(
    session: Session, replacements: list[Replacement], allocation_of: dict[str, int], now: float
) -> list[tuple[JobRow, Binding]]:
    """A pending copy of each replica still running where the cycle saw it, with the binding
    that admits it (the caller admits them with the cycle's other bindings)."""
    out = []
    for r in replacements:
        old = session.get(JobRow, int(r.job_id), with_for_update=True)
        alloc = active_allocation(session, old.id) if old is not None else None
        if old is None or old.state != "running" or alloc is None:
            continue
        if alloc.id != allocation_of.get(r.job_id):
            continue
        copy = JobRow(
            **{c: getattr(old, c) for c in COPIED},
            state="pending",
            reason="",
            submit_time=now,
            queued_at=now,
            held=False,
            dependency=[],
            replaces=old.id,
        )
        session.add(copy)
        session.flush()
        why = f"copy of job {old.id} (defragmentation, make-before-break)"
        session.add(JobEventRow(job_id=copy.id, time=now, to_state="pending", reason=why,
                                actor=ACTOR))  # fmt: skip
        old.reason = r.reason[:2000]
        note = f"copy of job {old.id}; {r.reason}"
        out.append((copy, Binding(str(copy.id), r.placement, False, "defragment", (), note)))
    return out


def end_replaced(session: Session, now: float, copies: Collection[int]) -> list[int]:
    """End every replica whose copy (one of ``copies``, as for ``replacing``) runs now;
    returns their ids."""
    if not copies:
        return []
    old = aliased(JobRow)
    rows = session.execute(
        select(JobRow.id, JobRow.replaces)
        .join(old, old.id == JobRow.replaces)
        .where(JobRow.id.in_(copies), JobRow.state == "running", old.state.in_(HOLDING))
    ).all()
    ended: list[int] = []
    for copy_id, old_id in rows:
        replica = session.get(JobRow, old_id, with_for_update=True)
        if replica is None or replica.state not in HOLDING:
            continue
        alloc = session.execute(
            select(AllocationRow.placement).where(
                AllocationRow.job_id == copy_id, AllocationRow.state == "active"
            )
        ).scalar_one_or_none()
        where = "+".join(dict.fromkeys(n["node"] for n in alloc["nodes"])) if alloc else "?"
        reason = f"replaced by job {copy_id} on {where} (defragmentation, make-before-break)"
        finish(session, replica, "cancelled", now, reason, ACTOR)
        session.add(
            AuditRow(time=now, actor=ACTOR, role="", action="DEFRAGMENT replace",
                     target=f"job {old_id} -> job {copy_id} on {where}"[:500], result=200,
                     client="", detail="")
        )  # fmt: skip
        ended.append(replica.id)
    return ended

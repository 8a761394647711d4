"""Make-before-break moves of online work: defragmentation, and a reservation whose window
began (``scheduler/actions/reserve.py``). The cycle asks for a copy of a running job at a
new place; the commit creates it — a new job with the job's tenant, user, request and
command, admitted there, naming the job in ``replaces`` (a service's replica: a replica row
of its service too, so its agent looks at it and the reconciler tracks its health) — and
once the copy runs, the loop ends the job (``cancelled``, with a reason naming its copy), so
the room it held goes to the job defragmentation serves or to the reservation's owner. A
service's replica is ended only once its copy is *ready*: its clients have a ready replica
all along. A copy that fails to start leaves the job running: nothing is broken before its
replacement runs."""

from collections.abc import Collection

from sqlalchemy import select
from sqlalchemy.orm import Session, aliased

from gpupool.scheduler.reasons import Cause
from gpupool.scheduler.session import Binding, Replacement
from gpupool.server.db.tables import (
    AllocationRow,
    AuditRow,
    JobEventRow,
    JobRow,
    ServiceReplicaRow,
)
from gpupool.server.lifecycle import HOLDING, active_allocation, finish

ACTOR = "scheduler"
# the copy's allocation action (kept with it), and what each move is called
ACTION = {Cause.DEFRAGMENT: "defragment", Cause.RESERVATION: "reserve"}
WHY = {"defragment": "defragmentation", "reserve": "reservation"}
AUDITED = {"defragment": "DEFRAGMENT", "reserve": "RESERVATION"}
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
        action = ACTION.get(r.cause, "defragment")
        why = f"copy of job {old.id} ({WHY[action]}, make-before-break)"
        session.add(JobEventRow(job_id=copy.id, time=now, to_state="pending", reason=why,
                                actor=ACTOR))  # fmt: skip
        replica = session.get(ServiceReplicaRow, old.id)
        if replica is not None:  # a replica of its service from the start, not yet counted
            session.add(ServiceReplicaRow(job_id=copy.id, service_id=replica.service_id,
                                          port=None, ready=False, failures=0))  # fmt: skip
        old.reason = r.reason[:2000]
        note = f"copy of job {old.id}; {r.reason}"
        out.append((copy, Binding(str(copy.id), r.placement, False, action, (), note)))
    return out


def end_replaced(session: Session, now: float, copies: Collection[int]) -> list[int]:
    """End every job whose copy (one of ``copies``, as for ``replacing``) runs now — a
    service's replica once its copy is ready; returns their ids."""
    if not copies:
        return []
    old = aliased(JobRow)
    rows = session.execute(
        select(JobRow.id, JobRow.replaces, ServiceReplicaRow.ready)
        .join(old, old.id == JobRow.replaces)
        .outerjoin(ServiceReplicaRow, ServiceReplicaRow.job_id == JobRow.id)
        .where(JobRow.id.in_(copies), JobRow.state == "running", old.state.in_(HOLDING))
    ).all()
    ended: list[int] = []
    for copy_id, old_id, ready in rows:
        if ready is False:  # a service's replica: its clients need the copy ready first
            continue
        replica = session.get(JobRow, old_id, with_for_update=True)
        if replica is None or replica.state not in HOLDING:
            continue
        alloc = session.execute(
            select(AllocationRow.placement, AllocationRow.action).where(
                AllocationRow.job_id == copy_id, AllocationRow.state == "active"
            )
        ).first()
        where = "+".join(dict.fromkeys(n["node"] for n in alloc[0]["nodes"])) if alloc else "?"
        action = alloc[1] if alloc is not None and alloc[1] in WHY else "defragment"
        reason = f"replaced by job {copy_id} on {where} ({WHY[action]}, make-before-break)"
        finish(session, replica, "cancelled", now, reason, ACTOR)
        session.add(
            AuditRow(time=now, actor=ACTOR, role="", action=f"{AUDITED[action]} replace",
                     target=f"job {old_id} -> job {copy_id} on {where}"[:500], result=200,
                     client="", detail="")
        )  # fmt: skip
        ended.append(replica.id)
    return ended

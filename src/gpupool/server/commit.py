"""Commit one cycle's decisions in one transaction, fenced by the leader's epoch.

Each decision is re-checked against the row it changes: a job cancelled while the cycle ran
is not admitted, a victim that already ended is not preempted again. Skipping a decision only
leaves capacity unused until the next cycle; it can never double-allocate a device, because
only the leader writes allocations and the cycle saw every live one.
"""

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from sqlalchemy import bindparam, select, update
from sqlalchemy.orm import Session

from gpupool.scheduler.cycle import Binding, CycleResult
from gpupool.scheduler.placement_json import placement_to_json
from gpupool.scheduler.reasons import Cause
from gpupool.server.db.rows_changed import rows_changed
from gpupool.server.db.tables import AllocationNodeRow, AllocationRow, JobEventRow, JobRow, Meta
from gpupool.server.lifecycle import move, release
from gpupool.server.regrants import apply_regrants
from gpupool.server.replacements import create_copies
from gpupool.server.work_lost import preemption_cost, started_at

ACTOR = "scheduler"


class LostLeadership(Exception):
    """Another process took the scheduler lead; this cycle's decisions were not written."""


@dataclass
class CommitSummary:
    admitted: list[tuple[int, float]] = field(default_factory=list)  # (job id, waited s)
    preempted: int = 0
    lost_gpu_s: dict[str, float] = field(default_factory=dict)  # by tenant: preemptions' cost
    skipped: int = 0
    generation: int = 0


def commit_cycle(
    session: Session,
    result: CycleResult,
    epoch: int,
    allocation_of: dict[str, int],
    old_reasons: dict[str, tuple[str, str]],
    now: float,
) -> CommitSummary:
    """``old_reasons``: pending job id -> (words, wait code) stored now."""
    changed = [
        (int(jid), str(reason), reason.code.value)
        for jid, reason in result.pending.items()
        if (old := old_reasons.get(jid)) is not None and old != (str(reason), reason.code.value)
    ]
    if not (
        result.bindings
        or result.preemptions
        or result.replacements
        or result.regrants
        or result.unwoken
        or changed
    ):
        return CommitSummary()
    fenced = rows_changed(
        session,
        update(Meta)
        .where(Meta.id == 1, Meta.leader_epoch == epoch)
        .values(generation=Meta.generation + 1),
    )
    if fenced != 1:
        raise LostLeadership(f"epoch {epoch} is no longer the leader's")
    generation = session.execute(select(Meta.generation).where(Meta.id == 1)).scalar_one()
    out = CommitSummary(generation=generation)
    ids = sorted(
        {int(p.job_id) for p in result.preemptions} | {int(b.job_id) for b in result.bindings}
    )
    # lock every job this cycle changes, in id order; read only what admission needs (Core:
    # ORM objects for hundreds of admitted jobs cost more than the rest of the commit)
    t = JobRow.__table__.c
    jobs: dict[int, Any] = {  # Core rows, then SimpleNamespaces for jobs made pending here
        row.id: row
        for row in session.connection().execute(
            select(t.id, t.state, t.tenant, t.queued_at)
            .where(t.id.in_(ids))
            .order_by(t.id)
            .with_for_update()
        )
    }
    victims, allocs = _victims(session, result, jobs)
    started = started_at(session, [a.id for a in allocs.values()]) if allocs else {}
    for p in result.preemptions:
        job = victims.get(int(p.job_id))
        alloc = allocs.get(int(p.job_id)) if job else None
        if job is None or alloc is None or alloc.id != allocation_of.get(p.job_id):
            out.skipped += 1
            continue
        if p.cause is Cause.RESERVATION:
            reason = f"stopped for {p.by}: {p.reason}"
        else:
            reason = f"preempted by job {p.by}: {p.reason}"
        lost = preemption_cost(job, alloc, started.get(alloc.id), now)
        job.lost_gpu_s = (job.lost_gpu_s or 0.0) + lost
        out.lost_gpu_s[job.tenant] = out.lost_gpu_s.get(job.tenant, 0.0) + lost
        move(session, job, "preempted", now, reason, ACTOR)
        release(session, alloc, now, reason)
        if p.action == "kill":
            move(session, job, "failed", now, f"{reason} (on_preempt=kill)", ACTOR)
        else:
            move(session, job, "pending", now, f"{reason}; requeued", ACTOR)
            # a job defragmentation moves is bound again in this cycle, where it restarts
            jobs[job.id] = SimpleNamespace(id=job.id, state="pending", tenant=job.tenant,
                                           queued_at=now)  # fmt: skip
        out.preempted += 1
    apply_regrants(session, result, allocation_of, generation, now)
    admit = [
        b for b in result.bindings if (job := jobs.get(int(b.job_id))) and job.state == "pending"
    ]
    out.skipped += len(result.bindings) - len(admit)
    for copy, binding in create_copies(session, result.replacements, allocation_of, now):
        jobs[copy.id] = SimpleNamespace(id=copy.id, state="pending", tenant=copy.tenant,
                                        queued_at=now)  # fmt: skip
        admit.append(binding)
    if admit:
        _admit(session, admit, jobs, allocation_of, generation, now, out)
    if changed:  # one statement for all (one each was most of a cold cycle's commit)
        t = JobRow.__table__.c
        session.execute(
            update(JobRow.__table__)
            .where(t.id == bindparam("job"), t.state == "pending")
            .values(reason=bindparam("why"), wait_code=bindparam("code")),
            [{"job": jid, "why": reason[:2000], "code": code} for jid, reason, code in changed],
        )
    return out


def _victims(
    session: Session, result: CycleResult, locked: dict[int, Any]
) -> tuple[dict[int, JobRow], dict[int, AllocationRow]]:
    """The preempted jobs (locked above) and their active allocations, each read once: one
    ``get`` and one query per victim, with an autoflush before each, cost seconds a cycle
    with a few hundred victims."""
    ids = sorted({int(p.job_id) for p in result.preemptions} & locked.keys())
    if not ids:
        return {}, {}
    with session.no_autoflush:
        jobs = {j.id: j for j in session.scalars(select(JobRow).where(JobRow.id.in_(ids)))}
        held = select(AllocationRow).where(
            AllocationRow.job_id.in_(ids), AllocationRow.state == "active"
        )
        held = held.order_by(AllocationRow.id).with_for_update()
        allocs = {a.job_id: a for a in session.scalars(held)}
    return jobs, allocs


def _admit(
    session: Session,
    bindings: list[Binding],
    jobs: dict[int, Any],
    allocation_of: dict[str, int],
    generation: int,
    now: float,
    out: CommitSummary,
) -> None:
    """Admit many jobs with a few bulk statements (one ORM flush per job was most of a
    cycle's cost)."""
    rows = [
        {
            "job_id": int(b.job_id),
            "tenant": jobs[int(b.job_id)].tenant,
            "generation": generation,
            "state": "active",
            "placement": placement_to_json(b.placement),
            "borrowed": b.borrowed,
            "action": b.action,
            "after": [allocation_of[v] for v in b.after if v in allocation_of],
            "created_at": now,
            "released_at": None,
            "release_reason": "",
        }
        for b in bindings
    ]
    table = AllocationRow.__table__
    ids = session.scalars(
        table.insert().returning(table.c.id, sort_by_parameter_order=True), rows
    ).all()
    session.execute(
        AllocationNodeRow.__table__.insert(),
        [
            {"allocation_id": alloc_id, "node": name}
            for alloc_id, b in zip(ids, bindings, strict=True)
            for name in dict.fromkeys(b.placement.node_names)
        ],
    )
    events, updates = [], []
    for b in bindings:
        job = jobs[int(b.job_id)]
        how = "borrowing idle capacity" if b.borrowed else "within guarantee"
        reason = f"{b.action}: {how}" + (f"; {b.note}" if b.note else "")
        events.append(
            {
                "job_id": job.id,
                "time": now,
                "from_state": "pending",
                "to_state": "admitted",
                "reason": reason,
                "actor": ACTOR,
            }
        )
        updates.append({"job": job.id, "to": "admitted", "why": reason})
        out.admitted.append((job.id, now - job.queued_at))
    session.execute(JobEventRow.__table__.insert(), events)
    t = JobRow.__table__.c
    session.execute(
        update(JobRow.__table__)
        .where(t.id == bindparam("job"))
        .values(state=bindparam("to"), reason=bindparam("why"), wait_code=""),
        updates,
    )

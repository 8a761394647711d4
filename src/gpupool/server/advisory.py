"""Advisory mode ("先手动跑通，再逐步自动化"): per action, the scheduler proposes instead of
acting. A cycle's decision for a job — its binding and the preemptions it needs — whose action
is advisory is held back and becomes a proposal with its reason and expected gain; an admin
approves or rejects it (API, CLI); an approval lets the job's next decision of that action go
ahead, with the same victims or fewer; a proposal nobody decides expires. Every decision is
kept with who made it (and the API's audit log records the call).

Actions: ``bind`` (allocate, borrow, backfill), ``preempt`` (priority), ``reclaim`` (a tenant
takes back lent cards), ``defragment`` (moves to make room)."""

from dataclasses import dataclass

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from gpupool.scheduler.session import Binding, CycleResult
from gpupool.server.db.tables import AdvisoryRow, JobRow, ProposalRow

ACTIONS = ("bind", "preempt", "reclaim", "defragment")
KIND = {"allocate": "bind", "borrow": "bind", "backfill": "bind", "preempt": "preempt",
        "reclaim": "reclaim", "defragment": "defragment"}  # fmt: skip


def advisory_actions(s: Session) -> set[str]:
    return set(s.execute(select(AdvisoryRow.action)).scalars())


def set_advisory(s: Session, wanted: dict[str, bool], who: str, now: float) -> set[str]:
    """Switch actions to proposing (True) or acting (False); the set now advisory."""
    for action, on in wanted.items():
        row = s.get(AdvisoryRow, action)
        if on and row is None:
            s.add(AdvisoryRow(action=action, changed_by=who, changed_at=now))
        elif not on and row is not None:
            s.delete(row)
    s.flush()
    return advisory_actions(s)


def decide(s: Session, proposal: ProposalRow, approve: bool, who: str, now: float, ttl_s: float):
    """An admin's decision on a pending proposal; a rejection holds the job back for
    ``ttl_s`` (then it may be proposed again)."""
    proposal.state = "approved" if approve else "rejected"
    proposal.decided_by, proposal.decided_at = who, now
    proposal.expires_at = now + ttl_s  # approved: used by then; rejected: holds until then


def expire(s: Session, now: float) -> int:
    """Pending or approved-but-unused proposals past their time: expired (the job may be
    proposed again). A rejected one keeps its state; past its time it stops holding the job."""
    done = s.execute(
        update(ProposalRow)
        .where(ProposalRow.state.in_(("pending", "approved")), ProposalRow.expires_at <= now)
        .values(state="expired", decided_at=now)
    )
    return done.rowcount or 0


@dataclass(frozen=True)
class Held:
    """What advisory mode kept out of a cycle's commit."""

    proposed: list[int]  # proposals made this cycle
    waiting: dict[str, str]  # job id -> its pending reason


def _gain(b: Binding, waited_s: float | None) -> str:
    cards = sum(len(n.devices) for n in b.placement.nodes)
    parts = [
        f"{cards} card{'s' if cards != 1 else ''} to work on {', '.join(b.placement.node_names)}"
    ]
    if waited_s is not None:
        parts.append(f"the job has waited {waited_s / 60:.0f} min")
    if b.after:
        parts.append(f"stops {len(b.after)} job{'s' if len(b.after) != 1 else ''} first")
    return "; ".join(parts)


def hold_back(s: Session, result: CycleResult, now: float, ttl_s: float) -> Held:
    """Take advisory decisions out of ``result`` (in place), turning each into a proposal
    unless an approved one covers it (then it goes ahead and the proposal is done)."""
    advisory = advisory_actions(s)
    if not advisory:
        return Held([], {})
    expire(s, now)
    victims_of: dict[str, set[str]] = {}
    held_jobs: set[str] = set()
    proposed: list[int] = []
    waiting: dict[str, str] = {}
    for b in list(result.bindings):
        kind = KIND.get(b.action, "bind")
        if kind not in advisory or b.job_id in held_jobs:
            continue
        open_ = (
            s.execute(
                select(ProposalRow)
                .where(ProposalRow.job_id == int(b.job_id), ProposalRow.action == kind)
                .where(ProposalRow.state.in_(("pending", "approved", "rejected")))
                .order_by(ProposalRow.id.desc())
            )
            .scalars()
            .first()
        )
        if open_ is not None and open_.state == "rejected":
            if open_.expires_at > now:  # a rejection holds until its time is up
                held_jobs.add(b.job_id)
                victims_of[b.job_id] = set(b.after)
                waiting[b.job_id] = (
                    f"proposal {open_.id} ({kind}) rejected by {open_.decided_by}; "
                    "proposed again after it expires"
                )
                continue
            open_ = None
        if open_ is not None and open_.state == "approved":
            if set(b.after) <= set(open_.detail.get("victims", [])):
                open_.state, open_.done_at = "done", now
                continue  # approved: it goes ahead
            open_.state = "expired"  # the victims changed: ask again
            open_ = None
        held_jobs.add(b.job_id)
        victims_of[b.job_id] = set(b.after)
        if open_ is None:
            job = s.get(JobRow, int(b.job_id))
            waited = now - job.queued_at if job is not None and job.queued_at else None
            row = ProposalRow(
                job_id=int(b.job_id),
                tenant=job.tenant if job is not None else "",
                action=kind,
                state="pending",
                reason=f"{b.action}{': ' + b.note if b.note else ''}",
                gain=_gain(b, waited),
                detail={
                    "nodes": {n.node: [d.device for d in n.devices] for n in b.placement.nodes},
                    "victims": sorted(b.after),
                },
                created_at=now,
                expires_at=now + ttl_s,
            )
            s.add(row)
            s.flush()
            open_ = row
            proposed.append(row.id)
        waiting[b.job_id] = f"waiting for approval: proposal {open_.id} ({kind})"
    if held_jobs:
        held_victims = set().union(*victims_of.values())
        result.bindings = [
            b for b in result.bindings if b.job_id not in held_jobs and b.job_id not in held_victims
        ]
        result.preemptions = [p for p in result.preemptions if p.job_id not in held_victims]
        result.pending.update(waiting)
    return Held(proposed, waiting)

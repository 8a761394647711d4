"""Advisory mode ("先手动跑通，再逐步自动化"): per action, the scheduler proposes instead of
acting. A cycle's decision for a job — its binding and the preemptions it needs — whose action
is advisory is held back and becomes a proposal with its reason and expected gain; an admin
approves or rejects it (API, CLI); an approval lets the job's next decision of that action go
ahead, with the same victims or fewer; a proposal nobody decides expires. Every decision is
kept with who made it (and the API's audit log records the call).

Actions: ``bind`` (allocate, borrow, backfill), ``preempt`` (priority), ``reclaim`` (a tenant
takes back lent cards), ``defragment`` (moves to make room), ``mode-switch`` (a card in or
out of MIG for a hybrid or share pool), ``scale-in`` (a service's replicas). A proposal is
about a subject (``job 12``, ``n1 device 0 -> mig``, ``service chat: 3 -> 2 replicas``)."""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from gpupool.scheduler.advice import decisions, withhold
from gpupool.scheduler.session import Binding, CycleResult
from gpupool.server.db.rows_changed import rows_changed
from gpupool.server.db.tables import AdvisoryRow, JobRow, ProposalRow


def advisory_actions(s: Session) -> set[str]:
    return set(s.execute(select(AdvisoryRow.action)).scalars())


def set_advisory(s: Session, wanted: Mapping[str, bool], who: str, now: float) -> set[str]:
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
    done = rows_changed(
        s,
        update(ProposalRow)
        .where(ProposalRow.state.in_(("pending", "approved")), ProposalRow.expires_at <= now)
        .values(state="expired"),  # an approval keeps who decided it, and when
    )
    return done


@dataclass(frozen=True)
class Proposed:
    """What an advisory action would do: the proposal's fields."""

    reason: str
    gain: str
    detail: dict[str, Any]
    job_id: int | None = None
    tenant: str = ""


def _covers(b: Binding, detail: dict[str, Any]) -> bool:
    """An approval covers a binding when it named every job the binding waits for."""
    return set(b.after) <= set(detail.get("victims", []))


def gate(
    s: Session,
    advisory: set[str],
    action: str,
    subject: str,
    now: float,
    ttl_s: float,
    what: Callable[[], Proposed],
    covers: Callable[[dict[str, Any]], bool] = lambda detail: True,
) -> str | None:
    """May the ``action`` on ``subject`` go ahead now? None when it may (not in ``advisory``,
    the actions now advisory, or an approval covers it — then that proposal is done); else
    why it waits, after making a proposal (``what``) unless one is pending or a rejection
    still holds."""
    if action not in advisory:
        return None
    latest = (
        s.execute(
            select(ProposalRow)
            .where(ProposalRow.action == action, ProposalRow.subject == subject)
            .where(ProposalRow.state.in_(("pending", "approved", "rejected")))
            .order_by(ProposalRow.id.desc())
        )
        .scalars()
        .first()
    )
    if latest is not None and latest.state == "rejected":
        if latest.expires_at > now:  # a rejection holds until its time is up
            return (
                f"proposal {latest.id} ({action}) rejected by {latest.decided_by}; "
                "proposed again after it expires"
            )
        latest = None
    if latest is not None and latest.state == "approved":
        if covers(latest.detail):
            latest.state, latest.done_at = "done", now
            return None
        latest.state = "expired"  # what it would do changed: ask again
        latest = None
    if latest is None:
        p = what()
        latest = ProposalRow(
            job_id=p.job_id, tenant=p.tenant, subject=subject[:200], action=action,
            state="pending", reason=p.reason[:2000], gain=p.gain[:2000], detail=p.detail,
            created_at=now, expires_at=now + ttl_s,
        )  # fmt: skip
        s.add(latest)
        s.flush()
    return f"waiting for approval: proposal {latest.id} ({action})"


def mode_switches(s: Session, now: float, ttl_s: float) -> Callable[[str, int, str, str], bool]:
    """Whether a card's mode switch may be ordered now (``mode-switch`` advisory):
    ``allow(node, index, to_mode, why)``."""
    advisory = advisory_actions(s)

    def allow(node: str, index: int, to: str, why: str) -> bool:
        what = Proposed(
            reason=why,
            gain=f"{node} device {index} serves {to} requests once it switched",
            detail={"node": node, "device": index, "to": to},
        )
        subject = f"{node} device {index} -> {to}"
        return gate(s, advisory, "mode-switch", subject, now, ttl_s, lambda: what) is None

    return allow


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


def _decision(s: Session, b: Binding, now: float) -> Proposed:
    job = s.get(JobRow, int(b.job_id))
    waited = now - job.queued_at if job is not None and job.queued_at else None
    return Proposed(
        reason=f"{b.action}{': ' + b.note if b.note else ''}",
        gain=_gain(b, waited),
        detail={
            "nodes": {n.node: [d.device for d in n.devices] for n in b.placement.nodes},
            "victims": sorted(b.after),
        },
        job_id=int(b.job_id),
        tenant=job.tenant if job is not None else "",
    )


def hold_back(s: Session, result: CycleResult, now: float, ttl_s: float) -> dict[str, str]:
    """Take advisory decisions out of ``result`` (in place): a job's binding and the
    preemptions it needs go ahead only when an approval covers them (the same victims or
    fewer). Returns the held jobs' pending reasons."""
    advisory = advisory_actions(s)
    if not advisory:
        return {}
    expire(s, now)
    waiting: dict[str, str] = {}
    for b, kind in decisions(result):
        if b.job_id in waiting:
            continue
        why = gate(
            s, advisory, kind, f"job {b.job_id}", now, ttl_s,
            partial(_decision, s, b, now),
            partial(_covers, b),
        )  # fmt: skip
        if why is not None:
            waiting[b.job_id] = why
    withhold(result, waiting)
    return waiting

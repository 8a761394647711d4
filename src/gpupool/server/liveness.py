"""Lost nodes (DESIGN.md invariant 4): a node whose agent has not heartbeated for
``heartbeat_timeout_s`` is marked ``lost``; the jobs it held are requeued or failed by their
``on_lost`` policy, and its allocations released. A node that comes back is ``fenced`` (no new
work) until its agent has reconciled: stopped everything the server no longer wants there."""

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from gpupool.server.commit import LostLeadership
from gpupool.server.db.tables import AllocationRow, JobRow, Meta, NodeRow
from gpupool.server.lifecycle import bump_nodes_version, live_on, move, release

ACTOR = "scheduler"


def _silent(now: float, timeout_s: float):
    # a Kubernetes node's liveness is its Ready condition, mirrored by gpupool's scheduler
    return select(NodeRow).where(
        NodeRow.state != "lost",
        NodeRow.heartbeat_at < now - timeout_s,
        NodeRow.source == "agent",
    )


def any_silent(session: Session, now: float, timeout_s: float) -> bool:
    return session.execute(_silent(now, timeout_s).limit(1)).first() is not None


def mass_silence(silent: int, nodes: int, fraction: float) -> bool:
    """Kubernetes' zone rule: when at least ``fraction`` of the nodes (three or more) went
    silent together, the network or the control plane failed, not the nodes — requeueing
    every job of the pool would only start it all again elsewhere, or nowhere."""
    return nodes >= 3 and silent >= 2 and silent >= fraction * nodes


def mark_lost_nodes(
    session: Session,
    now: float,
    timeout_s: float,
    epoch: int,
    stops_within_s: float = 0.0,
    mass_fraction: float = 1.1,
) -> list[str]:
    """Mark silent nodes lost and requeue or fail their jobs; returns the nodes marked (none
    in a mass silence, ``mass_fraction``). ``stops_within_s``: how long after its last
    heartbeat a node's workloads have stopped themselves (lease + kill time); their usage is
    metered to then, not to now."""
    leader = session.execute(select(Meta.leader_epoch).where(Meta.id == 1)).scalar_one()
    if leader != epoch:
        raise LostLeadership(f"epoch {epoch} is no longer the leader's")
    silent = list(
        session.execute(_silent(now, timeout_s).order_by(NodeRow.name).with_for_update()).scalars()
    )
    agents = session.execute(
        select(func.count()).where(NodeRow.source == "agent", NodeRow.state != "lost")
    ).scalar_one()
    if mass_silence(len(silent), agents, mass_fraction):
        return []
    for node in silent:
        node.state = "lost"
        reason = f"node {node.name} lost: no heartbeat for {now - node.heartbeat_at:.0f} s"
        allocations = session.execute(
            live_on(select(AllocationRow), node.name).order_by(AllocationRow.id).with_for_update()
        ).scalars()
        for alloc in list(allocations):
            job = session.get(JobRow, alloc.job_id, with_for_update=True)
            assert job is not None
            move(session, job, "lost", now, reason, ACTOR)
            stopped = node.heartbeat_at + stops_within_s if stops_within_s else None
            if job.on_lost == "keep-running":  # it may still run: meter until now
                stopped = None
            release(session, alloc, now, reason, stopped, node.name)
            after_lost(session, job, now, reason, ACTOR)
    if silent:
        bump_nodes_version(session)
    return [n.name for n in silent]


def after_lost(session: Session, job: JobRow, now: float, reason: str, actor: str) -> None:
    """A lost job goes back to the queue, or fails when it asked to (``on_lost: fail``)."""
    if job.on_lost == "fail":
        move(session, job, "failed", now, f"{reason} (on_lost=fail)", actor)
    else:
        move(session, job, "pending", now, f"{reason}; requeued", actor)


def heard_from(session: Session, node: NodeRow, now: float) -> bool:
    """Record a sign of life; a lost node becomes fenced. True if its state changed."""
    node.heartbeat_at = now
    if node.state == "lost":
        node.state = "fenced"
        return True
    return False


def reconcile(session: Session, node: NodeRow, running: set[int]) -> list[int]:
    """The allocations among ``running`` the agent must stop (released, or not this node's).
    When there are none, a fenced node is ready again."""
    live = set(session.execute(live_on(select(AllocationRow.id), node.name)).scalars())
    stop = sorted(running - live)
    if not stop and node.state == "fenced":
        node.state = "ready"
        bump_nodes_version(session)
    return stop

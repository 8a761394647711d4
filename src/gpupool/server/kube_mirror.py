"""The server as the state of record for a Kubernetes cluster gpupool schedules.

gpupool's Kubernetes-mode scheduler mirrors here its cluster's GPU nodes (``source =
kubernetes``: shown and metered like any node, never given work by the server's own scheduler,
whose liveness check skips them — their liveness is the Node's Ready condition) and the pods it
bound: each pod is a job of its namespace's tenant, running from its binding with an
allocation holding its grant, ended (and so metered into usage records, the invoices' source)
when the pod finishes, is deleted or is preempted. Every write is idempotent: a pod is known
by its UID (the job's idempotency key), so the scheduler may send the same report again.
"""

from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpupool.server.db.tables import (
    AllocationNodeRow,
    AllocationRow,
    JobEventRow,
    JobRow,
    Meta,
    NodeRow,
    TenantRow,
)
from gpupool.server.errors import ApiError
from gpupool.server.lifecycle import HOLDING, bump_nodes_version, finish, held_devices, move
from gpupool.server.node_registry import register_node
from gpupool.server.schemas import NodeIn

KUBERNETES_ACTION = "kubernetes"  # the allocations of mirrored pods
# who submitted a mirrored pod's job: no user name has a colon, so no user's job is taken
# for a pod, nor a pod's for a user's
ACTOR = "kubernetes:mirror"
KEY_PREFIX = "k8s:"


def mirror_nodes(s: Session, nodes: Iterable[tuple[NodeIn, str]], now: float) -> int:
    """Upsert the cluster's nodes (each with why it takes no new pods, "" when it does);
    Kubernetes nodes no longer listed go, or stay closed while a mirrored pod holds them."""
    seen: set[str] = set()
    for body, closed in nodes:
        existing = s.get(NodeRow, body.name)
        if existing is not None and existing.source != "kubernetes":
            raise ApiError(409, f"node {body.name}: an agent's node, not a Kubernetes one", "name")
        node = register_node(s, body, now)
        node.source = "kubernetes"
        node.heartbeat_at = now
        if (node.schedulable, node.drain_reason) != (not closed, closed):
            node.schedulable, node.drain_reason = not closed, closed
            bump_nodes_version(s)
        seen.add(body.name)
    held = {n for n, _ in held_devices(s)}
    for node in s.execute(select(NodeRow).where(NodeRow.source == "kubernetes")).scalars():
        if node.name in seen:
            continue
        if node.name in held:
            node.schedulable, node.drain_reason = False, "gone from the Kubernetes cluster"
        else:
            s.delete(node)
        bump_nodes_version(s)
    return len(seen)


def _job_by_uid(s: Session, uid: str) -> JobRow | None:
    return s.execute(
        select(JobRow).where(
            JobRow.idempotency_key == KEY_PREFIX + uid, JobRow.submitted_by == ACTOR
        )
    ).scalar_one_or_none()


def mirror_bound(s: Session, pod: dict, now: float) -> bool:
    """Record a pod gpupool bound as a running job holding its grant; False if known."""
    if _job_by_uid(s, pod["uid"]) is not None:
        return False
    if s.get(TenantRow, pod["tenant"]) is None:
        raise ApiError(422, f"pod {pod['pod']}: unknown tenant {pod['tenant']!r}", "tenant")
    grant = pod["placement"]
    node = s.get(NodeRow, grant["node"])
    if node is None or node.source != "kubernetes":
        raise ApiError(
            422, f"pod {pod['pod']}: {grant['node']!r} is not a mirrored Kubernetes node", "node"
        )
    bound_at = min(pod["bound_at"], now)
    job = JobRow(
        tenant=pod["tenant"],
        name=pod["pod"],
        request=pod["request"],
        kind=pod["kind"],
        priority_class=pod["priority_class"],
        priority=0,
        gang_size=1,
        on_preempt="kill",
        on_lost="fail",
        command=[],
        env={},
        idempotency_key=KEY_PREFIX + pod["uid"],
        submitted_by=ACTOR,
        state="running",
        reason=f"bound to {grant['node']} by gpupool in Kubernetes",
        submit_time=min(pod["submitted_at"], bound_at),
        queued_at=min(pod["submitted_at"], bound_at),
        started_at=bound_at,
    )
    s.add(job)
    s.flush()
    s.add(JobEventRow(job_id=job.id, time=bound_at, from_state=None, to_state="running",
                      reason=job.reason, actor=ACTOR))  # fmt: skip
    generation = s.execute(select(Meta.generation).where(Meta.id == 1)).scalar_one()
    alloc = AllocationRow(
        job_id=job.id,
        tenant=job.tenant,
        generation=generation,
        state="active",
        placement={"policy": pod.get("policy", ""), "nodes": [grant]},
        borrowed=False,
        action=KUBERNETES_ACTION,
        after=[],
        created_at=bound_at,
        started_at=bound_at,  # a bound pod runs from its binding: metered from then
    )
    s.add(alloc)
    s.flush()
    s.add(AllocationNodeRow(allocation_id=alloc.id, node=grant["node"], started_at=bound_at))
    return True


def mirror_ended(s: Session, ended: dict, now: float) -> bool:
    """End a mirrored pod's job, metering its allocation up to the pod's end."""
    job = _job_by_uid(s, ended["uid"])
    if job is None or job.state not in HOLDING:
        return False
    at = min(ended["at"], now)
    state, reason = ended["state"], ended.get("reason") or "the pod ended"
    if state == "preempted":
        finish(s, job, "preempted", now, reason, ACTOR, metered_to=at)
        move(s, job, "cancelled", now, "a preempted pod is not restarted by gpupool", ACTOR)
    else:
        finish(s, job, state, now, reason, ACTOR, metered_to=at)
    return True


def live_uids(s: Session) -> list[str]:
    """The pods the server holds as running, by UID."""
    keys = s.execute(
        select(JobRow.idempotency_key).where(
            JobRow.submitted_by == ACTOR, JobRow.state.in_(HOLDING)
        )
    ).scalars()
    return [k.removeprefix(KEY_PREFIX) for k in keys if k]

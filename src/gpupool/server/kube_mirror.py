"""The server as the state of record for a Kubernetes cluster gpupool schedules.

gpupool's Kubernetes-mode scheduler mirrors here its cluster's GPU nodes (``source =
kubernetes``: shown and metered like any node, never given work by the server's own scheduler,
whose liveness check skips them — their liveness is the Node's Ready condition) and the pods it
bound: each pod is a job of its namespace's tenant, running from its binding with an
allocation holding its grant, ended (and so metered into usage records, the invoices' source)
when the pod finishes, is deleted or is preempted. Every write is idempotent: a pod is known
by its UID (the job's idempotency key), so the scheduler may send the same report again.

Several clusters may report to one server, each under its name (``cluster`` in its settings;
"" for a server with one unnamed cluster): its nodes carry the label ``gpupool.io/cluster``,
its pods' jobs the name in their key, and a report touches only that cluster's nodes and pods
— one cluster's node report does not remove another's nodes, nor a restarted reporter end
another cluster's pods. A node name two clusters share is refused (409) naming whose it is.
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
from gpupool.server.errors import ApiError, forbidden
from gpupool.server.lifecycle import HOLDING, bump_nodes_version, finish, held_devices, move
from gpupool.server.node_registry import register_node
from gpupool.server.schemas import NodeIn

KUBERNETES_ACTION = "kubernetes"  # the allocations of mirrored pods
# who submitted a mirrored pod's job: no user name has a colon, so no user's job is taken
# for a pod, nor a pod's for a user's
ACTOR = "kubernetes:mirror"
KEY_PREFIX = "k8s:"
CLUSTER_LABEL = "gpupool.io/cluster"
# who reports the cluster without a name (the first token to report it): no other token may
# replace or end its nodes and pods (review finding F4)
REPORTER_LABEL = "gpupool.io/reported-by"


def cluster_of(node: NodeRow) -> str:
    return str((node.labels or {}).get(CLUSTER_LABEL, ""))


def _key(cluster: str, uid: str) -> str:
    """A mirrored pod's job key: its cluster's name and UID (UIDs have no colon)."""
    return f"{KEY_PREFIX}{cluster}:{uid}" if cluster else KEY_PREFIX + uid


def _whose(cluster: str) -> str:
    return f"cluster {cluster!r}" if cluster else "the cluster reporting without a name"


def unnamed_reporter(s: Session, user: str | None) -> None:
    """The cluster reporting without a name is the first token's to report it: another
    (non-admin; ``user`` None) token's report as it is refused (403), so a second cluster
    that forgets its name cannot replace or end the first one's nodes and pods."""
    if user is None:
        return
    rows = s.execute(select(NodeRow.labels).where(NodeRow.source == "kubernetes")).scalars()
    owners = {
        str(labels.get(REPORTER_LABEL))
        for labels in rows
        if labels and not labels.get(CLUSTER_LABEL) and labels.get(REPORTER_LABEL)
    }
    if owners and user not in owners:
        raise forbidden(
            f"{user} reports as the cluster without a name, which {sorted(owners)[0]}'s "
            "token reports: give this cluster its own name (settings 'cluster') and a token of "
            "that name"
        )


def mirror_nodes(
    s: Session,
    nodes: Iterable[tuple[NodeIn, str]],
    now: float,
    cluster: str = "",
    reporter: str | None = None,
) -> tuple[int, list[str]]:
    """Upsert the cluster's nodes (each with why it takes no new pods, "" when it does);
    that cluster's Kubernetes nodes no longer listed go, or stay closed while a mirrored pod
    holds them. Other clusters' nodes are not touched: a node another cluster mirrors is
    left out of this report, saying why, and the rest is taken. ``reporter``: the user who
    reports the unnamed cluster (recorded on its nodes). Returns (nodes taken, refusals)."""
    seen: set[str] = set()
    refused: list[str] = []
    for body, closed in nodes:
        existing = s.get(NodeRow, body.name)
        if existing is not None and existing.source != "kubernetes":
            raise ApiError(409, f"node {body.name}: an agent's node, not a Kubernetes one", "name")
        if existing is not None and cluster_of(existing) != cluster:
            refused.append(
                f"node {body.name}: mirrored from {_whose(cluster_of(existing))}, not from "
                f"{_whose(cluster)} (two clusters reporting to one server need distinct node "
                "names)"
            )
            continue
        labels = {k: v for k, v in body.labels.items() if k not in (CLUSTER_LABEL, REPORTER_LABEL)}
        if cluster:
            labels[CLUSTER_LABEL] = cluster
        elif reporter or (existing is not None and REPORTER_LABEL in (existing.labels or {})):
            # an admin's report (no reporter) keeps who reports it
            labels[REPORTER_LABEL] = reporter or existing.labels[REPORTER_LABEL]  # type: ignore[union-attr]
        body = body.model_copy(update={"labels": labels})
        node = register_node(s, body, now)
        node.source = "kubernetes"
        node.heartbeat_at = now
        if (node.schedulable, node.drain_reason) != (not closed, closed):
            node.schedulable, node.drain_reason = not closed, closed
            bump_nodes_version(s)
        seen.add(body.name)
    held = {n for n, _ in held_devices(s)}
    for node in s.execute(select(NodeRow).where(NodeRow.source == "kubernetes")).scalars():
        if node.name in seen or cluster_of(node) != cluster:
            continue
        if node.name in held:
            node.schedulable, node.drain_reason = False, "gone from the Kubernetes cluster"
        else:
            s.delete(node)
        bump_nodes_version(s)
    return len(seen), refused


def _job_by_uid(s: Session, uid: str, cluster: str) -> JobRow | None:
    return s.execute(
        select(JobRow).where(
            JobRow.idempotency_key == _key(cluster, uid), JobRow.submitted_by == ACTOR
        )
    ).scalar_one_or_none()


def mirror_bound(s: Session, pod: dict, now: float, cluster: str = "") -> bool:
    """Record a pod gpupool bound as a running job holding its grant; False if known."""
    if _job_by_uid(s, pod["uid"], cluster) is not None:
        return False
    if s.get(TenantRow, pod["tenant"]) is None:
        raise ApiError(422, f"pod {pod['pod']}: unknown tenant {pod['tenant']!r}", "tenant")
    grant = pod["placement"]
    node = s.get(NodeRow, grant["node"])
    if node is None or node.source != "kubernetes" or cluster_of(node) != cluster:
        raise ApiError(
            422,
            f"pod {pod['pod']}: {grant['node']!r} is not a Kubernetes node mirrored from "
            f"{_whose(cluster)}",
            "node",
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
        idempotency_key=_key(cluster, pod["uid"]),
        submitted_by=ACTOR,
        state="running",
        reason=f"bound to {grant['node']} by gpupool in Kubernetes"
        + (f" cluster {cluster}" if cluster else ""),
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


def mirror_ended(s: Session, ended: dict, now: float, cluster: str = "") -> bool:
    """End a mirrored pod's job, metering its allocation up to the pod's end."""
    job = _job_by_uid(s, ended["uid"], cluster)
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


def live_uids(s: Session, cluster: str = "") -> list[str]:
    """The pods of that cluster the server holds as running, by UID."""
    keys = s.execute(
        select(JobRow.idempotency_key).where(
            JobRow.submitted_by == ACTOR, JobRow.state.in_(HOLDING)
        )
    ).scalars()
    prefix = _key(cluster, "")
    return [
        uid
        for k in keys
        if k and k.startswith(prefix) and ":" not in (uid := k.removeprefix(prefix))
    ]

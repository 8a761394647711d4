"""What gpupool's Kubernetes-mode scheduler reports: its cluster's nodes and the lifecycle of
the pods it bound (``gpupool.server.kube_mirror``). Role ``kubernetes`` (or admin)."""

import time
from typing import Annotated, Literal

from fastapi import APIRouter, Query
from pydantic import Field, StringConstraints
from sqlalchemy.orm import Session

from gpupool.server.auth import Principal, Role
from gpupool.server.deps import Ctx, KubeCaller
from gpupool.server.errors import forbidden
from gpupool.server.kube_mirror import (
    live_uids,
    mirror_bound,
    mirror_ended,
    mirror_nodes,
    unnamed_reporter,
)
from gpupool.server.schemas import Name, NodeIn, Strict, TenantName
from gpupool.server.snapshot import queue_policy, reservations, tenant_tree
from gpupool.server.usage_elsewhere import elsewhere_usage

router = APIRouter(prefix="/api/v1/kubernetes", tags=["kubernetes"])
Text = Annotated[str, StringConstraints(max_length=1000)]
# the reporting cluster's name (its settings' ``cluster``; "": a server's only, unnamed one)
Cluster = Annotated[str, Query(max_length=63, pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?)?$")]


def _as(who: Principal, cluster: str) -> str:
    """The cluster a caller reports as: a named one only with a token of that name (or an
    admin's), so one cluster's token cannot replace or end another's nodes and pods; the
    unnamed one only with the token that first reported it (``_unnamed``)."""
    if cluster and who.role is not Role.ADMIN and who.user != cluster:
        raise forbidden(
            f"{who.user} reports as cluster {cluster!r}: a named cluster reports with a "
            f"token of that name (gpupool admin token create --name {cluster} --role kubernetes)"
        )
    return cluster


def _reporter(who: Principal, cluster: str) -> str | None:
    """Who is recorded as reporting the unnamed cluster (None: a named one, or an admin)."""
    return None if cluster or who.role is Role.ADMIN else who.user


def _unnamed(s: Session, who: Principal, cluster: str) -> None:
    if not cluster:
        unnamed_reporter(s, _reporter(who, cluster))


Uid = Annotated[str, StringConstraints(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9-]+$")]


class KubeNodeIn(NodeIn):
    closed: Text = ""  # why it takes no new pods (cordoned, not Ready, tainted); "" when it does


class KubeNodesIn(Strict):
    nodes: list[KubeNodeIn] = Field(max_length=20000)


class GrantedDeviceIn(Strict):
    device: int = Field(ge=0, le=1023)
    compute_pct: int = Field(ge=0, le=100)
    mem_mib: int = Field(ge=0, le=16 * 1024 * 1024)
    exclusive: bool = False
    mig_profile: str | None = Field(None, max_length=50)
    mig_start: int | None = Field(None, ge=0, le=64)


class GrantIn(Strict):
    node: Annotated[str, StringConstraints(min_length=1, max_length=200)]
    cpu_millis: int = Field(ge=0, le=10**8)
    mem_mib: int = Field(ge=0, le=10**10)
    devices: list[GrantedDeviceIn] = Field(default_factory=list, max_length=64)


class BoundPodIn(Strict):
    uid: Uid
    pod: Annotated[str, StringConstraints(min_length=3, max_length=317)]  # namespace/name
    tenant: TenantName
    request: Text
    kind: Literal["training", "inference", "dev", "batch"] = "batch"
    priority_class: Name
    placement: GrantIn
    policy: Annotated[str, StringConstraints(max_length=50)] = ""
    bound_at: float = Field(ge=0)
    submitted_at: float = Field(ge=0)


class EndedPodIn(Strict):
    uid: Uid
    state: Literal["succeeded", "failed", "cancelled", "preempted"]
    at: float = Field(ge=0)
    reason: Text = ""


class PodsIn(Strict):
    bound: list[BoundPodIn] = Field(default_factory=list, max_length=20000)
    ended: list[EndedPodIn] = Field(default_factory=list, max_length=20000)


class PodsOut(Strict):
    recorded: int = 0  # pods newly recorded as running
    ended: int = 0  # running pods newly ended
    live: list[str] = Field(default_factory=list)  # UIDs the server holds as running


@router.put("/nodes")
def put_nodes(
    body: KubeNodesIn, ctx: Ctx, who: KubeCaller, cluster: Cluster = ""
) -> dict[str, object]:
    """The cluster's GPU nodes, all of them: upserted, and that cluster's missing removed; a
    node another cluster mirrors is left out, named in ``refused``."""
    cluster = _as(who, cluster)
    with ctx.db.write() as s:
        _unnamed(s, who, cluster)
        count, refused = mirror_nodes(
            s,
            ((NodeIn(**n.model_dump(exclude={"closed"})), n.closed) for n in body.nodes),
            time.time(),
            cluster,
            _reporter(who, cluster),
        )
    ctx.capacity.invalidate()
    return {"nodes": count, "refused": refused}


@router.post("/pods", response_model=PodsOut)
def post_pods(body: PodsIn, ctx: Ctx, who: KubeCaller, cluster: Cluster = "") -> PodsOut:
    """Pods bound (running jobs from their binding) and pods ended (metered to their end)."""
    now = time.time()
    out = PodsOut()
    cluster = _as(who, cluster)
    with ctx.db.write() as s:
        _unnamed(s, who, cluster)
        for pod in body.bound:
            out.recorded += mirror_bound(s, pod.model_dump(), now, cluster)
        for ended in body.ended:
            out.ended += mirror_ended(s, ended.model_dump(), now, cluster)
        out.live = live_uids(s, cluster)
    return out


@router.get("/policy")
def get_policy(ctx: Ctx, who: KubeCaller, cluster: Cluster = "") -> dict[str, object]:
    """Tenants with their quotas (in the engine's units: card percent, MiB, millicores; an
    active rental plan included) and priority classes, for a scheduler that takes its tenants
    from the server."""
    cluster = _as(who, cluster)
    with ctx.db.read() as s:
        tree, classes, held = tenant_tree(s), queue_policy(s).classes, reservations(s)
        elsewhere = elsewhere_usage(s, cluster)
    return {
        "tenants": [
            {
                "name": t.name,
                "parent": t.parent,
                "weight": t.weight,
                "quotas": {
                    r: [q.nominal, q.borrowing_limit, q.lending_limit] for r, q in t.quotas.items()
                },
            }
            for t in tree.tenants.values()
        ],
        "priority_classes": dict(classes),
        # what each tenant's standalone jobs and its pods in the other clusters hold: one
        # guarantee across all of them (usage_elsewhere)
        "usage_elsewhere": elsewhere,
        # held on the cluster's nodes by its scheduler as the server holds them on its own
        "reservations": [
            {
                "id": r.id,
                "tenant": r.tenant,
                "nodes": list(r.nodes),
                "start": r.start,
                "end": r.end,
                "cards": r.cards,
            }
            for r in held
        ],
    }


@router.get("/pods", response_model=PodsOut)
def get_pods(ctx: Ctx, who: KubeCaller, cluster: Cluster = "") -> PodsOut:
    """The UIDs of the cluster's pods the server holds as running (what a restarted scheduler
    checks)."""
    cluster = _as(who, cluster)
    with ctx.db.read() as s:
        _unnamed(s, who, cluster)
        return PodsOut(live=live_uids(s, cluster))

"""One guarantee per tenant across standalone nodes and Kubernetes clusters reporting to one
server: what a tenant's work holds on the side a scheduler does not place.

The server's scheduler charges each tenant, besides its own jobs, what the pods mirrored from
clusters hold (``kube_usage``); a cluster's scheduler gets, with its policy, what standalone
jobs hold (``standalone_usage``) and charges that. Each still places, preempts and reclaims
only its own work; a tenant over its guarantee on one side is borrowing on both."""

from collections.abc import Mapping

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpupool.scheduler.placement_json import placement_from_json
from gpupool.scheduler.session import MIG_PERCENT
from gpupool.scheduler.tenants import TenantTree, Usage, usage_of
from gpupool.server.db.tables import AllocationRow, DeviceRow, NodeRow
from gpupool.server.kube_mirror import KUBERNETES_ACTION, cluster_of


def _usage(
    s: Session, mirrored: bool | None, skip: frozenset[str] = frozenset()
) -> dict[str, Usage]:
    """``mirrored``: only the mirrored pods' allocations (True), only the others (False), or
    both (None); ``skip``: allocations on these nodes are left out."""
    a = AllocationRow.__table__.c
    kind = a.action == KUBERNETES_ACTION if mirrored else a.action != KUBERNETES_ACTION
    where = [a.state == "active"] + ([kind] if mirrored is not None else [])
    rows = s.execute(select(a.job_id, a.tenant, a.placement).where(*where)).all()
    placed = [(tenant, placement_from_json(str(job_id), raw)) for job_id, tenant, raw in rows]
    placed = [(t, p) for t, p in placed if not set(p.node_names) & skip]
    if not placed:
        return {}
    nodes = {name for _, placement in placed for name in placement.node_names}
    devices = s.execute(  # the models of the nodes they are on, not of the whole fleet
        select(DeviceRow.node, DeviceRow.index, DeviceRow.model).where(DeviceRow.node.in_(nodes))
    ).all()
    models = {(str(node), int(index)): str(model) for node, index, model in devices}
    out: dict[str, Usage] = {}
    for tenant, placement in placed:
        used = usage_of(placement, MIG_PERCENT, models)
        mine = out.setdefault(tenant, {})
        for key, amount in used.items():
            mine[key] = mine.get(key, 0) + amount
    return out


def kube_usage(s: Session) -> dict[str, Usage]:
    """Per tenant, what its pods in Kubernetes clusters hold (the mirrored allocations)."""
    return _usage(s, mirrored=True)


def standalone_usage(s: Session) -> dict[str, Usage]:
    """Per tenant, what its jobs on the server's own nodes hold."""
    return _usage(s, mirrored=False)


def elsewhere_usage(s: Session, cluster: str) -> dict[str, Usage]:
    """Per tenant, what its work holds outside that cluster: its standalone jobs and its pods
    in the other clusters reporting here (one guarantee across all of them)."""
    own = frozenset(
        n.name
        for n in s.execute(select(NodeRow).where(NodeRow.source == "kubernetes")).scalars()
        if cluster_of(n) == cluster
    )
    return _usage(s, mirrored=None, skip=own)


def charge_elsewhere(tree: TenantTree, usage: Mapping[str, Usage]) -> None:
    """Charge each known tenant what its work holds where this scheduler does not place."""
    for tenant, used in usage.items():
        if tenant in tree.tenants and used:
            tree.charge(tenant, dict(used))

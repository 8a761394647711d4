"""Nodes whose device plugin shares its cards as replicas, and which pods go there (pure).

A node of NVIDIA's device plugin with time-slicing or MPS and ``renameByDefault`` advertises
``nvidia.com/gpu.shared``: R replicas per card (``kube.inventory``). gpupool reads one replica
as a share of ``1/R`` of a card (MPS limits it to that much of the card's memory and compute;
time-slicing does not, which gpupool cannot change there), so quotas and bills count a
quarter card for one of four replicas. Which card a replica is on is the device plugin's
choice; gpupool counts how many each node has left.

Pods asking replicas go only to such nodes, and pods asking anything else only to other
nodes: the kubelet admits a pod only for resources its node advertises, and a pod asking
cards must not be handed a time-sliced one. One replica size is read per cluster (a pod's
share is decided before its node); nodes of another size are left out, saying so.
"""

from collections import Counter
from collections.abc import Callable, Mapping

from gpupool.kube.inventory import REPLICA_RESOURCE, KubeNode
from gpupool.kube.left_out import LeftOut, LeftOutCause
from gpupool.kube.pods import PodJob
from gpupool.scheduler.session import NOT_ALLOWED

ON_REPLICA_NODES = f"sharing cards as device-plugin replicas ({REPLICA_RESOURCE}), not asked"
NOT_REPLICA_NODES = f"serving no device-plugin replicas ({REPLICA_RESOURCE})"


def replica_size(nodes: Mapping[str, KubeNode]) -> tuple[int, dict[str, LeftOut]]:
    """The cluster's replicas per card (0: no node shares that way) and, per node of another
    size, why it is left out. The size most nodes have wins (ties: fewer, larger replicas)."""
    sizes = Counter(kn.replicas for kn in nodes.values() if kn.replicas)
    if not sizes:
        return 0, {}
    size = max(sizes, key=lambda r: (sizes[r], -r))
    left_out = {
        name: LeftOut(
            name,
            LeftOutCause.REPLICA_SIZE,
            f"node {name}: {kn.replicas} device-plugin replicas per card where the cluster's "
            f"other nodes have {size}: gpupool reads one replica size per cluster (a replica "
            "is a share of 1/R of a card, decided before the node)",
        )
        for name, kn in nodes.items()
        if kn.replicas and kn.replicas != size
    }
    return size, left_out


def sharing_masks(
    jobs: Mapping[str, PodJob],
    asks_replica: Callable[[str], bool],
    nodes: Mapping[str, KubeNode],
    allowed: Mapping[str, frozenset[str] | None],
) -> dict[str, tuple[frozenset[str] | None, str]]:
    """Per job, the nodes it may use and why the others are not (empty: any node, as
    ``allowed`` had it). ``asks_replica``: whether the pod of that key asks replicas."""
    replica_nodes = frozenset(name for name, kn in nodes.items() if kn.replicas)
    if not replica_nodes:
        return {job_id: (mask, "") for job_id, mask in allowed.items()}
    others = frozenset(nodes) - replica_nodes
    out: dict[str, tuple[frozenset[str] | None, str]] = {}
    for job_id, pj in jobs.items():
        constrained = allowed.get(job_id)
        if asks_replica(pj.pods[0]):
            kind, why = replica_nodes, NOT_REPLICA_NODES
        else:
            kind, why = others, ON_REPLICA_NODES
        mask = kind if constrained is None else constrained & kind
        out[job_id] = (mask, why if constrained is None else f"{NOT_ALLOWED}, or {why}")
    return out

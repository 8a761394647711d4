"""Builders the tests share: small hand-made clusters and tenant trees, an independent
loop-based fit oracle, usage records as metering writes them."""

from gpupool.model import (
    Node,
    ResourceRequest,
    SharingMode,
    SliceKind,
    Topology,
    make_devices,
    model_matches,
)
from gpupool.scheduler import ClusterState
from gpupool.scheduler.state import MODE_CODES
from gpupool.scheduler.tenants import Quota, Tenant, TenantTree
from gpupool.server.db.tables import UsageRow
from gpupool.sharing import free_starts


def node(
    name: str,
    model: str = "A100-80G",
    cards: int = 4,
    *,
    cpu: int = 64,
    mem_gib: int = 512,
    mode: SharingMode = SharingMode.WHOLE,
    island_size: int | None = None,
) -> Node:
    devices = make_devices(model, cards, mode=mode, node=name, island_size=island_size)
    return Node(name, cpu * 1000, mem_gib * 1024, devices)


def fits_somewhere(state: ClusterState, r: ResourceRequest) -> bool:
    """Brute force over every node and device with plain loops: could ``r`` be placed now?"""
    return any(fits_on(state, row, r) for row in range(state.size))


def fits_on(state: ClusterState, row: int, r: ResourceRequest) -> bool:
    if state.cpu_free[row] < r.cpu_millis or state.mem_free[row] < r.mem_mib:
        return False
    if r.kind is SliceKind.NONE:
        return True
    node_ = state.nodes[row]
    units = 0
    islands: dict[int, int] = {}
    for dev in node_.devices:
        col = state.column[(row, dev.index)]
        if not dev.healthy:
            continue
        if r.vendor is not None and dev.vendor != r.vendor:
            continue
        if r.gpu_model and not model_matches(r.gpu_model, dev.model):
            continue
        mode = int(state.mode[row, col])
        if r.kind is SliceKind.WHOLE:
            if mode == MODE_CODES[SharingMode.MIG] or (r.gpu_mem_mib or 0) > dev.memory_mib:
                continue
            idle = (
                not state.exclusive[row, col]
                and state.sharers[row, col] == 0
                and state.mem_used[row, col] == 0
            )
            if idle:
                units += 1
                if dev.island is not None:
                    islands[dev.island] = islands.get(dev.island, 0) + 1
        elif r.kind is SliceKind.SHARE:
            if mode != MODE_CODES[SharingMode.SHARE] or state.exclusive[row, col]:
                continue
            if state.sharers[row, col] >= state.share.max_sharers:
                continue
            grantable = state.share.usable_mib(dev.memory_mib)
            need = (
                r.gpu_mem_mib
                if r.gpu_mem_mib is not None
                else (grantable * (r.gpu_share_pct or 0) // 100)
            )
            if grantable - state.mem_used[row, col] < need:
                continue
            if state.compute_free[row, col] < (r.gpu_share_pct or 0):
                continue
            units += 1
        else:
            table = state.mig_tables[int(state.model[row, col])]
            if mode != MODE_CODES[SharingMode.MIG] or table is None or not table.has(r.mig_profile):
                continue
            units += len(free_starts(int(state.mig_used[row, col]), table.profile(r.mig_profile)))
    if r.kind is SliceKind.WHOLE and r.topology is Topology.NVLINK:
        return max(islands.values(), default=0) >= r.gpu
    return units >= r.gpu


def cluster(nodes: int = 10, cards: int = 4) -> list[Node]:
    return [
        Node(f"s{i:02d}", 64000, 512 * 1024, make_devices("A100-80G", cards, node=f"s{i:02d}"))
        for i in range(nodes)
    ]


def tree(**cards: float) -> TenantTree:
    tenants = [Tenant("company")]
    tenants += [Tenant(n, "company", {"gpu": Quota.cards(c)}) for n, c in cards.items()]
    return TenantTree(tenants)


def usage_record(server, tenant: str, start: float, hours: int, pct: int = 100) -> None:
    """A usage record as metering writes it: one A100-80G card for ``hours``."""
    seconds = hours * 3600
    with server.ctx.db.write() as s:
        s.add(
            UsageRow(
                tenant=tenant,
                job_id=1,
                allocation_id=1,
                model="A100-80G",
                start=start,
                end=start + seconds,
                devices=1,
                device_seconds=seconds,
                compute_pct_seconds=pct * seconds,
                mem_mib_seconds=81920 * seconds,
                cpu_milli_seconds=0,
            )
        )


TINY_SCENARIO = {
    "name": "tiny",
    "days": 1,
    "tick_minutes": 15,
    "seed": 3,
    "cluster": [{"count": 2, "model": "A100-80G", "cards": 4}],
    "teams": [{"name": "busy", "guarantee": 4}, {"name": "idle", "guarantee": 4}],
    "workloads": [
        {
            "team": "busy",
            "kind": "training",
            "request": "gpu=1",
            "arrivals_per_hour": 6,
            "duration_hours": 2,
        },
        {
            "team": "idle",
            "kind": "dev",
            "request": "gpu=1",
            "arrivals_per_hour": 1.5,
            "hours": [9, 12],
            "duration_hours": 1,
        },
    ],
}


OPENB_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time\n"
)


OPENB_SMALL = (
    "a,1000,1024,1,500,,LS,Running,0,100,0\n"  # half a GPU for 100 s
    "b,1000,1024,1,500,,LS,Running,0,100,0\n"  # the other half, same time
    "c,1000,1024,1,1000,,LS,Running,10,60,10\n"  # a whole GPU for 50 s, arrives at 10
)


def openb_trace(tmp_path, rows: str, nodes: str = "n1,32000,262144,1,G2\n"):
    n = tmp_path / "nodes.csv"
    n.write_text("sn,cpu_milli,memory_mib,gpu,model\n" + nodes)
    p = tmp_path / "pods.csv"
    p.write_text(OPENB_HEADER + rows)
    return n, p

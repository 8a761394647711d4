"""Jobs that can never run are refused at submission, as Slurm refuses a "Requested node
configuration is not available": the request is tried on the pool as if every node were empty
and healthy (the same filters the scheduler uses), so 12 cards when the largest server has 4,
``gpu=1000``, or a model no node has get a 422 that says why, instead of waiting for ever.

A request above the tenant's ceiling (its guarantee plus its borrowing limit, or an
ancestor's cap) is refused the same way: quotas can be raised, but as they stand it never runs.

The empty pool is rebuilt when the nodes change (``nodes_version``), checked at most every
``refresh_s``, when the tenants and quotas are re-read too. A pool with no node yet accepts
every request (agents may not have registered)."""

import threading
import time
from collections.abc import Iterable
from dataclasses import replace

from sqlalchemy import select

from gpupool.model import Job, Node, ResourceRequest, SharingMode
from gpupool.scheduler import ClusterState, Placer, Unplaceable
from gpupool.scheduler.cycle import estimate_usage
from gpupool.scheduler.tenants import TenantTree
from gpupool.server.codec import node_from_rows
from gpupool.server.db.engine import Database
from gpupool.server.db.tables import DeviceRow, Meta, NodeRow, Pool
from gpupool.server.snapshot import tenant_tree
from gpupool.sharing.mig import table_for


def _hybrid_modes(pools: Iterable[Pool]) -> list[SharingMode]:
    """The ways hybrid pools' MIG-capable cards may all be cut within their bounds."""
    pools = list(pools)
    out = []
    if any(p.mig_cards_max != 0 for p in pools):
        out.append(SharingMode.MIG)
    if pools:
        out.append(SharingMode.SHARE)
    return out


def _cut(node: Node, hybrid: dict[str, Pool], mode: SharingMode) -> Node:
    pool = hybrid.get(node.pool or "")
    if pool is None or (mode is SharingMode.MIG and pool.mig_cards_max == 0):
        return node
    devices = tuple(
        replace(d, mode=mode) if table_for(d.model) is not None else d for d in node.devices
    )
    return replace(node, devices=devices)


class PoolCapacity:
    def __init__(self, refresh_s: float = 5.0):
        self.refresh_s = refresh_s
        # the empty pool (as it is cut, then with hybrid pools' cards cut the other ways) and
        # the answers found on it, replaced together when nodes change
        self._pool: tuple[list[ClusterState], dict[ResourceRequest, str | None]] | None = None
        self._version = -1
        self._checked = float("-inf")
        self._placer = Placer("first-fit")
        self._lock = threading.Lock()
        self._tree: TenantTree | None = None

    def stale(self, now: float | None = None) -> bool:
        return (time.monotonic() if now is None else now) - self._checked >= self.refresh_s

    def invalidate(self) -> None:
        """Re-read on the next check (this process changed quotas or tenants)."""
        self._checked = float("-inf")

    def refresh(self, db: Database) -> None:
        """Re-read tenants and quotas, and the nodes if they changed (blocking: call it off
        the event loop)."""
        with self._lock:
            self._checked = time.monotonic()
            with db.read() as s:
                self._tree = tenant_tree(s)
                version = s.execute(select(Meta.nodes_version).where(Meta.id == 1)).scalar()
                if version == self._version and self._pool is not None:
                    return
                devices: dict[str, list[DeviceRow]] = {}
                for d in s.execute(select(DeviceRow)).scalars():
                    devices.setdefault(d.node, []).append(d)
                hybrid = {
                    p.name: p for p in s.execute(select(Pool)).scalars() if p.sharing == "hybrid"
                }
                nodes = []
                agents = select(NodeRow).where(NodeRow.source == "agent").order_by(NodeRow.name)
                for row in s.execute(agents).scalars():
                    node = node_from_rows(row, devices.get(row.name, []))
                    healthy = tuple(replace(d, healthy=True) for d in node.devices)
                    nodes.append(replace(node, devices=healthy))
            states = [ClusterState(nodes).use_default_memory()]
            for mode in _hybrid_modes(hybrid.values()):  # its cards may switch: try each way
                cut = [_cut(n, hybrid, mode) for n in nodes]
                states.append(ClusterState(cut).use_default_memory())
            self._pool = (states, {})
            self._version = version if version is not None else -1

    def node_names(self) -> frozenset[str] | None:
        """The pool's nodes, or None before any has registered (names are then not checked)."""
        if self._pool is None or self._pool[0][0].size == 0:
            return None
        return frozenset(self._pool[0][0].index)

    def never_for(self, job: Job) -> str | None:
        """Why ``job`` can never run: no node could hold it, or its tenant may never hold
        so much; None when it may run some day."""
        answer = self.never(job.request)
        if answer is not None or self._tree is None or job.tenant not in self._tree.tenants:
            return answer
        ceiling = self._tree.ceiling(job.tenant, estimate_usage(job))
        return None if ceiling is None else f"can never run: {ceiling}"

    def never(self, request: ResourceRequest) -> str | None:
        """Why ``request`` fits on no node of the pool even when it is empty, or None."""
        if self._pool is None or self._pool[0][0].size == 0:
            return None
        states, answers = self._pool
        if request in answers:  # the same answer until the nodes change
            return answers[request]
        answer = None
        for n, state in enumerate(states):
            result = self._placer.place(state, Job(id="capacity-check", request=request))
            if not isinstance(result, Unplaceable):
                answer = None
                break
            if n == 0:
                answer = f"can never run on this pool (every node empty): {result.reason}"
        if len(answers) > 4096:
            answers.clear()
        answers[request] = answer
        return answer

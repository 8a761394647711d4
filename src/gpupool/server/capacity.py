"""Jobs that can never run are refused at submission, as Slurm refuses a "Requested node
configuration is not available": the request is tried on the pool as if every node were empty
and healthy (the same filters the scheduler uses), so 12 cards when the largest server has 4,
``gpu=1000``, or a model no node has get a 422 that says why, instead of waiting for ever.

The empty pool is rebuilt when the nodes change (``nodes_version``), checked at most every
``refresh_s``. A pool with no node yet accepts everything (agents may not have registered)."""

import threading
import time
from dataclasses import replace

from sqlalchemy import select

from gpupool.model import Job, ResourceRequest
from gpupool.scheduler import ClusterState, Placer, Unplaceable
from gpupool.server.codec import node_from_rows
from gpupool.server.db.engine import Database
from gpupool.server.db.tables import DeviceRow, Meta, NodeRow


class PoolCapacity:
    def __init__(self, refresh_s: float = 5.0):
        self.refresh_s = refresh_s
        # the empty pool and the answers found on it, replaced together when nodes change
        self._pool: tuple[ClusterState, dict[ResourceRequest, str | None]] | None = None
        self._version = -1
        self._checked = float("-inf")
        self._placer = Placer("first-fit")
        self._lock = threading.Lock()

    def stale(self, now: float | None = None) -> bool:
        return (time.monotonic() if now is None else now) - self._checked >= self.refresh_s

    def refresh(self, db: Database) -> None:
        """Re-read the nodes if they changed (blocking: call it off the event loop)."""
        with self._lock:
            self._checked = time.monotonic()
            with db.read() as s:
                version = s.execute(select(Meta.nodes_version).where(Meta.id == 1)).scalar()
                if version == self._version and self._pool is not None:
                    return
                devices: dict[str, list[DeviceRow]] = {}
                for d in s.execute(select(DeviceRow)).scalars():
                    devices.setdefault(d.node, []).append(d)
                nodes = []
                for row in s.execute(select(NodeRow).order_by(NodeRow.name)).scalars():
                    node = node_from_rows(row, devices.get(row.name, []))
                    healthy = tuple(replace(d, healthy=True) for d in node.devices)
                    nodes.append(replace(node, devices=healthy))
            self._pool = (ClusterState(nodes), {})
            self._version = version if version is not None else -1

    def never(self, request: ResourceRequest) -> str | None:
        """Why ``request`` fits on no node of the pool even when it is empty, or None."""
        if self._pool is None or self._pool[0].size == 0:
            return None
        state, answers = self._pool
        if request in answers:  # the same answer until the nodes change
            return answers[request]
        result = self._placer.place(state, Job(id="capacity-check", request=request))
        answer = None
        if isinstance(result, Unplaceable):
            answer = f"can never run on this pool (every node empty): {result.reason}"
        if len(answers) > 4096:
            answers.clear()
        answers[request] = answer
        return answer

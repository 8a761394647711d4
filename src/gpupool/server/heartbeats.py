"""What an agent's signs of life write: a heartbeat with telemetry (HTTP, or a beat on the
agent's channel that carries it), and the bare "alive" beats of the channel, which many nodes
share in one statement.

A bare beat is what keeps a node's lease (the agents' self-fencing) and the server's view of
it alive; telemetry only feeds the dashboard, idle accounting and health, so it can travel far
less often. 1,000 agents that each sent a full heartbeat every 10 s kept most of a core busy
(docs/performance.md); their bare beats cost one UPDATE per flush."""

import asyncio
import contextlib
from collections.abc import Callable
from functools import partial

from sqlalchemy import select, update

from gpupool.server.db.tables import DeviceRow, NodeRow
from gpupool.server.errors import ApiError, not_found
from gpupool.server.group_commit import Batch, GroupCommit
from gpupool.server.idle import record_idle
from gpupool.server.lifecycle import bump_nodes_version
from gpupool.server.liveness import heard_from
from gpupool.server.schemas import Telemetry


def write_heartbeat(
    b: Batch, name: str, devices: list[Telemetry], now: float
) -> tuple[bool, NodeRow, list[DeviceRow]]:
    """Record a heartbeat's telemetry; (whether health, mode or state changed, the node, its
    devices). Everything is checked before anything is written, so a refused heartbeat in a
    group transaction changes nothing."""
    s = b.session
    node = s.get(NodeRow, name, with_for_update=True)
    if node is None:
        raise not_found(f"node {name}")
    rows = list(
        s.execute(
            select(DeviceRow).where(DeviceRow.node == name).order_by(DeviceRow.index)
        ).scalars()
    )
    by_index = {d.index: d for d in rows}
    for t in devices:
        if t.index not in by_index:
            raise ApiError(422, f"devices: node {name} has no device {t.index}", "devices")
    # idle time runs from the previous telemetry, not from the last bare beat
    previous = (
        max((float((d.telemetry or {}).get("time") or 0) for d in rows), default=0.0)
        or node.heartbeat_at
    )
    changed = heard_from(s, node, now)
    record_idle(s, name, [(t.index, t.util_pct) for t in devices], now - previous)
    for t in devices:
        d = by_index[t.index]
        d.telemetry = t.model_dump(exclude={"index", "mode"}) | {"time": now}
        if d.healthy != t.healthy:
            d.healthy = t.healthy
            changed = True
        if t.mode is not None and t.mode != d.mode:  # the agent switched it (hybrid)
            d.mode = t.mode
            changed = True
        if d.want_mode is not None and (d.want_mode == d.mode or t.mode_error):
            d.want_mode, d.want_since = None, None  # switched, or it cannot: back to work
            changed = True
    if changed:
        bump_nodes_version(s)
    return changed, node, rows


def mark_alive(b: Batch, names: list[str], now: float) -> tuple[dict[str, str], bool]:
    """Bare beats of ``names``: (each known node's state after it, whether any changed). A
    lost node that beats again is fenced, as with a heartbeat. Rows are locked first, so a
    node the scheduler marks lost meanwhile is never answered as still ready."""
    s = b.session
    rows = s.execute(
        select(NodeRow.name, NodeRow.state).where(NodeRow.name.in_(names)).with_for_update()
    ).all()
    known = [n for n, _ in rows]
    lost = [n for n, state in rows if state == "lost"]
    if known:
        s.execute(update(NodeRow).where(NodeRow.name.in_(known)).values(heartbeat_at=now))
    if lost:
        s.execute(update(NodeRow).where(NodeRow.name.in_(lost)).values(state="fenced"))
        bump_nodes_version(s)
    return {n: ("fenced" if state == "lost" else state) for n, state in rows}, bool(lost)


class AliveBatcher:
    """Collects bare beats for ``flush_s`` and writes them in one group-commit item; each
    beat's answer (its node's state, None for a node unknown) comes once that is committed, so
    an agent never renews its lease on a beat the database does not hold."""

    def __init__(
        self,
        writes: GroupCommit,
        flush_s: float,
        on_change: Callable[[], None],
        clock: Callable[[], float],
    ):
        self.writes = writes
        self.flush_s = flush_s
        self.on_change = on_change
        self.clock = clock
        self.flushes = 0
        self._pending: dict[str, list[asyncio.Future[str | None]]] = {}
        self._timer: asyncio.TimerHandle | None = None

    async def beat(self, name: str) -> str | None:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[str | None] = loop.create_future()
        self._pending.setdefault(name, []).append(fut)
        if self._timer is None:
            self._timer = loop.call_later(self.flush_s, self._start_flush)
        return await fut

    def _start_flush(self) -> None:
        self._timer = None
        pending, self._pending = self._pending, {}
        task = asyncio.ensure_future(self._flush(pending))
        task.add_done_callback(lambda t: t.exception() if not t.cancelled() else None)

    async def _flush(self, pending: dict[str, list[asyncio.Future[str | None]]]) -> None:
        self.flushes += 1
        try:
            states, changed = await self.writes.run(
                partial(mark_alive, names=sorted(pending), now=self.clock()), wake=False
            )
        except Exception as exc:  # the database away: every beat of the batch failed
            for futs in pending.values():
                for fut in futs:
                    if not fut.done():
                        fut.set_exception(exc)
            return
        if changed:
            self.on_change()
        for name, futs in pending.items():
            for fut in futs:
                with contextlib.suppress(asyncio.InvalidStateError):
                    fut.set_result(states.get(name))

"""What an agent's signs of life write: a heartbeat with telemetry (HTTP, or a beat on the
agent's channel that carries it), and the bare "alive" beats of the channel, which many nodes
share in one statement.

A bare beat is what keeps a node's lease (the agents' self-fencing) and the server's view of
it alive; telemetry only feeds the dashboard, idle accounting and health, so it can travel far
less often. 1,000 agents that each sent a full heartbeat every 10 s kept most of a core busy
(docs/performance.md); their bare beats cost one UPDATE per flush."""

import asyncio
import logging
from collections.abc import Callable, Mapping
from functools import partial

from sqlalchemy import select, update

from gpupool.server.db.tables import DeviceRow, NodeRow
from gpupool.server.errors import ApiError, not_found
from gpupool.server.group_commit import Batch, GroupCommit
from gpupool.server.idle import gpu_active, idle_util, record_activity, record_idle
from gpupool.server.lifecycle import bump_nodes_version
from gpupool.server.liveness import heard_from
from gpupool.server.schemas import Telemetry

log = logging.getLogger(__name__)


def write_heartbeat(
    b: Batch, name: str, devices: list[Telemetry], now: float
) -> tuple[bool, NodeRow, list[DeviceRow]]:
    """Record one heartbeat's telemetry (``write_telemetry`` for one node); (whether health,
    mode or state changed, the node, its devices)."""
    outcome, changed, loaded = write_telemetry(b, {name: devices}, now)
    refused = outcome[name]
    if isinstance(refused, ApiError):
        raise refused
    node = b.session.get(NodeRow, name)  # in the session already: no read
    assert node is not None  # write_telemetry refused an unknown node above
    return changed, node, [loaded[name][i] for i in sorted(loaded[name])]


def write_telemetry(
    b: Batch, beats: dict[str, list[Telemetry]], now: float
) -> tuple[dict[str, str | ApiError], bool, dict[str, dict[int, DeviceRow]]]:
    """Record the telemetry of several nodes at once (three reads, one flush however many):
    (per node, its state after it or why it was refused; whether any health, mode or state
    changed; each known node's device rows by index, as written). A node's telemetry is
    checked before anything of it is written, and one node refused leaves the others
    written."""
    s = b.session
    with s.no_autoflush:  # reads of these nodes only; everything is flushed once, at commit
        nodes = {
            n.name: n
            for n in s.execute(
                select(NodeRow)
                .where(NodeRow.name.in_(beats))
                .order_by(NodeRow.name)  # locked in one order by every flush
                .with_for_update()
            ).scalars()
        }
        rows: dict[str, dict[int, DeviceRow]] = {n: {} for n in nodes}
        for d in s.execute(select(DeviceRow).where(DeviceRow.node.in_(nodes))).scalars():
            rows[d.node][d.index] = d
    outcome: dict[str, str | ApiError] = {}
    idle: dict[str, tuple[set[int], float]] = {}
    active: dict[str, set[int]] = {}  # devices showing activity (interactive sessions' clock)
    changed = False
    for name, devices in beats.items():
        node = nodes.get(name)
        if node is None:
            outcome[name] = not_found(f"node {name}")
            continue
        unknown = [t.index for t in devices if t.index not in rows[name]]
        if unknown:
            outcome[name] = ApiError(
                422, f"devices: node {name} has no device {unknown[0]}", "devices"
            )
            continue
        by_index = rows[name]
        # idle time runs from the previous telemetry, not from the last bare beat
        previous = (
            max((float((d.telemetry or {}).get("time") or 0) for d in by_index.values()),
                default=0.0)
            or node.heartbeat_at
        )  # fmt: skip
        changed |= heard_from(s, node, now)
        idle[name] = ({t.index for t in devices if idle_util(t.util_pct)}, now - previous)
        before = {i: (d.telemetry or {}).get("mem_used_mib") for i, d in by_index.items()}
        active[name] = {
            t.index for t in devices if gpu_active(t.util_pct, t.mem_used_mib, before[t.index])
        }
        for t in devices:
            changed |= _apply(by_index[t.index], t, now)
        outcome[name] = node.state
    with s.no_autoflush:
        record_idle(s, idle)
        record_activity(s, active, now)
    if changed:
        bump_nodes_version(s)
    return outcome, changed, rows


def _apply(d: DeviceRow, t: Telemetry, now: float) -> bool:
    """One device's telemetry onto its row; True when what the scheduler acts on changed."""
    changed = False
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
    return changed


def mark_alive(b: Batch, names: list[str], now: float) -> tuple[dict[str, str], bool]:
    """Bare beats of ``names``: (each known node's state after it, whether any changed). A
    lost node that beats again is fenced, as with a heartbeat. The state is read by the
    UPDATE that writes the beat (its row locked), so a node the scheduler marks lost meanwhile
    is never answered as still ready."""
    s = b.session
    rows = s.execute(
        update(NodeRow)  # ORM-enabled: what this transaction changed in the session goes first
        .where(NodeRow.name.in_(names))
        .values(heartbeat_at=now)
        .returning(NodeRow.name, NodeRow.state)
    ).all()
    lost = [n for n, state in rows if state == "lost"]
    if lost:
        s.execute(update(NodeRow).where(NodeRow.name.in_(lost)).values(state="fenced"))
        bump_nodes_version(s)
    return {n: ("fenced" if state == "lost" else state) for n, state in rows}, bool(lost)


def record_lags(b: Batch, lags: Mapping[str, float], lag_max_s: float) -> bool:
    """How far behind these nodes' agents are, as their beats said; True when a node's agent
    fell behind ``lag_max_s`` or caught up (the scheduler reads its nodes again)."""
    s = b.session
    crossed = False
    rows = s.execute(select(NodeRow.name, NodeRow.agent_lag_s).where(NodeRow.name.in_(lags))).all()
    for name, before in rows:
        after = lags[name]
        if after != before:
            s.execute(update(NodeRow).where(NodeRow.name == name).values(agent_lag_s=after))
            crossed |= (before > lag_max_s) != (after > lag_max_s)
    if crossed:
        bump_nodes_version(s)
    return crossed


def record_beats(
    b: Batch,
    bare: list[str],
    telemetry: dict[str, list[Telemetry]],
    now: float,
    lags: Mapping[str, float] | None = None,
    lag_max_s: float = float("inf"),
) -> tuple[dict[str, str | ApiError | None], bool]:
    """One flush of beats: (per node, its state after them, why its telemetry was refused, or
    None for a node unknown; whether any node's state, health, mode or lag changed)."""
    outcome: dict[str, str | ApiError | None] = {}
    changed = record_lags(b, lags, lag_max_s) if lags else False
    if telemetry:
        written, changed, _ = write_telemetry(b, telemetry, now)
        outcome.update(written)
    alone = [n for n in bare if n not in telemetry]
    if alone:
        states, lost = mark_alive(b, alone, now)
        outcome.update({n: states.get(n) for n in alone})
        changed |= lost
    return outcome, changed


BeatOutcome = str | None | Exception  # the node's state, None for a node unknown, or why not


class BeatBatcher:
    """Collects the channels' beats for ``flush_s`` and writes them in one group-commit item
    (bare beats in one statement, telemetry in three reads and one flush); each beat's answer
    (its node's state, None for a node unknown) comes once that is committed, so an agent
    never renews its lease on a beat the database does not hold. A beat whose telemetry is
    refused is answered with the ``ApiError`` that says why. ``add`` takes a callback, not a
    future: a task or future per beat was most of an idle channel's cost."""

    def __init__(
        self,
        writes: GroupCommit,
        flush_s: float,
        on_change: Callable[[], None],
        clock: Callable[[], float],
        lag_max_s: float = float("inf"),
    ):
        self.lag_max_s = lag_max_s
        self._lags: dict[str, float] = {}  # the newest of each node that said one
        self.writes = writes
        self.flush_s = flush_s
        self.on_change = on_change
        self.clock = clock
        self.flushes = 0
        self._waiting: dict[str, list[Callable[[BeatOutcome], None]]] = {}
        self._telemetry: dict[str, list[Telemetry]] = {}  # the newest of each node
        self._timer: asyncio.TimerHandle | None = None

    def add(
        self,
        name: str,
        done: Callable[[BeatOutcome], None],
        devices: list[Telemetry] | None = None,
        lag: float | None = None,
    ) -> None:
        """Queue a beat of ``name``; ``done`` is called on the event loop with its outcome
        once the flush it joined is committed (or failed). ``lag``: how long its agent's
        round has run (a beat that says nothing leaves it as it was)."""
        self._waiting.setdefault(name, []).append(done)
        if devices is not None:
            self._telemetry[name] = devices
        if lag is not None:
            self._lags[name] = lag
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self.flush_s, self._start_flush)

    def _start_flush(self) -> None:
        self._timer = None
        waiting, self._waiting = self._waiting, {}
        telemetry, self._telemetry = self._telemetry, {}
        lags, self._lags = self._lags, {}
        task = asyncio.ensure_future(self._flush(waiting, telemetry, lags))
        task.add_done_callback(lambda t: t.exception() if not t.cancelled() else None)

    async def _flush(
        self,
        waiting: dict[str, list[Callable[[BeatOutcome], None]]],
        telemetry: dict[str, list[Telemetry]],
        lags: dict[str, float],
    ) -> None:
        self.flushes += 1
        write = partial(record_beats, bare=sorted(waiting), telemetry=telemetry,
                        now=self.clock(), lags=lags, lag_max_s=self.lag_max_s)  # fmt: skip
        outcome: Mapping[str, BeatOutcome]
        try:
            outcome, changed = await self.writes.run(write, wake=False)
        except Exception as exc:  # the database away: every beat of the batch failed
            outcome, changed = dict.fromkeys(waiting, exc), False
        if changed:
            try:
                self.on_change()
            except Exception:  # the beats are written: they are answered all the same
                log.exception("waking the scheduler after beats")
        for name, callbacks in waiting.items():
            result = outcome.get(name)
            for done in callbacks:
                try:
                    done(result)
                except Exception:  # one channel's failure is not the others'
                    log.exception("answering a beat of node %s", name)

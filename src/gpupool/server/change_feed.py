"""Wakes long-polling agents when their node's orders may have changed.

An agent's orders change when an allocation on its node comes, goes or moves on (its
generation), when its job changes state, when the node's state changes, or when one of its
cards is ordered into another mode. Those writes happen in any process sharing the database,
so each API process reads one cheap stamp (the commit generation, ``nodes_version`` — which
card-mode orders bump too — and the newest job event) in one thread: on SQLite every
``poll_s`` (0.2 s by default), on PostgreSQL when a commit that moved it notifies
(``db.notify``; every ``fallback_s`` besides, and at once after the listening connection
dropped). When the stamp moves, one query reads a digest of every node's orders-relevant
state, and only the requests waiting on a node whose digest changed are woken. A submission,
or a change on another node, wakes nobody: 1,000 waiting agents are not 1,000 recomputations
per commit.

A request waits on the digest of the state its own answer was read from (``node_digest``,
same read), never on the feed's copy: a feed that fell behind (a starved thread) could
otherwise hold "ready" while the answer already showed a new allocation, then see "ready"
again after its job was cancelled, and never wake the agent (A-B-A)."""

import asyncio
import contextlib
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable

from sqlalchemy import func, select

from gpupool.server.db.engine import Database
from gpupool.server.db.notify import ChangeListener
from gpupool.server.db.tables import (
    AllocationNodeRow,
    AllocationRow,
    DeviceRow,
    JobEventRow,
    JobRow,
    Meta,
    NodeRow,
)

log = logging.getLogger(__name__)
Stamp = tuple[object, ...]
Digests = dict[str, int]


# one statement on a plain connection: each API process runs it five times a second, and an
# ORM session around four queries cost 6x the CPU (383 vs 66 µs here; it was a quarter of an
# idle worker's time at 1,000 agents)
STAMP = select(
    select(Meta.generation).where(Meta.id == 1).scalar_subquery(),
    select(Meta.nodes_version).where(Meta.id == 1).scalar_subquery(),
    select(func.max(JobEventRow.id)).scalar_subquery(),
)  # a card-mode order bumps nodes_version (hybrid_modes): no scan of every card for it


def read_stamp(db: Database) -> Stamp:
    with db.read_engine.connect() as conn:
        return tuple(conn.execute(STAMP).one())


def digest_part(
    alloc_id: int, generation: int, job_state: str, idle_release_at: float | None
) -> tuple[object, ...]:
    """What of one live allocation its node's orders show: an idle session's warning (its
    release time, ``interactive.culling``) only while one stands."""
    if idle_release_at is None:
        return alloc_id, generation, job_state
    return alloc_id, generation, job_state, idle_release_at


def node_digest(
    allocations: Iterable[tuple[object, ...]],
    state: str | None,
    modes: Iterable[tuple[int, str]],
) -> int:
    """A digest of what one node's orders are made of: its live allocations (``digest_part``:
    id, generation, job state, an idle warning), its state and the card modes ordered on it."""
    parts: list[tuple] = [("a", *a) for a in allocations]
    if state is not None:
        parts.append(("n", state))
    parts.extend(("m", *m) for m in modes)
    return hash(tuple(sorted(parts, key=repr)))


def read_digests(db: Database) -> Digests:
    """Per node, ``node_digest`` of what its orders are made of."""
    allocations: dict[str, list[tuple[object, ...]]] = defaultdict(list)
    modes: dict[str, list[tuple[int, str]]] = defaultdict(list)
    with db.read() as s:
        live = s.execute(
            select(
                AllocationNodeRow.node,
                AllocationRow.id,
                AllocationRow.generation,
                JobRow.state,
                AllocationRow.idle_release_at,
            )
            .join(AllocationRow, AllocationRow.id == AllocationNodeRow.allocation_id)
            .join(JobRow, JobRow.id == AllocationRow.job_id)
            .where(AllocationRow.state == "active")
        ).all()
        for node, alloc_id, generation, job_state, release_at in live:
            allocations[node].append(digest_part(alloc_id, generation, job_state, release_at))
        states = {n: st for n, st in s.execute(select(NodeRow.name, NodeRow.state))}
        wanted = s.execute(
            select(DeviceRow.node, DeviceRow.index, DeviceRow.want_mode).where(
                DeviceRow.want_mode.is_not(None)
            )
        ).all()
        for node, index, mode in wanted:
            modes[node].append((index, str(mode)))  # never None (the query's filter)
    nodes = set(allocations) | set(states) | set(modes)
    return {n: node_digest(allocations[n], states.get(n), modes[n]) for n in nodes}


class ChangeFeed:
    def __init__(
        self,
        read: Callable[[], Stamp],
        digests: Callable[[], Digests],
        poll_s: float = 0.2,
        listener: ChangeListener | None = None,
    ):
        self._read = read
        self._read_digests = digests
        self.poll_s = poll_s
        self._listener = listener  # None: poll every poll_s
        self._polled_at = 0.0
        self.stamp: Stamp = ()
        self.digests: Digests = {}
        self.epoch = 0  # how many times ``digests`` was read
        # (node, digest of the state its answer was read from, event loop, future)
        self._waiters: list[tuple[str, int, asyncio.AbstractEventLoop, asyncio.Future]] = []
        self._lock = threading.Lock()
        self._started = False
        self._stop = threading.Event()

    def start(self) -> None:
        with self._lock:
            if self._started or self._stop.is_set():
                return
            self._started = True
        self.stamp, self.digests = self._read(), self._read_digests()
        self.epoch += 1
        threading.Thread(target=self._run, name="gpupool-change-feed", daemon=True).start()

    @property
    def started(self) -> bool:
        return self._started

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def stop(self) -> None:
        """No more polling; every waiting request is answered now, and later ones at once
        (the server is shutting down)."""
        self._stop.set()
        self._wake(lambda node, digest: True)

    def _run(self) -> None:
        try:
            while True:
                if self._listener is None:
                    self._stop.wait(self.poll_s)
                else:
                    self._listener.wait(self._stop)
                    # at most one read per poll_s however many commits notify (a burst of
                    # submissions is hundreds): what came meanwhile is in that read
                    self._stop.wait(max(0.0, self._polled_at + self.poll_s - time.monotonic()))
                    self._listener.drain()
                self._polled_at = time.monotonic()
                if self._stop.is_set():
                    return
                try:
                    self.poll()
                except Exception as exc:  # the database away: waiters time out, ask again
                    log.warning("change feed: %s", exc)
        finally:
            if self._listener is not None:
                self._listener.close()

    def poll(self) -> None:
        """Read the stamp; when it moved, read every node's digest and wake the requests
        waiting on a node whose digest is not the one their answer was read at."""
        stamp = self._read()
        if stamp == self.stamp:
            return
        digests = self._read_digests()
        self.stamp, self.digests = stamp, digests
        self.epoch += 1
        self._wake(lambda node, digest: digests.get(node) != digest)

    def _wake(self, changed: Callable[[str, int], bool]) -> None:
        with self._lock:
            woken = [w for w in self._waiters if changed(w[0], w[1])]
            self._waiters = [w for w in self._waiters if not changed(w[0], w[1])]
        for _, _, loop, fut in woken:
            with contextlib.suppress(RuntimeError):  # a closed event loop: nobody waits
                loop.call_soon_threadsafe(_settle, fut)

    def _newer(self, node: str, digest: int, epoch: int) -> bool:
        """The feed read the digests since ``epoch`` and its read differs from ``digest``:
        that read may be newer than the answer's, so the answer is asked for again."""
        return self._stop.is_set() or (self.epoch != epoch and self.digests.get(node) != digest)

    async def changed(self, node: str, digest: int, epoch: int, timeout_s: float) -> bool:
        """Return when the node's state differs from the one whose ``node_digest`` is
        ``digest`` (True), or after ``timeout_s`` with no sign of a change (False).
        ``epoch``: the feed's ``epoch`` read before that state was (a digest the feed read
        before it says nothing about the answer)."""
        self.start()
        if timeout_s <= 0 or self._newer(node, digest, epoch):
            return True
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        entry = (node, digest, loop, fut)
        with self._lock:
            self._waiters.append(entry)
        if self._newer(node, digest, epoch):  # read meanwhile
            _settle(fut)
        try:
            await asyncio.wait_for(fut, timeout_s)
            return True
        except TimeoutError:
            with self._lock:
                self._waiters = [w for w in self._waiters if w[3] is not fut]
            return False


def _settle(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)

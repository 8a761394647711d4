"""Wakes long-polling agents when their node's orders may have changed.

An agent's orders change when an allocation on its node comes, goes or moves on (its
generation), when its job changes state, when the node's state changes, or when one of its
cards is ordered into another mode. Those writes happen in any process sharing the database,
so each API process polls one cheap stamp (``poll_s``, 0.2 s by default: the commit
generation, ``nodes_version``, the newest job event, the newest card-mode order) in one thread;
when it moves, one query reads a digest of every node's orders-relevant state, and only the
requests waiting on a node whose digest changed are woken. A submission, or a change on
another node, wakes nobody: 1,000 waiting agents are not 1,000 recomputations per commit."""

import asyncio
import contextlib
import logging
import threading
from collections import defaultdict
from collections.abc import Callable

from sqlalchemy import func, select

from gpupool.server.db.engine import Database
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


def read_stamp(db: Database) -> Stamp:
    with db.read() as s:
        meta = s.execute(select(Meta.generation, Meta.nodes_version).where(Meta.id == 1)).one()
        events = s.execute(select(func.max(JobEventRow.id))).scalar()
        modes = s.execute(select(func.max(DeviceRow.want_since))).scalar()
    return (*meta, events, modes)


def read_digests(db: Database) -> Digests:
    """Per node, a digest of what its orders are made of."""
    parts: dict[str, list[tuple]] = defaultdict(list)
    with db.read() as s:
        live = s.execute(
            select(AllocationNodeRow.node, AllocationRow.id, AllocationRow.generation, JobRow.state)
            .join(AllocationRow, AllocationRow.id == AllocationNodeRow.allocation_id)
            .join(JobRow, JobRow.id == AllocationRow.job_id)
            .where(AllocationRow.state == "active")
        ).all()
        for node, *rest in live:
            parts[node].append(("a", *rest))
        for name, state in s.execute(select(NodeRow.name, NodeRow.state)).all():
            parts[name].append(("n", state))
        modes = s.execute(
            select(DeviceRow.node, DeviceRow.index, DeviceRow.want_mode).where(
                DeviceRow.want_mode.is_not(None)
            )
        ).all()
        for node, index, mode in modes:
            parts[node].append(("m", index, mode))
    return {node: hash(tuple(sorted(p, key=repr))) for node, p in parts.items()}


class ChangeFeed:
    def __init__(
        self,
        read: Callable[[], Stamp],
        digests: Callable[[], Digests],
        poll_s: float = 0.2,
    ):
        self._read = read
        self._read_digests = digests
        self.poll_s = poll_s
        self.stamp: Stamp = ()
        self.digests: Digests = {}
        # (node, digest it was answered at, event loop, future)
        self._waiters: list[tuple[str, int | None, asyncio.AbstractEventLoop, asyncio.Future]] = []
        self._lock = threading.Lock()
        self._started = False
        self._stop = threading.Event()

    def start(self) -> None:
        with self._lock:
            if self._started or self._stop.is_set():
                return
            self._started = True
        self.stamp, self.digests = self._read(), self._read_digests()
        threading.Thread(target=self._run, name="gpupool-change-feed", daemon=True).start()

    @property
    def started(self) -> bool:
        return self._started

    def stop(self) -> None:
        """No more polling; every waiting request is answered now, and later ones at once
        (the server is shutting down)."""
        self._stop.set()
        self._wake(lambda node, digest: True)

    def _run(self) -> None:
        while not self._stop.wait(self.poll_s):
            try:
                stamp = self._read()
                if stamp == self.stamp:
                    continue
                digests = self._read_digests()
            except Exception as exc:  # the database away: waiters time out and ask again
                log.warning("change feed: %s", exc)
                continue
            self.stamp, self.digests = stamp, digests
            self._wake(lambda node, digest, now=digests: now.get(node) != digest)

    def _wake(self, changed: Callable[[str, int | None], bool]) -> None:
        with self._lock:
            woken = [w for w in self._waiters if changed(w[0], w[1])]
            self._waiters = [w for w in self._waiters if not changed(w[0], w[1])]
        for _, _, loop, fut in woken:
            with contextlib.suppress(RuntimeError):  # a closed event loop: nobody waits
                loop.call_soon_threadsafe(_settle, fut)

    def digest(self, node: str) -> int | None:
        """The node's digest now (read before computing an answer to wait on)."""
        self.start()
        return self.digests.get(node)

    async def changed(self, node: str, digest: int | None, timeout_s: float) -> None:
        """Return when the node's digest differs from ``digest``, or after ``timeout_s``."""
        self.start()
        if timeout_s <= 0 or self._stop.is_set() or self.digests.get(node) != digest:
            return
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        entry = (node, digest, loop, fut)
        with self._lock:
            self._waiters.append(entry)
        if self._stop.is_set() or self.digests.get(node) != digest:  # changed meanwhile
            _settle(fut)
        try:
            await asyncio.wait_for(fut, timeout_s)
        except TimeoutError:
            with self._lock:
                self._waiters = [w for w in self._waiters if w[3] is not fut]


def _settle(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)

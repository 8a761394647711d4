"""Wakes long-polling agents when anything their orders depend on may have changed.

An agent's orders change when the scheduler commits (``generation``), when a job changes state
(a new ``job_events`` row: cancelled, finished, preempted...), when nodes change
(``nodes_version``) or a card is ordered into another mode (``devices.want_since``). Those
writes happen in any process sharing the database, so each API process polls one cheap stamp
of them (``poll_s``, 0.2 s by default) in one thread and wakes the requests waiting on it; an
idle pool costs one small query per poll per process, not one request per agent per second."""

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable

from sqlalchemy import func, select

from gpupool.server.db.engine import Database
from gpupool.server.db.tables import DeviceRow, JobEventRow, Meta

log = logging.getLogger(__name__)
Stamp = tuple[object, ...]


def read_stamp(db: Database) -> Stamp:
    with db.read() as s:
        meta = s.execute(select(Meta.generation, Meta.nodes_version).where(Meta.id == 1)).one()
        events = s.execute(select(func.max(JobEventRow.id))).scalar()
        modes = s.execute(select(func.max(DeviceRow.want_since))).scalar()
    return (*meta, events, modes)


class ChangeFeed:
    def __init__(self, read: Callable[[], Stamp], poll_s: float = 0.2):
        self._read = read
        self.poll_s = poll_s
        self.stamp: Stamp = ()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future]] = []
        self._lock = threading.Lock()
        self._started = False
        self._stop = threading.Event()

    def start(self) -> None:
        with self._lock:
            if self._started or self._stop.is_set():
                return
            self._started = True
        self.stamp = self._read()
        threading.Thread(target=self._run, name="gpupool-change-feed", daemon=True).start()

    def stop(self) -> None:
        """No more polling; every waiting request is answered now, and later ones at once
        (the server is shutting down)."""
        self._stop.set()
        self._wake()

    def _run(self) -> None:
        while not self._stop.wait(self.poll_s):
            try:
                stamp = self._read()
            except Exception as exc:  # the database away: waiters time out and ask again
                log.warning("change feed: %s", exc)
                continue
            if stamp != self.stamp:
                self.stamp = stamp
                self._wake()

    def _wake(self) -> None:
        with self._lock:
            waiters, self._waiters = self._waiters, []
        for loop, fut in waiters:
            with contextlib.suppress(RuntimeError):  # a closed event loop: nobody waits
                loop.call_soon_threadsafe(_settle, fut)

    async def changed_since(self, stamp: Stamp, timeout_s: float) -> None:
        """Return when the stamp differs from ``stamp``, or after ``timeout_s``."""
        self.start()
        if self.stamp != stamp or timeout_s <= 0 or self._stop.is_set():
            return
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        with self._lock:
            self._waiters.append((loop, fut))
        if self.stamp != stamp or self._stop.is_set():  # changed (or stopped) meanwhile
            _settle(fut)
        try:
            await asyncio.wait_for(fut, timeout_s)
        except TimeoutError:
            with self._lock:
                self._waiters = [w for w in self._waiters if w[1] is not fut]


def _settle(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)

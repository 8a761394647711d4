"""Group commit: one writer thread commits the writes of many concurrent requests in one
transaction.

Hot write paths (job submission) hand a function of a session to ``GroupCommit.run`` and await
its result. The writer thread takes everything queued, runs it in one ``Database.write()``
transaction and commits once, so a burst of submissions costs one commit, one hold of the
writer lock and no request threads competing for it. If any function in a batch raises (a
conflicting idempotency key, a constraint), the batch is rolled back and every function runs
again in a transaction of its own, so one bad request never fails or changes its neighbours.
The functions must therefore only touch the database through the batch they are given.
Rows a function does not need an answer from (events, audit records) go to ``Batch.later``
and are inserted with one multi-row statement per table at the end of the batch.
"""

import asyncio
import contextlib
import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
from sqlalchemy.orm import Session
from sqlalchemy.sql.base import Executable

from gpupool.server.db.engine import Database

T = TypeVar("T")
log = logging.getLogger("gpupool.group_commit")


class Batch:
    """What a function in a group transaction gets: the session, and ``later`` for rows
    inserted together at the end (before the commit)."""

    def __init__(self, session: Session):
        self.session = session
        self._later: dict[Executable, list[dict[str, Any]]] = {}
        self.memo: dict[Any, Any] = {}  # what this transaction read once for its functions

    def later(self, statement: Executable, row: dict[str, Any]) -> None:
        self._later.setdefault(statement, []).append(row)

    def flush(self) -> None:
        for statement, rows in self._later.items():
            self.session.execute(statement, rows)
        self._later.clear()


@dataclass(slots=True)
class _Item:
    fn: Callable[[Batch], Any]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]
    ok: bool = False
    value: Any = None
    wake: bool = True  # the scheduler is woken after the commit


def _deliver(items: list[_Item]) -> None:
    """On the event loop: hand each waiter its result (a cancelled waiter is skipped)."""
    for item in items:
        if item.future.done():
            continue
        if item.ok:
            item.future.set_result(item.value)
        else:
            item.future.set_exception(item.value)


class GroupCommit:
    def __init__(
        self,
        db: Database,
        *,
        max_batch: int = 256,
        after_commit: Callable[[], None] | None = None,
    ):
        self.db = db
        self.max_batch = max_batch
        self.after_commit = after_commit
        self._queue: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self.batches = 0
        self.items = 0

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name="gpupool-writer", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Commit what is queued, then end the writer thread."""
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(timeout=30)
            self._thread = None

    async def run(self, fn: Callable[[Batch], T], wake: bool = True) -> T:
        """Run ``fn(batch)`` in the next group transaction; its result once committed.
        ``wake``: the write may change what the scheduler decides (a heartbeat does not)."""
        if self._thread is None:  # an app used without its lifespan: a plain transaction
            return await anyio.to_thread.run_sync(self._alone, fn, wake)
        loop = asyncio.get_running_loop()
        item = _Item(fn, loop, loop.create_future(), wake=wake)
        self._queue.put(item)
        return await item.future

    def _alone(self, fn: Callable[[Batch], T], wake: bool = True) -> T:
        (value,) = self._transaction([fn])
        if self.after_commit is not None and wake:
            self.after_commit()
        return value

    def _transaction(self, fns: list[Callable[[Batch], Any]]) -> list[Any]:
        """Run ``fns`` in one write transaction, insert their ``later`` rows, commit."""
        with self.db.write() as s:
            group = Batch(s)
            values = [fn(group) for fn in fns]
            group.flush()
        return values

    def _serve(self) -> None:
        stopping = False
        while not stopping:
            first = self._queue.get()
            if first is None:
                break
            batch = [first]
            while len(batch) < self.max_batch:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    stopping = True
                    break
                batch.append(nxt)
            self._finish(batch)
        # a waiter that queued behind the stop sentinel still gets its answer
        while True:
            try:
                late = self._queue.get_nowait()
            except queue.Empty:
                return
            if late is not None:
                self._finish([late])

    def _finish(self, batch: list[_Item]) -> None:
        """Commit ``batch``, wake the scheduler, and answer every waiter on its loop."""
        self._commit(batch)
        self.batches += 1
        self.items += len(batch)
        if self.after_commit is not None and any(i.ok and i.wake for i in batch):
            self.after_commit()
        by_loop: dict[asyncio.AbstractEventLoop, list[_Item]] = {}
        for item in batch:
            by_loop.setdefault(item.loop, []).append(item)
        for loop, items in by_loop.items():
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
                loop.call_soon_threadsafe(_deliver, items)

    def _commit(self, batch: list[_Item]) -> None:
        try:
            values = self._transaction([item.fn for item in batch])
        except Exception as exc:
            if len(batch) == 1:
                batch[0].ok, batch[0].value = False, exc
                return
            log.debug("a batch of %d failed (%s); committing one by one", len(batch), exc)
            for item in batch:
                self._commit([item])
            return
        for item, value in zip(batch, values, strict=True):
            item.ok, item.value = True, value

"""A person's activity in a session, written down for idle culling (``culling``): each time
one of its terminals is opened or attached, or typed into (bytes, a signal, an end of input),
the allocation's ``input_at`` — at most once every ``session_input_stamp_s`` per session and
API process, so typing costs no write per key, and at once for the first keystroke after a
quiet stretch (the one that withdraws an idle warning). A notebook's proxy can stamp the
same way (``InputStamps.touch``)."""

import logging
import time

from fastapi.concurrency import run_in_threadpool
from sqlalchemy import or_, update

from gpupool.server.db.engine import Database
from gpupool.server.db.tables import AllocationRow

log = logging.getLogger(__name__)
MAX_KEPT = 4096  # sessions remembered per process before the stale ones are forgotten


class InputStamps:
    def __init__(self, db: Database, every_s: float):
        self.db, self.every_s = db, every_s
        self._written: dict[int, float] = {}  # allocation -> when its input was last written

    def due(self, alloc_id: int, now: float) -> bool:
        return now - self._written.get(alloc_id, float("-inf")) >= self.every_s

    async def touch(self, alloc_id: int) -> None:
        """A person acted in session ``alloc_id`` now."""
        now = time.time()
        if not self.due(alloc_id, now):
            return
        self._written[alloc_id] = now
        if len(self._written) > MAX_KEPT:
            self._written = {a: t for a, t in self._written.items() if not self.due(a, now)}
        try:
            await run_in_threadpool(self.write, alloc_id, now)
        except Exception as exc:  # best effort: a database hiccup must not cut the terminal
            self._written.pop(alloc_id, None)  # the next keystroke tries again
            log.warning("session allocation %s: its input not written down: %s", alloc_id, exc)

    def write(self, alloc_id: int, now: float) -> None:
        with self.db.write() as s:
            s.execute(
                update(AllocationRow)
                .where(
                    AllocationRow.id == alloc_id,
                    AllocationRow.state == "active",
                    or_(AllocationRow.input_at.is_(None), AllocationRow.input_at < now),
                )
                .values(input_at=now)
            )

"""Change notifications from PostgreSQL: a connection that ``LISTEN``s on the channel the
triggers of migration 0012 notify (a commit that moves the allocation generation or
``nodes_version``, or adds a job event), so an API process's change feed reads its stamp when
something changed instead of five times a second (polling was about 0.8% of a core of two
idle API workers at 1,000 agents; docs/performance-control-plane.md).

A notification is only a hint: the feed still reads the stamp and compares. The connection is
its own, in autocommit (a ``LISTEN`` inside an open transaction hears nothing), taken out of
the engine's pool so it connects as every other connection does. When it cannot connect, or
drops, ``wait`` returns at once after each attempt so the feed reads the stamp (anything
notified meanwhile was missed), and tries again at most once a second."""

import contextlib
import logging
import threading
import time
from typing import Any

from sqlalchemy.engine import Engine

CHANNEL = "gpupool_changes"
log = logging.getLogger(__name__)


class ChangeListener:
    """``wait``: block until a change is notified, ``fallback_s`` passes, or ``stop`` is set."""

    def __init__(self, engine: Engine, fallback_s: float = 10.0, tick_s: float = 1.0):
        self.engine = engine
        self.fallback_s = fallback_s
        self.tick_s = tick_s  # how soon ``stop`` is noticed
        self._conn: Any = None
        self._failed_at = 0.0
        self.connects = 0

    def wait(self, stop: threading.Event) -> None:
        deadline = time.monotonic() + self.fallback_s
        while not stop.is_set() and (left := deadline - time.monotonic()) > 0:
            if self._conn is None:
                if time.monotonic() - self._failed_at < self.tick_s:
                    stop.wait(self.tick_s)
                    continue
                self._connect()
                return  # (re)connected or not: whatever changed before is read now
            try:
                for _ in self._conn.notifies(timeout=min(self.tick_s, left), stop_after=1):
                    return
            except Exception as exc:  # the database went away: connect again
                if not stop.is_set():  # (a server stopping: its database may go first)
                    log.warning("change notifications lost (%s); connecting again", exc)
                self.close()
                self._failed_at = time.monotonic()
                return

    def drain(self) -> None:
        """Forget the notifications already here (the read about to happen covers them)."""
        if self._conn is None:
            return
        try:
            for _ in self._conn.notifies(timeout=0):
                pass
        except Exception:  # noticed by the next ``wait``
            pass

    def _connect(self) -> None:
        try:
            raw = self.engine.raw_connection()
        except Exception as exc:
            self._failed(exc)
            return
        conn: Any = raw.driver_connection  # psycopg's own connection
        raw.detach()  # ours alone, closed by ``close``, never handed back to the pool
        try:
            conn.rollback()  # the pool's ping may have opened a transaction
            conn.autocommit = True
            conn.execute(f"LISTEN {CHANNEL}")
        except Exception as exc:  # not kept: closed, not left open on every retry
            with contextlib.suppress(Exception):
                conn.close()
            self._failed(exc)
            return
        self._conn = conn
        self.connects += 1

    def _failed(self, exc: Exception) -> None:
        log.warning("cannot listen for change notifications (%s); polling meanwhile", exc)
        self._failed_at = time.monotonic()

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

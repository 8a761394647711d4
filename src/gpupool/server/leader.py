"""Who runs the scheduler. One process holds the lead: on PostgreSQL a session advisory lock
(released by the database the moment the holder's connection dies), on SQLite an exclusive
file lock next to the database (released by the kernel when the holder dies). Taking the lead
bumps ``leader_epoch``; every cycle commit is fenced on it (see ``commit.py``)."""

import contextlib
import fcntl
import logging
import os
import socket
import threading
import time
from pathlib import Path

from sqlalchemy import Connection, create_engine, select, text, update
from sqlalchemy.pool import NullPool

from gpupool.server.db.engine import Database
from gpupool.server.db.tables import Meta

ADVISORY_KEY = 0x6770_7570  # "gpup"
log = logging.getLogger("gpupool.leader")


class Leadership:
    def __init__(self, db: Database, name: str | None = None):
        self.db = db
        self.name = name or f"{socket.gethostname()}:{os.getpid()}"
        self.epoch: int | None = None
        self.since = 0.0  # when this process took the lead (wall clock)
        self._file: int | None = None
        self._conn: Connection | None = None
        self._releasing = threading.Lock()

    @property
    def held(self) -> bool:
        return self.epoch is not None

    def try_acquire(self) -> bool:
        """Take the lead if nobody holds it; returns whether this process now leads. The
        database being away is "not now", never an exception: the caller asks again (a 5 s
        PostgreSQL outage raised here once and stopped scheduling for good)."""
        if self.held:
            return self.check()
        try:
            got = self._lock_sqlite() if self.db.is_sqlite else self._lock_postgres()
            if not got:
                return False
            self.since = time.time()
            with self.db.write() as s:
                s.execute(
                    update(Meta)
                    .where(Meta.id == 1)
                    .values(
                        leader_epoch=Meta.leader_epoch + 1,
                        leader_name=self.name,
                        leader_since=self.since,
                    )
                )
                epoch = s.execute(select(Meta.leader_epoch).where(Meta.id == 1)).scalar_one()
        except Exception as exc:  # OperationalError and the like: the lock too goes back
            log.warning("cannot take the scheduler lead now: %s", str(exc).splitlines()[0][:300])
            self.release()
            return False
        self.epoch = epoch
        return True

    def check(self) -> bool:
        """Whether the lock is still ours (a PostgreSQL connection can drop)."""
        if not self.held:
            return False
        if self._conn is not None:
            try:
                self._conn.execute(text("SELECT 1"))
                self._conn.commit()
            except Exception:
                self.release()
                return False
        return True

    def release(self) -> None:
        """Give the lead back. The scheduler's thread (a lost lead, a failed take) and the
        server's stop may both call it: each file and connection is taken once, under a lock,
        so none is closed twice (a second close of a reused descriptor closes another's)."""
        with self._releasing:
            self.epoch = None
            fd, self._file = self._file, None
            conn, self._conn = self._conn, None
        if fd is not None:
            os.close(fd)  # closing drops the flock
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def _lock_sqlite(self) -> bool:
        path = Path(self.db.url.removeprefix("sqlite:///") + ".leader")
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self._file = fd
        return True

    def _lock_postgres(self) -> bool:
        engine = create_engine(self.db.url, poolclass=NullPool)
        conn = engine.connect()
        try:
            lock = text("SELECT pg_try_advisory_lock(:k)")
            got = conn.execute(lock, {"k": ADVISORY_KEY}).scalar()
            conn.commit()
        except Exception:
            conn.close()
            raise
        if not got:
            conn.close()
            return False
        self._conn = conn
        return True

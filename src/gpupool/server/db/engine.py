"""Engines, sessions and migrations.

SQLite runs in WAL mode with ``synchronous=NORMAL`` (a committed transaction survives a killed
process; only a power cut can lose the last few) and two engines on one file: writers begin
with ``BEGIN IMMEDIATE`` so concurrent read-modify-write transactions queue on the busy
timeout instead of failing to upgrade, readers begin deferred and never block writers.
PostgreSQL uses one engine at READ COMMITTED; state changes are conditional updates.
"""

import fcntl
import os
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker

from gpupool.extras import require
from gpupool.server.db.files import private_dir, private_sqlite_file

MIGRATIONS = Path(__file__).with_name("migrations")


def need_driver(url: str) -> None:
    """A PostgreSQL URL needs psycopg (gpupool[postgres]): said in one line, before SQLAlchemy
    fails on the import."""
    if url.startswith(("postgresql+psycopg:", "postgresql:", "postgres:")):
        require("psycopg", "a PostgreSQL database")


def _sqlite_engine(url: str, immediate: bool) -> Engine:
    engine = create_engine(
        url, connect_args={"check_same_thread": False, "timeout": 30}, pool_size=20
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record) -> None:
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute("PRAGMA busy_timeout=30000")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


class Database:
    """Sessions for the state of record. ``write()`` commits on success, rolls back on error."""

    def __init__(self, url: str):
        self.url = url
        self.is_sqlite = url.startswith("sqlite")
        self._lock_path: Path | None = None
        if self.is_sqlite:
            path = url.removeprefix("sqlite:///")
            if path and path != ":memory:":
                private_dir(Path(path).parent)
                private_sqlite_file(Path(path))
                self._lock_path = Path(path + ".write-lock")
            self.engine = _sqlite_engine(url, immediate=True)
            self.read_engine = _sqlite_engine(url, immediate=False)
        else:
            need_driver(url)
            self.engine = create_engine(url, pool_size=20, max_overflow=20, pool_pre_ping=True)
            self.read_engine = self.engine
        # one writer at a time in this process (see ``write`` and ``exclusive``)
        self._writer: AbstractContextManager[object] = threading.RLock()
        self._lock_fd: int | None = None
        self._lock_depth = 0  # guarded by ``_writer``
        self._write = sessionmaker(self.engine, expire_on_commit=False)
        self._read = sessionmaker(self.read_engine, expire_on_commit=False)

    @contextmanager
    def write(self) -> Iterator[Session]:
        # SQLite has one writer at a time; queueing this process's writers on a lock is much
        # faster than letting them poll SQLite's busy handler (which sleeps up to 100 ms). On
        # PostgreSQL the lock serialises only this process's writers (other processes still
        # write concurrently); see ``exclusive`` for why that pays.
        with self._writer, self._across_processes(), self._write() as session, session.begin():
            yield session

    @contextmanager
    def _across_processes(self) -> Iterator[None]:
        """SQLite: writers of several processes (API workers) queue on a file lock. SQLite's
        own busy handler polls with sleeps of up to 100 ms, and a process that commits often
        (a group-commit writer) could starve another's occasional big commit for seconds."""
        if self._lock_path is None or self._lock_depth:  # (a nested write holds it already)
            yield
            return
        if self._lock_fd is None:
            self._lock_fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
        self._lock_depth += 1
        try:
            yield
        finally:
            self._lock_depth -= 1
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    def exclusive(self) -> AbstractContextManager[object]:
        """Hold off this process's writers: the scheduler decides a cycle without dozens of
        request threads competing for the interpreter, then commits."""
        return self._writer

    @contextmanager
    def read(self) -> Iterator[Session]:
        with self._read() as session, session.begin():
            yield session

    def migrate(self) -> None:
        """Bring the schema to the newest revision (from empty, or from an older one)."""
        with self.engine.connect() as conn:
            cfg = alembic_config(self.url)
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")
            conn.commit()

    def dispose(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
        self.engine.dispose()
        if self.read_engine is not self.engine:
            self.read_engine.dispose()


def alembic_config(url: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg

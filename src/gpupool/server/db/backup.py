"""Backups of the state of record and their restore. SQLite is copied through its online
backup API (a consistent copy while servers run); PostgreSQL through its own tools, pg_dump's
custom format and a restore in one transaction (a failed restore leaves the database as it
was). A restore migrates the restored schema to this version and gives the database a new
restore epoch, so agents follow its orders at once rather than refusing them as older than
what they already acted on (docs/operations.md, "Backup and restore")."""

import shutil
import sqlite3
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import select, update
from sqlalchemy.engine import make_url

from gpupool.extras import require
from gpupool.server.db.engine import Database
from gpupool.server.db.files import private_sqlite_file
from gpupool.server.db.tables import Meta

# a scheduler that proved it leads within this many seconds is taken to be running
RUNNING_WITHIN_S = 15.0


class BackupError(Exception):
    """What went wrong, in one line for the operator."""


@dataclass(frozen=True)
class Restored:
    generation: int  # the restored database's scheduler generation
    epoch: str  # its new restore epoch


def _sqlite_path(url: str) -> Path:
    return Path(url.removeprefix("sqlite:///"))


def _libpq_url(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise BackupError(
            f"{name} is not installed: PostgreSQL's client tools do PostgreSQL backups "
            "(apt-get install postgresql-client, the server's major version or newer)"
        )
    return found


def _run(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines() or ["(no output)"]
        raise BackupError(f"{Path(argv[0]).name} failed: {lines[-1]}")


def backup(url: str, to: Path) -> None:
    """Write a backup of the database at ``url`` to ``to`` (refused if it exists)."""
    if to.exists():
        raise BackupError(f"{to} exists: give a new file")
    if url.startswith("sqlite"):
        path = _sqlite_path(url)
        if not path.exists():
            raise BackupError(f"no database at {path}")
        private_sqlite_file(to)
        with sqlite3.connect(path) as source, sqlite3.connect(to) as copy:
            source.backup(copy)
        return
    argv = [_tool("pg_dump"), "--format=custom", "--no-owner", "--no-acl", f"--file={to}"]
    try:
        _run([*argv, f"--dbname={_libpq_url(url)}"])
    except BackupError:
        to.unlink(missing_ok=True)
        raise


def leading_scheduler(url: str, now: float) -> str | None:
    """The scheduler that proved it leads within ``RUNNING_WITHIN_S``, if any (a restore under
    running servers would be overwritten by their next commits)."""
    db = Database(url)
    try:
        with db.read() as s:
            row = s.execute(select(Meta.leader_name, Meta.leader_seen_at)).first()
    except Exception:  # an empty or unreadable database: nothing runs on it
        return None
    finally:
        db.dispose()
    if row is not None and now - row.leader_seen_at < RUNNING_WITHIN_S:
        return f"{row.leader_name} ({now - row.leader_seen_at:.0f} s ago)"
    return None


def restore(url: str, source: Path, *, force: bool = False) -> Restored:
    """Replace the database at ``url`` with the backup ``source``, migrate it and give it a
    new restore epoch. Refused while a scheduler leads on it, unless ``force``."""
    if not source.is_file():
        raise BackupError(f"no backup at {source}")
    leader = None if force else leading_scheduler(url, time.time())
    if leader is not None:
        raise BackupError(
            f"a scheduler leads on this database: {leader}; stop every server first "
            "(--force restores anyway)"
        )
    if url.startswith("sqlite"):
        _restore_sqlite(_sqlite_path(url), source)
    else:
        _restore_postgres(url, source)
    db = Database(url)
    try:
        db.migrate()  # a backup of an older version
        epoch = uuid.uuid4().hex
        with db.write() as s:
            s.execute(update(Meta).where(Meta.id == 1).values(restore_epoch=epoch))
            generation = s.execute(select(Meta.generation)).scalar_one()
    finally:
        db.dispose()
    return Restored(generation, epoch)


def _restore_sqlite(path: Path, source: Path) -> None:
    try:
        with sqlite3.connect(f"file:{source}?mode=ro", uri=True) as backup_db:
            backup_db.execute("SELECT count(*) FROM scheduler_meta").fetchone()
            path.parent.mkdir(parents=True, exist_ok=True)
            private_sqlite_file(path)
            with sqlite3.connect(path) as target:
                backup_db.backup(target)
    except sqlite3.DatabaseError as exc:
        raise BackupError(f"{source} is not a gpupool SQLite backup: {exc}") from None


def _restore_postgres(url: str, source: Path) -> None:
    """Every table of the schema dropped and the backup's recreated, in one transaction."""
    psycopg = require("psycopg", "restoring a PostgreSQL database")

    libpq = _libpq_url(url)
    with psycopg.connect(libpq) as conn:
        tables = [
            str(row[0])
            for row in conn.execute(
                "SELECT c.oid::regclass FROM pg_class c JOIN pg_namespace n ON n.oid = "
                "c.relnamespace WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p')"
            )
        ]
        functions = [  # the change feed's trigger function
            str(row[0])
            for row in conn.execute(
                "SELECT p.oid::regprocedure FROM pg_proc p JOIN pg_namespace n ON n.oid = "
                "p.pronamespace WHERE n.nspname = current_schema()"
            )
        ]
    with tempfile.TemporaryDirectory(prefix="gpupool-restore-") as folder:
        script = Path(folder) / "restore.sql"
        _run([_tool("pg_restore"), "--no-owner", "--no-acl", f"--file={script}", str(source)])
        drop = Path(folder) / "drop.sql"
        # names as PostgreSQL itself quoted them (regclass, regprocedure)
        drop.write_text(
            "".join(f"DROP TABLE IF EXISTS {name} CASCADE;\n" for name in tables)
            + "".join(f"DROP FUNCTION IF EXISTS {name} CASCADE;\n" for name in functions)
        )
        psql = [_tool("psql"), "-X", "--quiet", "--single-transaction", "-v", "ON_ERROR_STOP=1"]
        _run([*psql, f"--dbname={libpq}", "-f", str(drop), "-f", str(script)])

"""A throwaway PostgreSQL 15 server on a free loopback port, run as the ``postgres`` user
when the tests run as root (the server refuses root). Every test gets a fresh database."""

import contextlib
import glob
import itertools
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from gpupool.server.process import free_port


def _binary(name: str) -> str:
    found = shutil.which(name) or next(
        iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)), None
    )
    if found is None:
        raise RuntimeError(
            f"PostgreSQL's {name} is not installed: apt-get install postgresql "
            "(.ci/run does this) — the database tests run against a real server"
        )
    return found


def _as_postgres(args: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *args] if os.geteuid() == 0 else args


@dataclass
class PostgresServer:
    port: int
    data: Path
    _names: itertools.count = field(default_factory=lambda: itertools.count(1))

    @property
    def admin_url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def url(self, database: str) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """A fresh, empty database; returns its SQLAlchemy URL."""
        import psycopg

        name = f"t{os.getpid()}_{next(self._names)}"
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    @classmethod
    def start(cls) -> "PostgresServer":
        root = Path(tempfile.mkdtemp(prefix="gpupool-pg-"))
        data = root / "data"
        data.mkdir()
        if os.geteuid() == 0:
            shutil.chown(root, "postgres")
            shutil.chown(data, "postgres")
        subprocess.run(
            _as_postgres([_binary("initdb"), "-D", str(data), "-A", "trust", "-U", "postgres"]),
            check=True,
            capture_output=True,
        )
        server = cls(free_port(), data)
        server.resume()
        return server

    def resume(self) -> None:
        """Start (again) on the same data and port."""
        options = (
            f"-p {self.port} -k {self.data} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=300"
        )
        pg_ctl = [_binary("pg_ctl"), "-D", str(self.data), "-o", options, "-w", "-t", "60"]
        subprocess.run(
            _as_postgres([*pg_ctl, "start", "-l", str(self.data / "log")]),
            check=True,
            capture_output=True,
        )

    def halt(self, checkpoint: bool = True) -> None:
        """Gone at once, as a crashed database: every connection drops (``resume`` after).
        ``checkpoint``: what was committed is on disk first (the tests' server runs without
        fsync, so a crash would lose it: an outage, not data loss, is what tests ask for)."""
        if checkpoint:
            import psycopg

            with (
                contextlib.suppress(psycopg.Error),
                psycopg.connect(self.admin_url, autocommit=True, connect_timeout=5) as conn,
            ):
                conn.execute("CHECKPOINT")
        subprocess.run(
            _as_postgres([_binary("pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop"]),
            capture_output=True,
        )

    def stop(self) -> None:
        self.halt(checkpoint=False)
        shutil.rmtree(self.data.parent, ignore_errors=True)

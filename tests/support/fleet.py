"""A fleet on hosts of its own (network namespaces, ``tests/support/netns.py``): PostgreSQL on
one, servers on others, agents with simulated cards on the rest, each a real process that can
be killed, restarted or cut off. Jobs are writers: they append a timestamped line to a file
of their own five times a second, so gaps and two copies at once show in files gpupool does
not keep."""

import contextlib
import itertools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from gpupool.client.tls import system_trust
from tests.support.agents import wait_for
from tests.support.netns import Forward, Host, Network, spawn
from tests.support.postgres import _as_postgres, _binary

PY = sys.executable
PG_PORT = 5432
API_PORT = 8080

WRITER = """import os, sys, time
rank = os.environ.get('GPUPOOL_GANG_RANK', '0')
path = os.path.join(sys.argv[1], f"{os.environ['GPUPOOL_JOB_ID']}-{sys.argv[3]}.r{rank}")
end = time.time() + float(sys.argv[2])
with open(path, "a") as out:
    while time.time() < end:
        out.write(f"{time.time():.3f} {os.getpid()} {os.environ['GPUPOOL_ALLOCATION_ID']}\\n")
        out.flush()
        time.sleep(0.2)
"""


class NetPostgres:
    """PostgreSQL listening on its host's address; ``halt`` is a crash, ``resume`` a restart."""

    def __init__(self, host: Host) -> None:
        # not under pytest's folders, which the postgres user may not enter
        self.host, self.data = host, Path(tempfile.mkdtemp(prefix="gpupool-pg-")) / "data"
        self.data.mkdir()
        if os.geteuid() == 0:
            shutil.chown(self.data.parent, "postgres")
            shutil.chown(self.data, "postgres")
        init = [_binary("initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres"]
        subprocess.run(_as_postgres(init), check=True, capture_output=True)
        with (self.data / "pg_hba.conf").open("a") as hba:
            hba.write(f"host all all {host.address.rsplit('.', 1)[0]}.0/24 trust\n")
        self.resume()
        with self.connect() as conn:
            conn.execute("CREATE DATABASE gpupool")
        self.url = f"postgresql+psycopg://postgres@{host.address}:{PG_PORT}/gpupool"

    def connect(self, database: str = "postgres"):  # type: ignore[no-untyped-def]
        """From the test process, through the server's socket folder (no network)."""
        import psycopg

        return psycopg.connect(
            host=str(self.data), port=PG_PORT, user="postgres", dbname=database, autocommit=True
        )

    def resume(self) -> None:
        options = (
            f"-p {PG_PORT} -k {self.data} -c listen_addresses={self.host.address} -c fsync=off "
            "-c synchronous_commit=off -c max_connections=200"
        )
        pg_ctl = [_binary("pg_ctl"), "-D", str(self.data), "-o", options, "-w", "-t", "60"]
        argv = _as_postgres([*pg_ctl, "start", "-l", str(self.data / "log")])
        subprocess.run(["ip", "netns", "exec", self.host.netns, *argv], check=True,
                       capture_output=True, timeout=90)  # fmt: skip

    def halt(self) -> None:
        with contextlib.suppress(Exception), self.connect() as conn:
            conn.execute("CHECKPOINT")  # an outage, not a loss of what was committed
        stop = [_binary("pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop"]
        subprocess.run(_as_postgres(stop), capture_output=True, timeout=60)

    def remove(self) -> None:
        self.halt()
        shutil.rmtree(self.data.parent, ignore_errors=True)

    def dump(self, to: Path) -> None:
        argv = [_binary("pg_dump"), "-h", str(self.data), "-p", str(PG_PORT), "-U", "postgres"]
        subprocess.run([*argv, "-Fc", "-f", str(to), "gpupool"], check=True, capture_output=True)

    def restore(self, dump: Path) -> None:
        """Replace the database with the dump (the servers' connections are ended first)."""
        with self.connect() as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname='gpupool'"
            )
            conn.execute("DROP DATABASE gpupool WITH (FORCE)")
            conn.execute("CREATE DATABASE gpupool")
        argv = [_binary("pg_restore"), "-h", str(self.data), "-p", str(PG_PORT), "-U", "postgres"]
        subprocess.run([*argv, "-d", "gpupool", str(dump)], check=True, capture_output=True)


@dataclass
class Fleet:
    root: Path
    net: Network
    db: NetPostgres
    servers: dict[str, Host]  # role → host
    settings: dict[str, str]
    admin_token: str = ""
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    forwards: dict[str, Forward] = field(default_factory=dict)
    tokens: dict[str, str] = field(default_factory=dict)
    submissions: dict[int, str] = field(default_factory=dict)  # job id → its latest writer

    @property
    def server_urls(self) -> str:
        return ",".join(f"http://{h.address}:{API_PORT}" for h in self.servers.values())

    def client(self, server: str) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.admin_token}"}
        return httpx.Client(
            base_url=self.forwards[server].url, headers=headers, timeout=10, verify=system_trust()
        )

    def start_servers(self, *roles: str) -> None:
        """Start them all, then wait until each answers (a restart of the control plane)."""
        for role in roles:
            host = self.servers[role]
            folder = self.root / role
            folder.mkdir(exist_ok=True)
            argv = [PY, "-m", "gpupool.cli.main", "server", "--data-dir", str(folder)]
            argv += ["--host", host.address, "--port", str(API_PORT)]
            argv += ["--database-url", self.db.url]
            self.procs[role] = spawn(host, argv, self.root / f"{role}.log", self.settings)
            if role not in self.forwards:
                self.forwards[role] = Forward(host, API_PORT)
        for role in roles:
            wait_until(f"server {role} up", lambda r=role: _answers(self.forwards[r].url), 60)

    def start_agent(self, node: str, host: Host, cards: int = 2) -> None:
        argv = [PY, "-m", "gpupool.cli.main", "agent", "--server", self.server_urls]
        argv += ["--name", node, "--devices", f"simulated:{cards}xA100-80G", "--heartbeat", "1"]
        argv += ["--state-dir", str(self.root / f"state-{node}@{host.role}"), "--grace", "2"]
        argv += ["--isolation", "none", "--no-cgroups", "--work-dir", str(self.root / "work")]
        env = {"GPUPOOL_AGENT_TOKEN": self.tokens[node]}
        self.procs[f"agent-{node}@{host.role}"] = spawn(
            host, argv, self.root / f"agent-{node}@{host.role}.log", env
        )

    def kill9(self, name: str) -> None:
        proc = self.procs.pop(name)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)

    def close(self) -> None:
        for forward in self.forwards.values():
            forward.close()

    def log(self, name: str) -> str:
        return (self.root / f"{name}.log").read_text(errors="replace")


def _answers(url: str) -> bool:
    try:
        return httpx.get(url + "/healthz", timeout=2).status_code in (200, 503)
    except httpx.HTTPError:
        return False


def wait_until(what: str, check, timeout: float):  # type: ignore[no-untyped-def]
    """``wait_for`` where an error (a server or a cable down meanwhile) counts as not yet."""

    def tolerant():  # type: ignore[no-untyped-def]
        with contextlib.suppress(httpx.HTTPError, ValueError, KeyError):
            return check()
        return None

    return wait_for(what, tolerant, timeout)


# -- what the writers' files say ---------------------------------------------------------------
@dataclass(frozen=True)
class Run:
    """One workload's lines: one process writing one part of one allocation. ``submission``:
    the job's id and a word of the test's own (a restored database issues ids again)."""

    submission: str
    job: int
    rank: int
    pid: int
    allocation: int
    times: tuple[float, ...]

    @property
    def first(self) -> float:
        return self.times[0]

    @property
    def last(self) -> float:
        return self.times[-1]


def runs(folder: Path) -> list[Run]:
    found: dict[tuple[str, int, int, int], list[float]] = {}
    for path in folder.glob("*.r*"):
        submission, rank = path.name.split(".r")
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 3:  # a line cut by a kill is not a line
                key = (submission, int(rank), int(parts[1]), int(parts[2]))
                found.setdefault(key, []).append(float(parts[0]))
    return [
        Run(s, int(s.split("-")[0]), r, p, a, tuple(sorted(t))) for (s, r, p, a), t in found.items()
    ]


def assert_never_two_at_once(all_runs: list[Run]) -> None:
    """Per job: one allocation at a time (a requeued job's next run starts after every part of
    the previous one ended), and within an allocation one process per part."""
    by_job: dict[str, list[Run]] = {}
    for run in all_runs:
        by_job.setdefault(run.submission, []).append(run)
    for job, job_runs in by_job.items():
        spans: dict[int, tuple[float, float]] = {}
        for run in job_runs:
            first, last = spans.get(run.allocation, (run.first, run.last))
            spans[run.allocation] = (min(first, run.first), max(last, run.last))
        ordered = sorted(spans.items(), key=lambda item: item[1][0])
        for (a, (_, end)), (b, (start, _)) in itertools.pairwise(ordered):
            assert start > end, f"job {job}: allocation {b} wrote at {start} before {a} ended {end}"
        parts: dict[tuple[int, int], int] = {}
        for run in job_runs:
            key = (run.allocation, run.rank)
            assert key not in parts, (
                f"job {job}: two processes for part {key}: {parts[key]}, {run.pid}"
            )
            parts[key] = run.pid


def largest_gap(all_runs: list[Run], submission: str) -> float:
    """The longest silence of any part of the job between its first and last line."""
    ranks: dict[int, list[float]] = {}
    for run in all_runs:
        if run.submission == submission:
            ranks.setdefault(run.rank, []).extend(run.times)
    gaps = [b - a for times in ranks.values() for a, b in itertools.pairwise(sorted(times))]
    return max(gaps, default=0.0)

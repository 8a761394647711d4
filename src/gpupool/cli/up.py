"""``gpupool up``: the quick start — a server and embedded agents for the seed's example
cluster in one command, on SQLite under a data folder of its own."""

import contextlib
import os
import shutil
import socket
import ssl
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import typer

from gpupool.cli.errors import user_errors
from gpupool.cli.server import _private, _settings, serve
from gpupool.cli.server_tls import TlsFiles, tls_options
from gpupool.cli.up_host import claim_prefix, left_behind, release_prefix
from gpupool.client.tls import trust
from gpupool.model import SpecError

if TYPE_CHECKING:
    from gpupool.agent.embedded import EmbeddedAgents
    from gpupool.server.settings import Settings


def up(
    data_dir: Path = typer.Option(Path("gpupool-data"), help="Where the SQLite database lives"),
    host: str = typer.Option("127.0.0.1", help="Address to listen on"),
    port: int = typer.Option(8080, help="Port"),
    config: Path = typer.Option(None, help="A TOML or YAML settings file"),
    devices: str = typer.Option(
        "simulated:4xA100-80G",
        help="Devices of each embedded agent: simulated:NxMODEL, a YAML file, or 'auto' for "
        "one agent on this machine's real accelerators",
    ),
    nodes: int = typer.Option(10, min=1, max=1000, help="Simulated servers (embedded agents)"),
    demo: bool = typer.Option(False, help="Also submit a realistic mix of jobs"),
    isolation: str = typer.Option(
        "auto",
        help="tenant-users: each tenant's workloads run as its own Unix user (needs root); "
        "none: as your user; auto: tenant-users when run as root",
    ),
    work_dir: Path = typer.Option(
        None,
        help="Where workloads get their own folders [default: /var/lib/gpupool/work with "
        "tenant-users, else DATA_DIR/agents/NODE/work]",
    ),
    workers: int = typer.Option(
        0,
        min=0,
        max=64,
        help="API worker processes beside this one, which runs the embedded agents (then the "
        "scheduler has a process of its own too); 0: none up to 100 nodes (everything in one "
        "process starts fastest), else one per CPU core",
    ),
    tls_cert: Path = typer.Option(
        None, help="HTTPS: the server's certificate (PEM, with its chain) [default: HTTP]"
    ),
    tls_key: Path = typer.Option(None, help="HTTPS: the certificate's private key (PEM)"),
    allow_plain_http: bool = typer.Option(
        None,
        "--allow-plain-http",
        help="Serve plain HTTP beyond loopback (--host 0.0.0.0; behind a TLS proxy, or a "
        "network you trust with the tokens); refused otherwise",
    ),
) -> None:
    """Start gpupool on SQLite with the seed's example cluster: embedded agents for 10
    simulated servers x 4 A100-80G, teams algorithm 20, inference 10, devtest 10 cards. Prints
    the URL, an admin token (also in DATA_DIR/admin-token) and how workloads are isolated.
    Beyond loopback it serves HTTPS (--tls-cert/--tls-key, gpupool cert create) or, with
    --allow-plain-http, plain HTTP. Runs until Ctrl-C or SIGTERM; workloads are real
    processes, stopped on the way out. A start it refuses leaves nothing behind."""
    from gpupool.agent.embedded import heartbeat_timeout
    from gpupool.devices.simulated import check
    from gpupool.server.instance_lock import InstanceLock, port_free

    with user_errors():  # everything that can refuse, before anything is made
        settings = _settings(
            data_dir, None, config, host=host, port=port, tls_cert_file=tls_cert,
            tls_key_file=tls_key, allow_plain_http=allow_plain_http,
        )  # fmt: skip
        if devices != "auto":
            check(devices)
        tls = up_tls(settings)
        port_free(settings.host, settings.port)
    if "log_level" not in settings.model_fields_set:  # not a line per cycle under the token
        settings = settings.model_copy(update={"log_level": "warning"})
    where = Where.of(settings, tls)
    names = (
        {socket.gethostname(): "auto"}
        if devices == "auto"
        else {f"node-{i:02d}": devices for i in range(1, nodes + 1)}
    )
    timeout_s = heartbeat_timeout(len(names), settings.heartbeat_timeout_s)
    settings = settings.model_copy(update={"heartbeat_timeout_s": timeout_s})
    lock = InstanceLock(settings.data_dir)  # held until this process ends
    made = Made(settings.data_dir)
    with user_errors():  # a second `up` on this folder stops here
        _private(settings.data_dir)
        try:
            lock.acquire(where.url)
        except BaseException:
            made.owned = False  # the folder is the running instance's: leave it be
            raise
    try:
        with user_errors():
            token, agents, on_host = _prepare(settings, where, names, isolation, work_dir)
    except BaseException:
        lock.release()
        made.undo()
        raise
    try:
        _run(settings, where, token, agents, devices, demo, workers, tls, on_host)
    finally:
        if on_host.prefix is not None:
            release_prefix(on_host.prefix)
        lock.release()


def up_tls(settings: "Settings") -> TlsFiles:
    """``tls_options`` for ``up``: its embedded agents present no client certificate, so
    mutual TLS is for ``gpupool server`` with agents of their own."""
    if settings.tls_client_ca_file is not None:
        raise SpecError(
            "tls_client_ca_file: gpupool up's embedded agents present no client certificate; "
            "mutual TLS is for gpupool server with agents of their own (docs/operations.md)",
            field="tls_client_ca_file",
        )
    return tls_options(settings)


@dataclass(frozen=True)
class Where:
    """How people and the embedded agents reach this instance."""

    url: str  # what is printed: https:// with a certificate, the host's name for 0.0.0.0
    local: str  # what the agents, the demo and the ready check call: loopback
    verify: ssl.SSLContext | bool  # for ``local``
    ca: str | None  # the file a person's CLI trusts (the certificate's own chain)

    @classmethod
    def of(cls, settings: "Settings", tls: TlsFiles) -> "Where":
        scheme = "https" if tls.cert else "http"
        wildcard = settings.host in ("0.0.0.0", "::")
        shown = socket.gethostname() if wildcard else settings.host
        connect = "127.0.0.1" if wildcard else settings.host
        if ":" in shown:
            shown = f"[{shown}]"
        if ":" in connect:
            connect = f"[{connect}]"
        return cls(
            f"{scheme}://{shown}:{settings.port}",
            f"{scheme}://{connect}:{settings.port}",
            pinned(tls.cert) if tls.cert else True,
            tls.cert,
        )


def pinned(chain_file: str) -> ssl.SSLContext:
    """What the embedded agents trust: exactly the certificates in the server's own chain
    file, whatever names they carry — they call this process's listener on loopback, which a
    certificate made for the host's public names does not name."""
    context = trust(chain_file)
    assert isinstance(context, ssl.SSLContext)  # a file was given
    context.check_hostname = False  # the chain file's certificates alone are trusted
    return context


class Made:
    """What a start made in the data folder, removed again when the start is refused."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.before = set(os.listdir(folder)) if folder.is_dir() else None
        self.owned = True

    def undo(self) -> None:
        if not self.owned:
            return
        if self.before is None:
            shutil.rmtree(self.folder, ignore_errors=True)
            return
        for name in set(os.listdir(self.folder)) - self.before:
            path = self.folder / name
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)


@dataclass
class Host:
    """What this instance shares with its host (``up_host``): its teams' user prefix (None:
    no tenant users) and the line its banner says of it."""

    prefix: str | None = None
    note: str = ""
    work_dir: Path | None = None


def _prepare(
    settings: "Settings",
    where: Where,
    names: dict[str, str],
    isolation: str,
    work_dir: Path | None,
) -> tuple[str, "EmbeddedAgents", Host]:
    """The database, its seed and tokens, its teams' user prefix and the embedded agents
    (not started yet)."""
    from gpupool.agent.embedded import EmbeddedAgents
    from gpupool.agent.identity import Isolation, resolve
    from gpupool.agent.workloads import DEFAULT_WORK_DIR, IsolationConfig
    from gpupool.server.bootstrap import saved_token, seed_example
    from gpupool.server.db.engine import Database

    host = Host()
    if resolve(isolation, os.geteuid()) is Isolation.TENANT_USERS:
        host.prefix, host.note = claim_prefix(settings.data_dir)
        host.work_dir = work_dir or DEFAULT_WORK_DIR

    db = Database(settings.db_url)
    try:
        db.migrate()
        seed_example(db)
        token = saved_token(db, settings.data_dir / "admin-token")
        agent_token = saved_token(
            db, settings.data_dir / "agent-token", "embedded-agents", "agent", "*"
        )
    finally:
        db.dispose()
    config = IsolationConfig(mode=isolation, work_dir=work_dir)
    if host.prefix is not None:
        config = replace(config, user_prefix=host.prefix)
    try:
        agents = EmbeddedAgents(
            where.local, agent_token, settings.data_dir / "agents", names, config,
            verify=where.verify,
        )  # fmt: skip
    except BaseException:
        if host.prefix is not None:
            release_prefix(host.prefix)
        raise
    return token, agents, host


def _run(
    settings: "Settings",
    where: Where,
    token: str,
    agents: "EmbeddedAgents",
    devices: str,
    demo: bool,
    workers: int,
    tls: TlsFiles,
    host: Host,
) -> None:
    from gpupool.client.demo import submit_demo

    url, nodes = where.url, len(agents.agents)
    typer.echo(f"gpupool is starting on {url}  (API {url}/api/v1, docs {url}/docs)...")
    typer.echo(f"database: {settings.db_url}")
    typer.echo(f"agents: {nodes} node(s), devices {devices}")
    typer.echo(f"workloads: {agents.describe()}")
    if host.note:
        typer.echo(f"workloads: {host.note}")
    if agents.agents and agents.agents[0].launcher.isolation.value == "none":
        typer.echo(
            "warning: every team's jobs run as your own user and can read each other's files "
            "and this data dir; run gpupool up as root for tenant users (docs/security.md)",
            err=True,
        )
    trust_it = f" --ca {where.ca}" if where.ca else ""
    ready = [
        f"gpupool is ready on {url}",
        f"admin token (also in {settings.data_dir / 'admin-token'}): {token}",
        f"dashboard: open {url}/ and log in with the admin token",
        f"try: gpupool login --server {url}{trust_it} --token "
        f"$(cat {settings.data_dir}/admin-token)",
    ]
    stopping = threading.Event()
    threading.Thread(
        target=announce_when_ready,
        args=(where, ready, stopping, token, nodes),
        daemon=True,
    ).start()
    agents.start()
    if demo:
        threading.Thread(
            target=submit_demo,
            args=(where.local, token, nodes),
            kwargs={"verify": where.verify},
            daemon=True,
        ).start()
    if workers == 0:
        workers = 1 if nodes <= 100 else min(os.cpu_count() or 1, 4)
    from gpupool.agent.oom import protect

    protect()  # the server and its agents are the OOM killer's last pick (root only)
    try:
        # one process: the agents stop first (no calls to a dead server); with workers, the
        # agents and the server no longer share one interpreter, and stop after it
        serve(settings, workers, on_exit=agents.signal_stop, tls=tls)
    finally:
        stopping.set()
        agents.stop()
        if host.prefix is not None and host.work_dir is not None:
            typer.echo(left_behind(host.prefix, host.work_dir))


REGISTER_WITHIN_S = 60.0  # after the server answers, the embedded agents have this long


def announce_when_ready(
    where: Where, lines: list[str], stopping: threading.Event, token: str, nodes: int
) -> None:
    """Print how to reach the server once it answers (printed earlier, ``gpupool login`` run
    at once met a server not listening yet); then say loudly if the embedded agents do not
    register (a node that cannot reach its own server is not a silent failure)."""
    from gpupool.client.http import ClientError, wait_until_healthy

    try:
        wait_until_healthy(where.local, lambda: not stopping.is_set(), 300, where.verify)
    except ClientError as exc:
        if not stopping.is_set():
            typer.echo(f"error: gpupool did not become ready: {exc}", err=True)
        return
    for line in lines:
        typer.echo(line)
    deadline = time.monotonic() + REGISTER_WITHIN_S
    ready = 0
    with httpx.Client(
        base_url=where.local, headers={"Authorization": f"Bearer {token}"}, verify=where.verify
    ) as c:
        while not stopping.wait(1.0):
            with contextlib.suppress(httpx.HTTPError, ValueError, KeyError):
                ready = c.get("/api/v1/nodes", params={"state": "ready"}).json()["total"]
            if ready >= nodes:
                return
            if time.monotonic() > deadline:
                typer.echo(
                    f"error: {ready} of the {nodes} embedded agents registered within "
                    f"{REGISTER_WITHIN_S:.0f} s of the server's start; their warnings above "
                    "say why (no job can run on a node that is not ready)",
                    err=True,
                )
                return

"""``gpupool up``: the quick start — a server and embedded agents for the seed's example
cluster in one command, on SQLite under a data folder of its own."""

import os
import threading
from pathlib import Path

import typer

from gpupool.cli.errors import user_errors
from gpupool.cli.server import _private, _settings, serve


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
) -> None:
    """Start gpupool on SQLite with the seed's example cluster: embedded agents for 10
    simulated servers x 4 A100-80G, teams algorithm 20, inference 10, devtest 10 cards. Prints
    the API URL, an admin token (also in DATA_DIR/admin-token) and how workloads are isolated.
    Runs until Ctrl-C or SIGTERM; workloads are real processes, stopped on the way out."""
    import socket

    from gpupool.agent.embedded import EmbeddedAgents, heartbeat_timeout
    from gpupool.agent.workloads import IsolationConfig
    from gpupool.client.demo import submit_demo
    from gpupool.devices.simulated import check
    from gpupool.server.bootstrap import saved_token, seed_example
    from gpupool.server.db.engine import Database
    from gpupool.server.instance_lock import InstanceLock, port_free

    with user_errors():
        settings = _settings(data_dir, None, config, host=host, port=port)
        if devices != "auto":
            check(devices)
    _private(settings.data_dir)
    url = f"http://{settings.host}:{settings.port}"
    lock = InstanceLock(settings.data_dir)  # held until this process ends
    with user_errors():  # before anything else: a second `up` on this folder or port stops here
        lock.acquire(url)
        port_free(settings.host, settings.port)
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
    connect = "127.0.0.1" if settings.host in ("0.0.0.0", "::") else settings.host
    names = (
        {socket.gethostname(): "auto"}
        if devices == "auto"
        else {f"node-{i:02d}": devices for i in range(1, nodes + 1)}
    )
    timeout_s = heartbeat_timeout(len(names), settings.heartbeat_timeout_s)
    settings = settings.model_copy(update={"heartbeat_timeout_s": timeout_s})
    with user_errors():
        agents = EmbeddedAgents(
            f"http://{connect}:{settings.port}",
            agent_token,
            settings.data_dir / "agents",
            names,
            IsolationConfig(mode=isolation, work_dir=work_dir),
        )
    typer.echo(f"gpupool is starting on {url}  (API {url}/api/v1, docs {url}/docs)...")
    typer.echo(f"database: {settings.db_url}")
    typer.echo(f"agents: {len(names)} node(s), devices {devices}")
    typer.echo(f"workloads: {agents.describe()}")
    if agents.agents and agents.agents[0].launcher.isolation.value == "none":
        typer.echo(
            "warning: every team's jobs run as your own user and can read each other's files "
            "and this data dir; run gpupool up as root for tenant users (docs/security.md)",
            err=True,
        )
    ready = [
        f"gpupool is ready on {url}",
        f"admin token (also in {settings.data_dir / 'admin-token'}): {token}",
        f"dashboard: open {url}/ and log in with the admin token",
        f"try: gpupool login --server {url} --token $(cat {settings.data_dir}/admin-token)",
    ]
    stopping = threading.Event()
    threading.Thread(
        target=announce_when_ready,
        args=(f"http://{connect}:{settings.port}", ready, stopping),
        daemon=True,
    ).start()
    agents.start()
    if demo:
        threading.Thread(
            target=submit_demo,
            args=(f"http://{connect}:{settings.port}", token, len(names)),
            daemon=True,
        ).start()
    if workers == 0:
        workers = 1 if len(names) <= 100 else min(os.cpu_count() or 1, 4)
    from gpupool.agent.oom import protect

    protect()  # the server and its agents are the OOM killer's last pick (root only)
    try:
        # one process: the agents stop first (no calls to a dead server); with workers, the
        # agents and the server no longer share one interpreter, and stop after it
        serve(settings, workers, on_exit=agents.signal_stop)
    finally:
        stopping.set()
        agents.stop()
        lock.release()


def announce_when_ready(base: str, lines: list[str], stopping: threading.Event) -> None:
    """Print how to reach the server once it answers (printed earlier, ``gpupool login`` run
    at once met a server not listening yet)."""
    from gpupool.client.http import ClientError, wait_until_healthy

    try:
        wait_until_healthy(base, lambda: not stopping.is_set(), timeout=300)
    except ClientError as exc:
        typer.echo(f"gpupool did not become ready: {exc}", err=True)
        return
    for line in lines:
        typer.echo(line)

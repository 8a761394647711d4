"""``gpupool server`` and ``gpupool admin``: run the control plane, first-time setup."""

import asyncio
import contextlib
import json
import logging
import os
import shutil
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from gpupool.cli.errors import friendly, user_errors
from gpupool.cli.server_tls import TlsFiles, tls_options, uvicorn_tls

if TYPE_CHECKING:
    from gpupool.server.settings import Settings
from gpupool.model import SpecError

admin_app = typer.Typer(
    help="Administration on the database itself: first setup, backup and restore."
)
token_app = typer.Typer(help="API tokens.")
admin_app.add_typer(token_app, name="token")


def _settings(
    data_dir: Path | None, database_url: str | None, config: Path | None, **more: object
) -> "Settings":
    """The server's settings (pydantic-settings is imported here, not for every command)."""
    from gpupool.server.settings import load_settings

    try:
        return load_settings(config, data_dir=data_dir, database_url=database_url, **more)
    except SpecError:
        raise
    except ValueError as exc:  # pydantic's ValidationError names the field
        raise SpecError(f"settings: {exc}".replace("\n", " ")) from None


def _private(path: Path) -> None:
    from gpupool.server.db.files import private_dir

    private_dir(path)


def serve(
    settings: "Settings",
    workers: int = 1,
    on_exit: Callable[[], None] | None = None,
    tls: TlsFiles | None = None,
) -> None:
    """Run uvicorn with the app until Ctrl-C or SIGTERM (clean shutdown either way);
    ``on_exit`` runs as soon as the stop signal arrives, before the server stops; ``tls``:
    the HTTPS files already checked (else read from the settings here)."""
    import uvicorn

    from gpupool.server import scheduler_process
    from gpupool.server.app import SUPERVISOR_PID, create_app, exit_with_parent
    from gpupool.server.logs import configure
    from gpupool.server.metrics import MULTIPROCESS_DIR
    from gpupool.server.process import STARTER_PID

    configure(settings.log_level, settings.log_json)
    if tls is None:
        with user_errors():
            tls = tls_options(settings)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # SIGTERM stops like Ctrl-C
    if os.environ.get(STARTER_PID):  # started by a program for itself: gone with it
        exit_with_parent(variable=STARTER_PID)
    if workers > 1:
        for name, value in settings.model_dump(mode="json").items():
            if value is not None:  # unset stays unset (the workers' default)
                text = json.dumps(value) if isinstance(value, list | dict) else str(value)
                os.environ[f"GPUPOOL_{name.upper()}"] = text
        # counters and histograms of every worker in one scrape (see gpupool.server.metrics)
        shared = settings.data_dir / f"metrics-{settings.port}"
        shutil.rmtree(shared, ignore_errors=True)
        shared.mkdir(parents=True)
        os.environ[MULTIPROCESS_DIR] = str(shared)
        os.environ[SUPERVISOR_PID] = str(os.getpid())  # workers stop when this process is gone
        if on_exit is not None:
            _call_on_stop_signal(on_exit)
        scheduler = None
        try:
            scheduler = scheduler_process.start(settings.db_url)  # leads before workers start
            _run_workers(settings, workers, tls)
        finally:
            scheduler_process.stop(scheduler)
        return
    app = create_app(settings)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level="warning",
        access_log=False,
        lifespan="on",
        proxy_headers=False,  # gpupool.server.client_address decides whom to believe
        ws_ping_interval=None,  # agents' channels beat; a silent one is closed by its route
        **uvicorn_tls(tls),
        # connections still open are cut, not awaited: over TLS an idle client's keep-alive
        # connection held the shutdown for the 30 s of asyncio's TLS close
        timeout_graceful_shutdown=3,
    )
    logging.getLogger("uvicorn.error").addFilter(_ForcedExitInOneLine())

    class _Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: object) -> None:
            if on_exit is not None:
                on_exit()
            app.state.ctx.changes.stop()  # agents waiting for orders are answered now
            super().handle_exit(sig, frame)  # type: ignore[arg-type]

    # uvicorn re-raises the stop signal after a clean shutdown
    with contextlib.suppress(KeyboardInterrupt):
        _Server(config).run()


def _call_on_stop_signal(on_exit: Callable[[], None]) -> None:
    """Call ``on_exit`` when SIGINT or SIGTERM arrives, beside the handlers uvicorn's worker
    supervisor installs (they own the signals): Python writes each signal's number to the
    wake-up descriptor, which a thread here reads. Main thread only."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    signal.set_wakeup_fd(write_end)

    def watch() -> None:
        while True:
            got = os.read(read_end, 64)
            if not got or signal.SIGINT in got or signal.SIGTERM in got:
                on_exit()
                return

    threading.Thread(target=watch, name="gpupool-stop-signal", daemon=True).start()


def _run_workers(settings: "Settings", workers: int, tls: TlsFiles) -> None:
    import uvicorn

    with contextlib.suppress(KeyboardInterrupt):
        uvicorn.run(
            "gpupool.server.app:app_from_environment",
            factory=True,
            host=settings.host,
            port=settings.port,
            workers=workers,
            log_level="warning",
            access_log=False,
            proxy_headers=False,  # gpupool.server.client_address decides whom to believe
            timeout_graceful_shutdown=3,  # agents' long polls for orders are cut, not awaited
            ws_ping_interval=None,  # agents' channels beat; a silent one is closed by its route
            **uvicorn_tls(tls),
        )


class _ForcedExitInOneLine(logging.Filter):
    """A second stop signal makes uvicorn exit at once; the cancelled lifespan task is then
    logged as a traceback (Starlette sends it as the text of "lifespan.shutdown.failed").
    Say what happened in one line instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        text = str(record.msg)
        cancelled_text = text.startswith("Traceback") and text.rstrip().endswith("CancelledError")
        if isinstance(exc, asyncio.CancelledError) or cancelled_text:
            record.msg = "stopped at once on a second stop signal (shutdown steps skipped)"
            record.args = ()
            record.exc_info = None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def server(
    data_dir: Path = typer.Option(None, help="Where the SQLite database lives [default: data]"),
    host: str = typer.Option(None, help="Address to listen on [default: 127.0.0.1]"),
    port: int = typer.Option(None, help="Port [default: 8080]"),
    config: Path = typer.Option(None, help="A TOML or YAML settings file"),
    database_url: str = typer.Option(
        None, help="SQLAlchemy URL, e.g. postgresql+psycopg://... [default: SQLite]"
    ),
    policy: str = typer.Option(None, help="Placement policy [default: auto]"),
    workers: int = typer.Option(
        1,
        min=1,
        max=64,
        help="API worker processes; with more than one, the scheduler runs in a process of "
        "its own beside them. One per CPU core gives the most submissions per second",
    ),
    tls_cert: Path = typer.Option(
        None, help=r"HTTPS: the server's certificate (PEM, with its chain) [default: HTTP]"
    ),
    tls_key: Path = typer.Option(None, help="HTTPS: the certificate's private key (PEM)"),
    tls_client_ca: Path = typer.Option(
        None,
        help="Mutual TLS: agents must present a certificate of this CA naming their node "
        "(people and the CLI are not asked)",
    ),
    allow_plain_http: bool = typer.Option(
        None,
        "--allow-plain-http",
        help="Serve plain HTTP beyond loopback (behind a TLS proxy); refused otherwise",
    ),
) -> None:
    """Run the API server and scheduler (SQLite under --data-dir unless a database URL is set)."""
    from gpupool.server.db.engine import need_driver

    with user_errors():
        settings = _settings(
            data_dir, database_url, config, host=host, port=port, policy=policy,
            tls_cert_file=tls_cert, tls_key_file=tls_key, tls_client_ca_file=tls_client_ca,
            allow_plain_http=allow_plain_http,
        )  # fmt: skip
        need_driver(settings.db_url)
    _private(settings.data_dir)
    from gpupool.agent.oom import protect

    protect()  # the OOM killer takes workloads before the server (root only)
    serve(settings, workers)


@token_app.command("create")
@friendly
def token_create(
    name: str = typer.Option(..., help="User name for the token"),
    role: str = typer.Option(
        "admin", help="admin, tenant-admin, member, viewer, finance, agent, metrics, kubernetes"
    ),
    tenant: str = typer.Option(None, help="Tenant of a tenant-admin, member or viewer"),
    node: str = typer.Option(None, help="Node scope of an agent token ('*' for every node)"),
    expires: str = typer.Option(
        None,
        help="When the token stops working: 30d, 12h, 90m, or an ISO date (in your zone, TZ, "
        "unless it names one) [default: never]",
    ),
    data_dir: Path = typer.Option(None, help="The server's data directory"),
    database_url: str = typer.Option(None, help="SQLAlchemy URL instead of SQLite"),
    config: Path = typer.Option(None, help="A TOML or YAML settings file"),
) -> None:
    """Create a user (if new) and print a new token as the last word (shown only now)."""
    import time

    from gpupool.model.units import parse_point_in_time
    from gpupool.scheduler.reservations import iso
    from gpupool.server.auth import create_user_token
    from gpupool.server.db.engine import Database

    expires_at = parse_point_in_time(expires, time.time()) if expires else None
    settings = _settings(data_dir, database_url, config)
    _private(settings.data_dir)
    db = Database(settings.db_url)
    try:
        db.migrate()
        with db.write() as s:
            token = create_user_token(s, name, role, tenant, node, expires_at)
    finally:
        db.dispose()
    until = f", expires {iso(expires_at)}" if expires_at else ""
    typer.echo(f"token for {name} ({role}{until}): {token}")

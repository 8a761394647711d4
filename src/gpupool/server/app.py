"""The FastAPI application: routes, error handlers, middleware, and the scheduler loop's
lifetime (started after migrations, stopped on shutdown)."""

import os
import signal
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import ModuleType
from typing import Annotated

from fastapi import Depends, FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import PlainTextResponse
from fastapi.security import HTTPAuthorizationCredentials
from prometheus_client import CONTENT_TYPE_LATEST

from gpupool import __version__
from gpupool.server import errors
from gpupool.server.auth import Role
from gpupool.server.client_address import client_address
from gpupool.server.db.engine import Database
from gpupool.server.db.tables import Meta
from gpupool.server.deps import ServerContext, authenticate, bearer
from gpupool.server.errors import ApiError, forbidden
from gpupool.server.group_commit import GroupCommit
from gpupool.server.loop import SchedulerLoop
from gpupool.server.metrics import Metrics
from gpupool.server.middleware import AuditAndMetrics
from gpupool.server.routes import (
    admin,
    agent_channel,
    agents,
    alerts,
    allocations,
    billing,
    dashboard,
    fairshare,
    guarantees,
    idle_policies,
    invoices,
    job_control,
    jobs,
    join,
    kubernetes,
    limits,
    nodes,
    notebook,
    plans,
    proposals,
    reports,
    reservations,
    services,
    session_list,
    tenants,
    terminals,
    usage,
)
from gpupool.server.settings import Settings
from gpupool.server.wake import sender_from_environment
from gpupool.server.web import install as _install_web

SUPERVISOR_PID = "SUPERVISOR_PID_OF_GPUPOOL_WORKERS"  # outside the GPUPOOL_ settings prefix
LOOPBACK = frozenset({"127.0.0.1", "::1"})


def create_app(settings: Settings, *, run_scheduler: bool = True) -> FastAPI:
    """Build the app. ``run_scheduler=False`` serves the API only (tests drive cycles)."""
    db = Database(settings.db_url)
    metrics = Metrics(db)
    loop = SchedulerLoop(db, settings, metrics)
    writes = GroupCommit(db, after_commit=loop.wake)
    # one view of what can never run for submissions and the loop's waiting jobs
    ctx = ServerContext(settings, db, metrics, loop, writes, capacity=loop.capacity)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        db.migrate()
        writes.start()
        if run_scheduler:
            loop.start()
        app.state.ready = True
        try:
            yield
        finally:
            app.state.ready = False
            ctx.changes.stop()
            writes.stop()
            loop.stop()
            ctx.tunnels.close()
            db.dispose()

    app = FastAPI(
        title="gpupool",
        version=__version__,
        description="GPU compute pooling: nodes, tenants and quotas, jobs, allocations, usage.",
        lifespan=lifespan,
    )
    app.state.ctx = ctx
    app.state.ready = False
    errors.install(app)
    routes: tuple[ModuleType, ...] = (jobs, job_control, billing, invoices, plans, reports)
    routes += (nodes, agents, allocations)
    routes += (agent_channel, tenants, guarantees, limits, idle_policies, services, kubernetes)
    routes += (usage, alerts, admin, reservations, proposals, dashboard, join)
    routes += (terminals, session_list, fairshare, notebook)
    for module in routes:
        app.include_router(module.router)
    _install_web(app)

    started = time.time()

    @app.get("/healthz", tags=["health"])
    def healthz() -> PlainTextResponse:
        """200 once migrations ran and the server is ready; 503 saying why when its database
        cannot be read, on a server that runs the scheduler when no scheduler (here or on
        another server) has led for ``health_no_leader_s``, or when this leader's scheduling,
        services or alert-delivery thread stopped. A duty failing now (retried with backoff)
        is said after "ok; "."""
        if not app.state.ready:
            return PlainTextResponse("starting", status_code=503)
        try:
            with db.read() as s:
                meta = s.get(Meta, 1)
                seen, leader = (meta.leader_seen_at, meta.leader_name) if meta else (0.0, "")
        except Exception as exc:  # the database is away: say so, do not raise
            first = str(exc).splitlines()[0][:200]
            return PlainTextResponse(f"degraded: database unreachable: {first}", 503)
        limit, now = settings.health_no_leader_s, time.time()
        if run_scheduler and now - started > limit and now - (seen or 0.0) > limit:
            since = f"{now - seen:.0f} s" if seen else "ever"
            who = f" (last leader: {leader})" if leader else ""
            return PlainTextResponse(f"degraded: no scheduler has led for {since}{who}", 503)
        stopped, failing = loop.trouble()
        if stopped:
            return PlainTextResponse("degraded: " + "; ".join(stopped + failing), 503)
        if failing:  # it serves and leads; a duty that fails is retried (and said here)
            return PlainTextResponse("ok; " + "; ".join(failing))
        return PlainTextResponse("ok")

    @app.get("/metrics", tags=["health"], include_in_schema=False)
    async def prometheus(
        request: Request,
        creds: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    ) -> PlainTextResponse:
        """Prometheus exposition: for a token of role metrics or admin, or (setting
        ``metrics_access = "loopback"``) for any caller on 127.0.0.1 / ::1."""
        if settings.metrics_access == "loopback":
            host = client_address(request)
            if host not in LOOPBACK:
                raise ApiError(403, f"forbidden: /metrics answers loopback only, not {host}")
        else:
            who = await authenticate(request, creds)
            if who.role not in (Role.METRICS, Role.ADMIN):
                raise forbidden(f"/metrics needs role metrics or admin; {who.user} is {who.role}")
        text = await run_in_threadpool(metrics.exposition)
        return PlainTextResponse(text.decode(), media_type=CONTENT_TYPE_LATEST)

    app.add_middleware(AuditAndMetrics, db=db, metrics=metrics)
    return app


def app_from_environment() -> FastAPI:
    """Factory for API worker processes (``gpupool server --workers N``): settings come from
    the ``GPUPOOL_`` variables the parent exported. The scheduler runs in a process of its
    own (``gpupool.server.scheduler_process``); every worker runs a scheduler loop that stands
    by and takes the lead if that process dies."""
    from gpupool.server.logs import configure

    settings = Settings()
    configure(settings.log_level, settings.log_json)
    exit_with_parent()
    app = create_app(settings)
    app.state.ctx.loop.remote = sender_from_environment()  # wakes the scheduler process
    return app


def exit_with_parent(poll_s: float = 1.0, variable: str = SUPERVISOR_PID) -> None:
    """A worker stops (cleanly, by SIGTERM to itself) once the supervisor that started it is
    gone, also when that was killed with SIGKILL: no orphaned workers keep serving the port.
    The supervisor's pid comes from the environment it exported, so a worker that was still
    starting when the supervisor died (already re-parented) notices too."""
    expected = os.environ.get(variable)
    parent = int(expected) if expected and expected.isdigit() else os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="gpupool-parent-watch", daemon=True).start()

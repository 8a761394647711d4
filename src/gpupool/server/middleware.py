"""ASGI middleware: API latency metrics, the audit log of every mutating call, and the
server's version on every answer (``Gpupool-Version``: agents and the CLI judge the skew)."""

import logging
import time

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gpupool import __version__
from gpupool.server.db.engine import Database
from gpupool.server.db.tables import AuditRow
from gpupool.server.metrics import Metrics

MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# an agent's accepted heartbeat (every few seconds per node) is telemetry, not an action: as
# Kubernetes' audit policies leave out nodes' status updates, it is not audited (refused ones
# are)
HEARTBEAT_SUFFIX = "/heartbeat"
VERSION_HEADER = (b"gpupool-version", __version__.encode())
log = logging.getLogger("gpupool.audit")


def audit_values(scope: Scope, status: int, target: str = "") -> dict[str, object]:
    """The audit record of a call: the caller (set by authentication), method and route, the
    path with the target a handler named, the HTTP result and the client address."""
    state = scope.get("state") or {}
    who = state.get("principal")
    path = scope["path"]
    target = target or state.get("audit_target") or ""
    client = scope.get("client") or ("", 0)
    return {
        "time": time.time(),
        "actor": who.user if who else "anonymous",
        "role": str(who.role) if who else "",
        "action": f"{scope['method']} {getattr(scope.get('route'), 'path', path)}",
        "target": (f"{path} -> {target}" if target else path)[:500],
        "result": status,
        "client": str(client[0])[:100],
        "detail": str(state.get("audit_detail") or "")[:2000],
    }


def audit_row(scope: Scope, status: int) -> AuditRow:
    return AuditRow(**audit_values(scope, status))


class AuditAndMetrics:
    def __init__(self, app: ASGIApp, db: Database, metrics: Metrics):
        self.app = app
        self.db = db
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500
        audited = scope["method"] in MUTATING and scope["path"].startswith("/api/")

        async def capture(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", []), VERSION_HEADER]
                routine = status < 400 and scope["path"].endswith(HEARTBEAT_SUFFIX)
                if audited and not routine and not (scope.get("state") or {}).get("audited"):
                    # recorded before the caller hears the answer
                    await anyio.to_thread.run_sync(self._write_audit, scope, status)
            await send(message)

        try:
            await self.app(scope, receive, capture)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", "unmatched")
            self.metrics.api_latency.labels(scope["method"], template, str(status)).observe(
                time.perf_counter() - started
            )

    def _write_audit(self, scope: Scope, status: int) -> None:
        row = audit_row(scope, status)
        try:
            with self.db.write() as s:
                s.add(row)
        except Exception:
            log.exception("could not write the audit record for %s", row.action)

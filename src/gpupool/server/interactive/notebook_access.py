"""Who calls a notebook's proxy (docs/interactive.md, "Notebooks"): the bearer token of the
``Authorization`` header, else the notebook's pass cookie — only for the job it was made
for. Then the same rule as a terminal's (``interactive.access``): the job's own tenant, a
tenant-admin above it, an admin (audited); 401 without a credential, 403 otherwise."""

import time

from fastapi.concurrency import run_in_threadpool
from starlette.requests import HTTPConnection

from gpupool.model import notebook
from gpupool.server.auth import Principal, Role
from gpupool.server.client_address import client_address, is_https
from gpupool.server.deps import ServerContext, principal_of, throttle
from gpupool.server.errors import ApiError, forbidden
from gpupool.server.interactive.access import Target, target
from gpupool.server.interactive.passes import COOKIE, Pass, cookie_pass

NOT_PEOPLE = (Role.AGENT, Role.METRICS, Role.KUBERNETES)


async def bearer_or_cookie(conn: HTTPConnection, ctx: ServerContext, job_id: int) -> Principal:
    """The caller, or ApiError (401, 403, 429)."""
    now = time.time()
    scheme, _, token = (conn.headers.get("authorization") or "").partition(" ")
    if token.strip():
        who = await principal_of(ctx, token.strip(), now) if scheme.lower() == "bearer" else None
        if who is None:  # only failures are throttled: a valid token always gets through
            address = client_address(conn)
            throttle(ctx, address, now)
            ctx.auth_failures.failed(address, now)
            raise ApiError(401, "unknown, revoked or expired token, or a disabled user")
    else:
        secret = conn.cookies.get(COOKIE, "")
        if not secret:
            raise ApiError(401, "missing bearer token (Authorization: Bearer <token>) or "
                           "notebook cookie (open the link gpupool notebook prints)")  # fmt: skip
        found = await run_in_threadpool(_cookie, ctx, secret)
        if found is None or found.job_id != job_id:
            raise ApiError(401, "this notebook's cookie is unknown, expired, or another "
                           "notebook's; open a new link (gpupool notebook --link JOB)")  # fmt: skip
        who = found.who
    if who.role in NOT_PEOPLE:
        raise forbidden(f"{who.role} tokens open no notebook")
    return who


def _cookie(ctx: ServerContext, secret: str) -> Pass | None:
    with ctx.db.read() as s:
        return cookie_pass(s, secret)


def notebook_target(ctx: ServerContext, who: Principal, job_id: int) -> Target:
    with ctx.db.read() as s:
        return target(s, who, job_id, notebook.KIND)


def own_origin(conn: HTTPConnection) -> bool:
    """A browser's WebSocket from this server's own pages (a cookie is sent by any page of
    the site that opens one: a cookie-authenticated socket must come from our origin)."""
    origin = conn.headers.get("origin")
    scheme = "https" if is_https(conn) else "http"
    return origin == f"{scheme}://{conn.headers.get('host', '')}"

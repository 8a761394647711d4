"""A notebook's routes (docs/interactive.md, "Notebooks"):

- ``POST /api/v1/jobs/{id}/notebook-link`` — a one-time login link (``interactive.passes``)
  for a browser, made with the caller's token;
- ``GET /api/v1/jobs/{id}/notebook-login?ticket=`` — trades it for the notebook's cookie
  (path-scoped, HttpOnly, SameSite=Strict) and sends the browser to the notebook;
- ``/api/v1/jobs/{id}/notebook/{path}`` — the app itself, every method and WebSocket,
  relayed over the session's tunnel to the app's loopback port in the tenant's network
  namespace (``interactive.app_relay``, ``app_ws``).

Bounds: a request body of at most ``MAX_REQUEST_BODY`` (413), an answer of at most
``MAX_RESPONSE_BODY`` (cut off past it), ``MAX_APP_STREAMS`` exchanges at once per notebook
in one server process (503 past it; the tunnel's own bound is ``MAX_STREAMS``)."""

import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import unquote

from fastapi import APIRouter, Request, WebSocket
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import RedirectResponse, Response, StreamingResponse
from sqlalchemy.orm import Session
from starlette.datastructures import MutableHeaders
from starlette.requests import HTTPConnection
from starlette.types import Receive, Scope, Send

from gpupool.model import notebook
from gpupool.server.auth import Principal
from gpupool.server.client_address import client_address, is_https
from gpupool.server.db.tables import AuditRow
from gpupool.server.deps import Caller, ServerContext
from gpupool.server.errors import ApiError, forbidden
from gpupool.server.interactive import passes
from gpupool.server.interactive.access import Target, audit_detail, target
from gpupool.server.interactive.app_headers import confinement, from_app, leaves, to_app
from gpupool.server.interactive.app_relay import AppChannel, AppError, body_of, http_exchange
from gpupool.server.interactive.app_ws import bridge, handshake
from gpupool.server.interactive.notebook_access import (
    bearer_or_cookie,
    notebook_target,
    own_origin,
)
from gpupool.server.routes.terminals import TUNNEL_WAIT_S, deny
from gpupool.server.session import SESSION_COOKIE

router = APIRouter(prefix="/api/v1", tags=["sessions"])
MAX_REQUEST_BODY = 16 * 1024 * 1024
MAX_RESPONSE_BODY = 512 * 1024 * 1024
MAX_APP_STREAMS = 32
METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


def _audit(ctx: ServerContext, conn: HTTPConnection, who: Principal, action: str,
           t: Target, status: int) -> None:  # fmt: skip
    row = AuditRow(
        time=time.time(), actor=who.user, role=str(who.role), action=action,
        target=f"job {t.job_id} (tenant {t.tenant}) on {t.node}", result=status,
        client=client_address(conn)[:100], detail=audit_detail(who, t),
    )  # fmt: skip
    with ctx.db.write() as s:
        s.add(row)


@router.post("/jobs/{job_id}/notebook-link")
async def notebook_link(job_id: int, request: Request, who: Caller) -> dict[str, Any]:
    """A one-time link that logs a browser in to the notebook (a minute or two to use; it
    acts as the caller's token, which is never put in a URL)."""
    ctx: ServerContext = request.app.state.ctx
    _, _, token = (request.headers.get("authorization") or "").partition(" ")
    token = token.strip() or request.cookies.get(SESSION_COOKIE, "")

    def make() -> tuple[Target, str, float]:
        with ctx.db.write() as s:
            t = passes_target(s, who, job_id)
            token_id = passes.token_id_of(s, token)
            if token_id is None:
                raise forbidden("a link is made with an API or dashboard token")
            secret, end = passes.issue(s, passes.PassKind.LINK, job_id, token_id,
                                       passes.LINK_TTL_S)  # fmt: skip
            return t, secret, end

    t, secret, end = await run_in_threadpool(make)
    request.state.audit_detail = audit_detail(who, t)
    return {
        "job_id": job_id,
        "login_path": f"/api/v1/jobs/{job_id}/notebook-login?ticket={secret}",
        "notebook_path": notebook.base_path(job_id),
        "expires_at": end,
    }


def passes_target(s: Session, who: Principal, job_id: int) -> Target:
    return target(s, who, job_id, notebook.KIND)


@router.get("/jobs/{job_id}/notebook-login")
async def notebook_login(job_id: int, ticket: str, request: Request) -> Response:
    """Trade a one-time link for the notebook's cookie, then go to the notebook."""
    ctx: ServerContext = request.app.state.ctx
    request.state.audited = True

    def trade() -> tuple[Principal, Target, str, float] | None:
        with ctx.db.write() as s:
            found = passes.redeem_link(s, job_id, ticket[:200])
            if found is None:
                return None
            t = passes_target(s, found.who, job_id)
            secret, end = passes.issue(s, passes.PassKind.COOKIE, job_id, found.token_id,
                                       passes.COOKIE_TTL_S)  # fmt: skip
            return found.who, t, secret, end

    try:
        traded = await run_in_threadpool(trade)
    except ApiError as exc:
        raise forbidden(f"this link's notebook cannot be opened: {exc.detail}") from None
    if traded is None:
        ctx.auth_failures.failed(client_address(request), time.time())
        raise forbidden("this link is unknown, expired, used already or another job's: "
                        f"gpupool notebook --link {job_id} makes a new one")  # fmt: skip
    who, t, secret, end = traded
    await run_in_threadpool(_audit, ctx, request, who, "GET /api/v1/jobs/{job_id}/notebook-login",
                            t, 303)  # fmt: skip
    resp = RedirectResponse(notebook.base_path(job_id), status_code=303)
    resp.set_cookie(passes.COOKIE, secret, max_age=max(1, int(end - time.time())),
                    path=notebook.base_path(job_id), httponly=True, samesite="strict",
                    secure=is_https(request))  # fmt: skip
    resp.headers["Cache-Control"] = "no-store"
    resp.headers["Referrer-Policy"] = "no-referrer"
    return resp


def _app_target(conn: HTTPConnection, job_id: int) -> str:
    """The request's path and query as the app gets them (its raw bytes: the app decodes),
    refused (400) if a segment climbs out of the notebook's path."""
    raw = conn.scope.get("raw_path") or conn.scope["path"].encode()
    path = raw.decode("latin-1")
    if not path.startswith(notebook.base_path(job_id)):
        raise ApiError(400, "the notebook's path is /api/v1/jobs/{id}/notebook/...")
    for segment in unquote(unquote(path)).replace("\\", "/").split("/"):
        if segment in ("..", "."):
            raise ApiError(400, "a path with . or .. segments is refused")
    query = conn.scope.get("query_string") or b""
    return path + ("?" + query.decode("latin-1") if query else "")


class Streams:
    """Exchanges under way per notebook in this process (an answer's body included)."""

    def __init__(self) -> None:
        self.open: Counter[int] = Counter()

    def take(self, job_id: int) -> None:
        if self.open[job_id] >= MAX_APP_STREAMS:
            raise ApiError(503, f"job {job_id}'s notebook has {MAX_APP_STREAMS} requests under "
                           "way; retry in a moment", headers={"Retry-After": "1"})  # fmt: skip
        self.open[job_id] += 1

    def give(self, job_id: int) -> None:
        self.open[job_id] -= 1
        if self.open[job_id] <= 0:
            del self.open[job_id]


class AppResponse(StreamingResponse):
    """The app's answer streamed on; ``ended`` runs however its sending ends — also when the
    person went before its first byte, so its body was never started (its stream and its
    place among the notebook's exchanges are given back)."""

    def __init__(self, body: AsyncIterator[bytes], ended: Callable[[], Awaitable[None]],
                 **kwargs: Any) -> None:  # fmt: skip
        super().__init__(body, **kwargs)
        self._ended = ended

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self._ended()


def _streams(conn: HTTPConnection) -> Streams:
    state = conn.app.state
    if getattr(state, "notebook_streams", None) is None:
        state.notebook_streams = Streams()
    streams: Streams = state.notebook_streams
    return streams


async def _channel(ctx: ServerContext, t: Target) -> AppChannel:
    conn = await ctx.tunnels.connect(t.alloc_id, TUNNEL_WAIT_S)
    if conn is None:
        raise ApiError(503, f"job {t.job_id}'s node has not linked the session yet; try again "
                       "in a moment", headers={"Retry-After": "2"})  # fmt: skip
    try:
        return await AppChannel.open(conn)
    except AppError as exc:
        raise ApiError(502, f"job {t.job_id}'s web app: {exc}") from None


async def _body(request: Request) -> bytes:
    length = request.headers.get("content-length")
    if length is not None and (not length.isdigit() or int(length) > MAX_REQUEST_BODY):
        raise ApiError(413, f"a notebook request's body is at most {MAX_REQUEST_BODY} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_REQUEST_BODY:
            raise ApiError(413, f"a notebook request's body is at most {MAX_REQUEST_BODY} bytes")
    return bytes(body)


async def notebook_http(job_id: int, path: str, request: Request) -> Response:
    """The notebook's web app: this request relayed to it, its answer back."""
    ctx: ServerContext = request.app.state.ctx
    request.state.audited = True  # a notebook's own traffic: its opening is what is audited
    who = await bearer_or_cookie(request, ctx, job_id)
    request.state.principal = who
    t = await run_in_threadpool(notebook_target, ctx, who, job_id)
    target = _app_target(request, job_id)
    streams = _streams(request)
    streams.take(job_id)  # before the body is read: 32 bodies at most in memory per notebook
    try:
        body = await _body(request)
        if who.is_admin:
            action = f"{request.method} /api/v1/jobs/{{job_id}}/notebook"
            await run_in_threadpool(_audit, ctx, request, who, action, t, 200)
        if request.method not in ("GET", "HEAD", "OPTIONS"):
            await ctx.session_input.touch(t.alloc_id)  # a save, a run: a person's activity
        chan = await _channel(ctx, t)
    except BaseException:
        streams.give(job_id)
        raise
    try:
        status, headers, h = await http_exchange(
            chan, request.method, target, to_app(list(request.headers.items())), body
        )
    except BaseException as exc:
        streams.give(job_id)
        await chan.close()
        if isinstance(exc, AppError):
            raise ApiError(502, f"job {job_id}'s web app: {exc}") from None
        raise
    base, host = notebook.base_path(job_id), request.headers.get("host", "")
    location = next((v.decode("latin-1") for k, v in headers if k.lower() == b"location"), None)
    if location is not None and leaves(location, request.url.path, base):
        streams.give(job_id)
        await chan.close()
        raise ApiError(502, f"job {job_id}'s web app redirected out of its notebook's path")
    out = _header_dict(from_app(headers, base))
    out.append("Content-Security-Policy", confinement(base, host, is_https(request)))
    # an answer for one person's credentials: never kept by a cache between them and us
    out["Cache-Control"] = "private, no-store"
    given = False

    async def ended() -> None:
        nonlocal given
        if not given:
            given = True
            streams.give(job_id)
            await chan.close()

    return AppResponse(body_of(chan, h, MAX_RESPONSE_BODY), ended, status_code=status,
                       headers=out)  # fmt: skip


for _method in METHODS:  # one operation each (one id each in the OpenAPI document)
    router.add_api_route("/jobs/{job_id}/notebook/{path:path}", notebook_http,
                         methods=[_method], operation_id=f"notebook_{_method.lower()}")  # fmt: skip


def _header_dict(headers: list[tuple[str, str]]) -> MutableHeaders:
    out = MutableHeaders()
    for name, value in headers:
        out.append(name, value)
    return out


@router.websocket("/jobs/{job_id}/notebook/{path:path}")
async def notebook_ws(ws: WebSocket, job_id: int, path: str) -> None:
    """A WebSocket of the notebook's web app (a kernel's channels)."""
    ctx: ServerContext = ws.app.state.ctx
    try:
        who = await bearer_or_cookie(ws, ctx, job_id)
        if not ws.headers.get("authorization") and not own_origin(ws):
            raise forbidden("a notebook's cookie opens WebSockets from this server's pages only")
        t = await run_in_threadpool(notebook_target, ctx, who, job_id)
        target = _app_target(ws, job_id)
        chan = await _channel(ctx, t)
    except ApiError as exc:
        await deny(ws, exc.status, exc.detail)
        return
    try:
        proto, subprotocol = await handshake(
            chan, ws.headers.get("host", "localhost"), target, to_app(list(ws.headers.items()))
        )
    except AppError as exc:
        await chan.close()
        await deny(ws, 502, f"job {job_id}'s web app: {exc}")
        return
    if who.is_admin:
        await run_in_threadpool(_audit, ctx, ws, who, "WS /api/v1/jobs/{job_id}/notebook", t, 101)
    try:
        await ws.accept(subprotocol=subprotocol)
        await ctx.session_input.touch(t.alloc_id)
        await bridge(ws, chan, proto, lambda: ctx.session_input.touch(t.alloc_id))
    finally:
        await chan.close()

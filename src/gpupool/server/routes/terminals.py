"""The two WebSockets of an interactive session (docs/interactive.md, "The relay"):

- ``/api/v1/jobs/{job_id}/terminal`` — a person's terminal (``gpupool shell``, ``exec``,
  ``attach``, ``srun --pty``): the bearer token in the upgrade; refused before it is
  accepted (403) unless the caller may open the session (``interactive.access``); audited.
  Its first message says what to open (``{"t": "open", "command": [...], "pty": true,
  "cols": 80, "rows": 24, "attach": null}``), then binary frames are the terminal's bytes
  (``channel | bytes``) and text frames ``resize``, ``signal``, ``eof``; from the server
  ``opened``, ``exit`` (the code), ``closed``, ``error``, and the output.
- ``/api/v1/nodes/{name}/tunnels/{alloc_id}`` — the agent's tunnel for one running session
  of its node, its own token in the upgrade (node-scoped, as its channel's).

A person's bytes reach the node only against the credit the agent gives back as it writes
them (``WINDOW``): a client that pastes without end waits, and one that reads nothing stops
its terminal's output at a window."""

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable

from fastapi import APIRouter, WebSocket
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from sqlalchemy import select

from gpupool.model.relay import CHUNK, MAX_CONTROL, WINDOW, FrameError, open_request, signal_of
from gpupool.model.relay import size as bounded
from gpupool.server.auth import Principal, Role
from gpupool.server.client_address import client_address
from gpupool.server.client_certs import agent_refusal
from gpupool.server.db.tables import AllocationNodeRow, AllocationRow, AuditRow, JobRow
from gpupool.server.deps import ServerContext, principal_of
from gpupool.server.errors import ApiError
from gpupool.server.interactive.access import Target, audit_detail, target
from gpupool.server.ratelimit import Pace
from gpupool.server.tunnels import BINARY, DROPPED, RelayClosed, RelayConn

router = APIRouter(prefix="/api/v1", tags=["sessions"])
OPEN_TIMEOUT_S = 15.0  # the first message, and the node's answer to it
TUNNEL_WAIT_S = 10.0  # for the node's link of a session that has just started


async def deny(ws: WebSocket, status: int, detail: str) -> None:
    """Refuse an upgrade before accepting it, with a reason where the server can say one."""
    if "websocket.http.response" in ws.scope.get("extensions", {}):
        await ws.send_denial_response(JSONResponse({"detail": detail}, status_code=status))
    else:
        await ws.close(1008, detail[:120])


async def caller(ws: WebSocket, ctx: ServerContext) -> Principal | tuple[int, str]:
    """Whose bearer token opens this WebSocket, or (status, why) to refuse it with; a bad
    token counts against the failed-authentication limiter as on HTTP."""
    scheme, _, token = (ws.headers.get("authorization") or "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return 401, "missing bearer token (Authorization: Bearer <token>)"
    now = time.time()
    who = await principal_of(ctx, token.strip(), now)
    if who is None:
        address = client_address(ws)
        wait = ctx.auth_failures.retry_after(address, now)
        ctx.auth_failures.failed(address, now)
        if wait is not None:
            return 429, f"too many failed authentications from {address}; retry in {wait:.0f} s"
        return 401, "unknown, revoked or expired token, or a disabled user"
    return who


async def person(ws: WebSocket, ctx: ServerContext) -> Principal | tuple[int, str]:
    """The caller of a person's WebSocket, or (status, why) to refuse it with."""
    who = await caller(ws, ctx)
    if not isinstance(who, tuple) and who.role in (Role.AGENT, Role.METRICS, Role.KUBERNETES):
        return 403, f"{who.role} tokens open no terminal"
    return who


def _target(ctx: ServerContext, who: Principal, job_id: int) -> Target:
    with ctx.db.read() as s:
        return target(s, who, job_id)


def audit(ctx: ServerContext, ws: WebSocket, who: Principal, t: Target, status: int) -> None:
    row = AuditRow(
        time=time.time(), actor=who.user, role=str(who.role),
        action="WS /api/v1/jobs/{job_id}/terminal",
        target=f"job {t.job_id} (tenant {t.tenant}) on {t.node}", result=status,
        client=client_address(ws)[:100], detail=audit_detail(who, t),
    )  # fmt: skip
    with ctx.db.write() as s:
        s.add(row)


@router.websocket("/jobs/{job_id}/terminal")
async def terminal(ws: WebSocket, job_id: int) -> None:
    ctx: ServerContext = ws.app.state.ctx
    who = await person(ws, ctx)
    if isinstance(who, tuple):
        await deny(ws, *who)
        return
    try:
        t = await run_in_threadpool(_target, ctx, who, job_id)
    except ApiError as exc:
        await deny(ws, exc.status, exc.detail)
        return
    wait = ctx.terminal_opens.take(who.user, time.monotonic())
    if wait is not None:  # each open starts a process on the node before its cgroup holds it
        await deny(ws, 429, f"{who.user} opens terminals too fast; retry in {wait:.0f} s")
        return
    conn = await ctx.tunnels.connect(t.alloc_id, TUNNEL_WAIT_S)
    if conn is None:
        await deny(ws, 503, f"job {job_id}'s node has not linked the session yet (its agent "
                   "dials the server); try again in a moment")  # fmt: skip
        return
    await run_in_threadpool(audit, ctx, ws, who, t, 101)
    await ws.accept()
    try:
        await _open(ws, conn)
        await ctx.session_input.touch(t.alloc_id)  # a terminal opened is a person's activity
        await Relay(ws, conn, lambda: ctx.session_input.touch(t.alloc_id)).run()
    except RelayClosed:  # the node's link went before the terminal opened
        with contextlib.suppress(Exception):
            await ws.send_text(DROPPED.decode())
    except (FrameError, TimeoutError, ValueError, TypeError, KeyError) as exc:
        with contextlib.suppress(Exception):
            await ws.send_text(json.dumps({"t": "error", "detail": str(exc)[:300]}))
    finally:
        conn.close()
        with contextlib.suppress(Exception):
            await ws.close()


async def _open(ws: WebSocket, conn: RelayConn) -> None:
    """The person's first message, checked and passed on."""
    message = await asyncio.wait_for(ws.receive(), OPEN_TIMEOUT_S)
    text = message.get("text")
    if not isinstance(text, str):
        raise FrameError('the first message must be {"t": "open", ...} as text')
    if len(text) > MAX_CONTROL:
        raise FrameError("the open message is too long")
    frame = json.loads(text)
    if not isinstance(frame, dict) or frame.get("t") != "open":
        raise FrameError('the first message must be {"t": "open", ...}')
    req = open_request({**frame, "kind": "terminal"})
    # as the node gets it: characters beyond ASCII grow sixfold as \uXXXX, and a message
    # over the link's bound would drop the session's link for every terminal on it
    if len(json.dumps({"t": "open", **req, "s": 2**31}, separators=(",", ":"))) > MAX_CONTROL:
        raise FrameError("the open message is too long once encoded for the node")
    await conn.control(t="open", **req)


CONTROLS_PER_S, CONTROLS_BURST = 20.0, 40.0  # a person resizes and interrupts far less


class Relay:
    """A person's socket and a stream, each way, with the person's input against credit."""

    def __init__(
        self, ws: WebSocket, conn: RelayConn, acted: Callable[[], Awaitable[None]] | None = None
    ):
        """``acted``: called as the person types (idle culling's clock)."""
        self.ws, self.conn = ws, conn
        self.acted = acted
        self.credit = WINDOW
        self.room = asyncio.Event()
        self.room.set()
        # resize, signal and eof carry no credit: paced, so a flood of them waits on its own
        # socket instead of taking the server's and the node's time from other tenants
        self.controls = Pace(CONTROLS_PER_S, CONTROLS_BURST)

    async def run(self) -> None:
        """Until either side ends; a garbled frame from the person is answered with an
        error, a link to the node that drops with ``closed`` and ``retry`` (the terminal runs
        on there: the client attaches again)."""
        up, down = asyncio.create_task(self._up()), asyncio.create_task(self._down())
        try:
            await asyncio.wait((up, down), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (up, down):
                task.cancel()
            await asyncio.gather(up, down, return_exceptions=True)
        for task in (up, down):
            failed = None if task.cancelled() else task.exception()
            if isinstance(failed, RelayClosed):
                with contextlib.suppress(Exception):
                    await self.ws.send_text(DROPPED.decode())
                return
            if isinstance(failed, (FrameError, ValueError, TypeError)):
                with contextlib.suppress(Exception):
                    await self.ws.send_text(json.dumps({"t": "error", "detail":
                                                        f"bad frame: {failed}"[:300]}))  # fmt: skip
                break
        with contextlib.suppress(RelayClosed):
            await self.conn.control(t="close")

    async def _up(self) -> None:
        while True:
            message = await self.ws.receive()
            if message["type"] == "websocket.disconnect":
                return
            data = message.get("bytes")
            if data is not None:
                if len(data) - 1 > WINDOW:  # no client of ours sends that much at once
                    raise FrameError(f"an input frame over {WINDOW} bytes")
                for at in range(1, len(data), CHUNK):  # each chunk against the node's credit
                    chunk = data[at : at + CHUNK]
                    while self.credit < len(chunk):
                        self.room.clear()
                        await self.room.wait()
                    self.credit -= len(chunk)
                    await self.conn.data(0, chunk)
                if self.acted is not None and len(data) > 1:  # after: no keystroke waits on it
                    await self.acted()
                continue
            text = message.get("text") or ""
            if len(text) > MAX_CONTROL:
                raise FrameError("a control message is too long")
            frame = json.loads(text)
            kind = frame.get("t") if isinstance(frame, dict) else None
            if kind in ("resize", "signal", "eof"):
                while (wait := self.controls.take("", time.monotonic())) is not None:
                    await asyncio.sleep(wait)
            if kind == "resize":
                cols, rows = (
                    bounded(frame.get("cols"), "cols", 10_000),
                    bounded(frame.get("rows"), "rows", 10_000),
                )
                await self.conn.control(t="resize", cols=cols, rows=rows)
            elif kind in ("signal", "eof"):
                if kind == "signal":
                    await self.conn.control(t="signal", sig=signal_of(frame.get("sig")))
                else:
                    await self.conn.control(t="eof")
                if self.acted is not None:
                    await self.acted()
            elif kind == "close":
                return

    async def _down(self) -> None:
        while True:
            kind, payload = await self.conn.receive()
            if kind == BINARY:
                await self.ws.send_bytes(payload)
                await self.conn.control(t="ack", n=max(1, len(payload) - 1))
                continue
            frame = json.loads(payload)
            if frame.get("t") == "ack":
                self.credit = min(WINDOW, self.credit + int(frame.get("n") or 0))
                self.room.set()
                continue
            await self.ws.send_text(payload.decode())
            if frame.get("t") in ("exit", "closed", "error"):
                return


# -- the agent's side --------------------------------------------------------------------
def _tunnel_refusal(ctx: ServerContext, name: str, alloc_id: int) -> str | None:
    with ctx.db.read() as s:
        row = s.execute(
            select(AllocationRow.state, JobRow.interactive)
            .join(JobRow, JobRow.id == AllocationRow.job_id)
            .join(AllocationNodeRow, AllocationNodeRow.allocation_id == AllocationRow.id)
            .where(AllocationRow.id == alloc_id, AllocationNodeRow.node == name)
        ).one_or_none()
    if row is None or row[0] != "active":
        return f"allocation {alloc_id} is not live on node {name}"
    if row[1] is None:
        return f"allocation {alloc_id} is no interactive session"
    return None


async def _agent(ws: WebSocket, ctx: ServerContext, name: str) -> str | None:
    """Why an upgrade of node ``name``'s tunnel is refused, or None: only that node's agent
    (its token scoped to it, or to every node; its client certificate where the server asks
    for one) — not an admin, whose socket would see a tenant's keystrokes."""
    who = await caller(ws, ctx)
    if isinstance(who, tuple):
        return who[1]
    if who.role is not Role.AGENT or who.node not in (name, "*"):
        return f"{who.user} may not link sessions of node {name} (its agent's token only)"
    if ctx.settings.tls_client_ca_file is not None:
        return agent_refusal(ws.scope.get("state") or {}, who.node)
    return None


@router.websocket("/nodes/{name}/tunnels/{alloc_id}")
async def tunnel(ws: WebSocket, name: str, alloc_id: int) -> None:
    ctx: ServerContext = ws.app.state.ctx
    refusal = await _agent(ws, ctx, name)
    if refusal is not None:
        await deny(ws, 403, refusal)
        return
    refusal = await run_in_threadpool(_tunnel_refusal, ctx, name, alloc_id)
    if refusal is not None:
        await deny(ws, 409, refusal)
        return
    await ws.accept()

    async def receive() -> str | bytes | None:
        message = await ws.receive()
        if message["type"] == "websocket.disconnect":
            return None
        return message.get("bytes") or message.get("text") or ""

    lock = asyncio.Lock()  # one send at a time on the agent's socket

    async def send_text(text: str) -> None:
        async with lock:
            await ws.send_text(text)

    async def send_bytes(data: bytes) -> None:
        async with lock:
            await ws.send_bytes(data)

    with contextlib.suppress(RuntimeError, ConnectionError):
        await ctx.tunnels.serve(alloc_id, receive, send_text, send_bytes)

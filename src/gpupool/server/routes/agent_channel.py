"""An agent's channel: one WebSocket per agent (``/api/v1/nodes/{name}/channel``) instead of a
request per heartbeat and per long poll.

The agent sends beats, JSON text frames ``{"beat": seq}``, every heartbeat interval; one that
carries telemetry (``{"beat": seq, "devices": [...]}``, a heartbeat's body) is written like a
heartbeat, about once a minute. The beats of all agents are written together
(``heartbeats.BeatBatcher``). Each beat is answered once committed: ``{"ok": seq, "state":
...}`` (with ``"node"``, its state and lease terms, for telemetry) — the agent renews its lease
from the time it sent that beat — or ``{"refused": seq, "detail": ...}``. The server pushes
``{"orders": ...}`` (what ``GET /nodes/{name}/orders`` answers) on connecting and whenever the
node's orders change (``change_feed``), so no request waits for them.

An agent whose upgrade is refused (a server with ``agent_channel`` off, or one older than the
channel: 403 / 404) heartbeats and long-polls over HTTP as before; an older agent never opens
one. Authentication is the agent's bearer token in the upgrade request, as for HTTP."""

import asyncio
import contextlib
import json
import logging
import time
from typing import Any

from fastapi import APIRouter, WebSocket, WebSocketDisconnect
from pydantic import ValidationError

from gpupool.server.client_address import client_address
from gpupool.server.deps import ServerContext, agent_for, principal_of
from gpupool.server.errors import ApiError, field_path
from gpupool.server.node_orders import watch_orders
from gpupool.server.routes.nodes import lease_terms
from gpupool.server.schemas import HeartbeatIn

router = APIRouter(prefix="/api/v1", tags=["agents"])
log = logging.getLogger(__name__)
POLICY_VIOLATION = 1008  # WebSocket close codes (RFC 6455)
GOING_AWAY = 1001
ORDERS_RECHECK_S = 300.0  # orders are read again at least this often, changed or not
MAX_IN_FLIGHT = 8  # frames of one agent being answered at once; more wait (backpressure)


@router.websocket("/nodes/{name}/channel")
async def channel(ws: WebSocket, name: str) -> None:
    ctx: ServerContext = ws.app.state.ctx
    refusal = await _refusal(ws, ctx, name)
    if refusal is not None:  # before accepting: the client sees 403 and the reason is logged
        log.info("channel for node %s refused: %s", name, refusal)
        await ws.close(POLICY_VIOLATION, refusal)
        return
    await ws.accept()
    lock = asyncio.Lock()

    async def send(frame: dict[str, Any]) -> None:
        async with lock:
            await ws.send_text(json.dumps(frame, separators=(",", ":")))

    async def answer(text: str) -> None:
        with contextlib.suppress(RuntimeError, WebSocketDisconnect):  # gone meanwhile
            await send(await _answer(ctx, name, text))

    pusher = asyncio.create_task(_push_orders(ctx, name, send))
    answering: set[asyncio.Task] = set()
    try:
        while True:
            # an agent silent this long is lost anyway: its socket is not kept (no pings)
            async with asyncio.timeout(ctx.settings.heartbeat_timeout_s):
                text = await ws.receive_text()
            # answered concurrently: a bare beat waits for the next flush, and beats that
            # came faster than flushes must not queue behind it (their answers, and the
            # lease they renew, would fall further behind with every beat)
            if len(answering) >= MAX_IN_FLIGHT:
                await asyncio.wait(answering, return_when=asyncio.FIRST_COMPLETED)
            task = asyncio.create_task(answer(text))
            answering.add(task)
            task.add_done_callback(answering.discard)
    except TimeoutError:
        with contextlib.suppress(RuntimeError, WebSocketDisconnect):
            await ws.close(GOING_AWAY, "no beat for the node-lost timeout")
    except (WebSocketDisconnect, RuntimeError):  # the agent went, or the socket closed
        pass
    finally:
        for task in (pusher, *answering):
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await pusher


async def _refusal(ws: WebSocket, ctx: ServerContext, name: str) -> str | None:
    """Why this upgrade is refused, or None."""
    if not ctx.settings.agent_channel:
        return "this server has agent channels off (agent_channel)"
    scheme, _, token = (ws.headers.get("authorization") or "").partition(" ")
    if scheme.lower() != "bearer" or not token:
        return "missing bearer token (Authorization: Bearer <token>)"
    now = time.time()
    who = await principal_of(ctx, token.strip(), now)
    if who is None:  # counted as on HTTP: an upgrade is no way around the limiter
        address = client_address(ws)
        wait = ctx.auth_failures.retry_after(address, now)
        ctx.auth_failures.failed(address, now)
        if wait is not None:
            return f"too many failed authentications from {address}; retry in {wait:.0f} s"
        return "unknown, revoked or expired token, or a disabled user"
    try:
        agent_for(who, name)
    except ApiError as exc:
        return exc.detail
    return None


async def _answer(ctx: ServerContext, name: str, text: str) -> dict[str, Any]:
    """The answer to one frame from the agent."""
    try:
        frame = json.loads(text)
        seq = frame["beat"] if isinstance(frame, dict) else None
    except (ValueError, KeyError):
        seq = None
    if type(seq) is not int:
        return {"refused": None, "detail": 'a frame must be {"beat": <int>[, "devices": [...]]}'}
    try:
        if "devices" not in frame:
            state = await ctx.beats.beat(name)
            if state is None:
                return {"refused": seq, "status": 404, "detail": f"node {name} not found"}
            return {"ok": seq, "state": state}
        body = HeartbeatIn.model_validate({"devices": frame["devices"]})
        state = await ctx.beats.beat(name, body.devices)
        if state is None:
            return {"refused": seq, "status": 404, "detail": f"node {name} not found"}
        # the node's state and lease terms (not the whole node, as an HTTP heartbeat
        # answers: the agent reads nothing else of it)
        return {"ok": seq, "state": state, "node": {"state": state, **lease_terms(ctx.settings)}}
    except ValidationError as exc:
        first = exc.errors()[0]
        where = field_path(tuple(first["loc"]))
        return {"refused": seq, "status": 422, "detail": f"{where}: {first['msg']}"}
    except ApiError as exc:
        return {"refused": seq, "status": exc.status, "detail": exc.detail}
    except Exception as exc:  # the database away: the agent's lease is not renewed
        log.warning("channel beat of node %s failed: %s", name, exc)
        return {"refused": seq, "status": 503, "detail": "the server could not record the beat"}


async def _push_orders(ctx: ServerContext, name: str, send) -> None:
    """Send the node's orders now and after every change of them, until the socket closes."""
    last: int | None = None
    while not ctx.changes.stopped:
        try:
            reads = watch_orders(ctx, name, ORDERS_RECHECK_S, forever=True)
            async with contextlib.aclosing(reads):
                async for out, digest in reads:
                    if digest != last:
                        await send({"orders": out.model_dump(mode="json")})
                        last = digest
        except ApiError as exc:
            await send({"refused": None, "status": exc.status, "detail": exc.detail})
            return
        except Exception as exc:  # the database away: try again shortly
            log.warning("channel orders of node %s: %s", name, exc)
            await asyncio.sleep(1.0)

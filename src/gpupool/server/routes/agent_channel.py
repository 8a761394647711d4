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
from functools import partial
from typing import Any

from fastapi import APIRouter, WebSocket, WebSocketDisconnect
from pydantic import ValidationError

from gpupool.server.client_address import client_address
from gpupool.server.client_certs import agent_refusal
from gpupool.server.deps import ServerContext, agent_for, principal_of
from gpupool.server.errors import ApiError, field_path
from gpupool.server.heartbeats import BeatOutcome
from gpupool.server.node_orders import watch_orders
from gpupool.server.routes.nodes import lease_terms
from gpupool.server.schemas import HeartbeatIn

router = APIRouter(prefix="/api/v1", tags=["agents"])
log = logging.getLogger(__name__)
POLICY_VIOLATION = 1008  # WebSocket close codes (RFC 6455)
GOING_AWAY = 1001
ORDERS_RECHECK_S = 300.0  # orders are read again at least this often, changed or not
MAX_IN_FLIGHT = 8  # frames of one agent being answered at once; more wait (backpressure)
MAX_LAG_S = 86_400.0 * 365
BAD_LAG = "seconds its agent's round has run: a number from 0"
BAD_FRAME = 'a frame must be {"beat": <int>[, "devices": [...]]}'


@router.websocket("/nodes/{name}/channel")
async def channel(ws: WebSocket, name: str) -> None:
    ctx: ServerContext = ws.app.state.ctx
    refusal = await _refusal(ws, ctx, name)
    if refusal is not None:  # before accepting: the client sees 403 and the reason is logged
        log.info("channel for node %s refused: %s", name, refusal)
        await ws.close(POLICY_VIOLATION, refusal)
        return
    await ws.accept()
    await _Channel(ws, ctx, name).serve()


class _Channel:
    """One agent's open channel. Frames are read by one task, answers and pushed orders
    written by another (the only one that sends), and a watchdog closes the socket after
    the node-lost timeout without a frame. A beat joins the next flush with a callback that
    posts its answer: no task, future or timer per frame (a timeout and a task per
    frame were most of what 1,000 idle agents cost the server; docs/performance-control-
    plane.md)."""

    def __init__(self, ws: WebSocket, ctx: ServerContext, name: str):
        self.ws, self.ctx, self.name = ws, ctx, name
        self.loop = asyncio.get_running_loop()
        self.heard = self.loop.time()  # when the last frame came
        self.outbox: list[tuple[dict[str, Any], bool]] = []  # (frame, answers one)
        self.posted = asyncio.Event()
        # frames received and not yet answered on the socket: at MAX_IN_FLIGHT the reader
        # waits (an agent that floods frames, or reads no answers, is not read further)
        self.unanswered = 0
        self.room = asyncio.Event()
        self.room.set()

    async def serve(self) -> None:
        # the socket is done when its reader, writer or watchdog is (the pusher may end
        # earlier: a refusal it posted is still written)
        ends = [asyncio.create_task(c) for c in (self._read(), self._write(), self._watch())]
        pusher = asyncio.create_task(_push_orders(self.ctx, self.name, self.push))
        try:
            await asyncio.wait(ends, return_when=asyncio.FIRST_COMPLETED)
        finally:
            tasks = (*ends, pusher)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def push(self, frame: dict[str, Any]) -> None:
        self._post(frame, answers=False)

    def _post(self, frame: dict[str, Any], answers: bool = True) -> None:
        self.outbox.append((frame, answers))
        self.posted.set()

    async def _read(self) -> None:
        with contextlib.suppress(WebSocketDisconnect, RuntimeError):  # gone, or closed
            while True:
                text = await self.ws.receive_text()
                self.heard = self.loop.time()
                self.unanswered += 1
                self._take(text)
                if self.unanswered >= MAX_IN_FLIGHT:
                    self.room.clear()
                    await self.room.wait()

    async def _write(self) -> None:
        with contextlib.suppress(WebSocketDisconnect, RuntimeError):  # gone, or closed
            while True:
                await self.posted.wait()
                self.posted.clear()
                frames, self.outbox = self.outbox, []
                for frame, answers in frames:
                    await self.ws.send_text(json.dumps(frame, separators=(",", ":")))
                    if answers:
                        self.unanswered -= 1
                        if self.unanswered < MAX_IN_FLIGHT:
                            self.room.set()

    async def _watch(self) -> None:
        """Close the socket once no frame came for the node-lost timeout: an agent silent
        this long is lost anyway, and its socket is not kept (the server sends no pings)."""
        timeout = self.ctx.settings.heartbeat_timeout_s
        while (left := self.heard + timeout - self.loop.time()) > 0:
            await asyncio.sleep(left)
        with contextlib.suppress(RuntimeError, WebSocketDisconnect):
            await self.ws.close(GOING_AWAY, "no beat for the node-lost timeout")

    def _take(self, text: str) -> None:
        """Answer one frame: a beat (its telemetry validated first) joins the next flush,
        whose commit posts the answer."""
        try:
            frame = json.loads(text)
            seq = frame["beat"] if isinstance(frame, dict) else None
        except (ValueError, KeyError):
            seq = None
        if type(seq) is not int:
            self._post({"refused": None, "detail": BAD_FRAME})
            return
        devices = None
        if "devices" in frame:
            try:
                devices = HeartbeatIn.model_validate({"devices": frame["devices"]}).devices
            except ValidationError as exc:
                first = exc.errors()[0]
                where = field_path(tuple(first["loc"]))
                self._post({"refused": seq, "status": 422, "detail": f"{where}: {first['msg']}"})
                return
        lag = frame.get("lag")
        if lag is not None and (
            type(lag) not in (int, float) or not 0 <= lag <= MAX_LAG_S  # NaN fails too
        ):
            self._post({"refused": seq, "status": 422, "detail": f"lag: {BAD_LAG}"})
            return
        done = partial(self._beaten, seq, devices is not None)
        self.ctx.beats.add(self.name, done, devices, None if lag is None else float(lag))

    def _beaten(self, seq: int, telemetry: bool, outcome: BeatOutcome) -> None:
        answer = _beat_answer(self.name, seq, outcome)
        if telemetry and "ok" in answer:  # the node's state and lease terms (not the whole
            # node, as an HTTP heartbeat answers: the agent reads nothing else of it)
            answer["node"] = {"state": outcome, **lease_terms(self.ctx.settings)}
        self._post(answer)


def _beat_answer(name: str, seq: int, outcome: BeatOutcome) -> dict[str, Any]:
    if isinstance(outcome, ApiError):
        return {"refused": seq, "status": outcome.status, "detail": outcome.detail}
    if isinstance(outcome, Exception):  # the database away: the agent's lease is not renewed
        log.warning("channel beat of node %s failed: %s", name, outcome)
        return {"refused": seq, "status": 503, "detail": "the server could not record the beat"}
    if outcome is None:
        return {"refused": seq, "status": 404, "detail": f"node {name} not found"}
    return {"ok": seq, "state": outcome}


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
    if ctx.settings.tls_client_ca_file is not None:
        refused = agent_refusal(ws.scope.get("state") or {}, who.node)
        if refused is not None:
            return refused
    try:
        agent_for(who, name)
    except ApiError as exc:
        return exc.detail
    return None


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

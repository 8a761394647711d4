"""The agent's channel to its server: one WebSocket (``/api/v1/nodes/{name}/channel``, see
``gpupool.server.routes.agent_channel``) that carries the agent's beats and brings its orders.

While the channel is up, a bare beat every heartbeat interval renews the node's lease (the
agent renews it from the time it sent the beat, once the server answers that it recorded it),
telemetry travels as a beat about once a minute, a beat says how long the agent's loop has
been busy in one round when that is past ``LAG_SAID_S`` (the server stops placing work on a
node whose agent is far behind), and the server pushes new orders the moment
they change — no HTTP request at all while nothing happens. When it goes down, the agent
heartbeats and long-polls over HTTP at once, and this thread connects again with backoff. A
server that refuses the upgrade (403: channels off; 404: older than channels) is not asked
again for ``REFUSED_RETRY_S``."""

import json
import logging
import random
import ssl
import threading
import time
from collections.abc import Callable
from typing import Any

from websockets.exceptions import InvalidStatus, WebSocketException
from websockets.sync.client import ClientConnection, connect

from gpupool.agent.backoff import backoff_s
from gpupool.model.protocol import OrdersOut, OrdersUnreadable, read_orders

LAG_SAID_S = 2.0  # a round of the agent's loop longer than this is said on its beats
REFUSED_BEAT_RETRY_S = 2.0  # a refused beat is sent again this soon, not an interval later
log = logging.getLogger("gpupool.agent.channel")
# the websockets library's own logger: its reader thread reports a peer that closed while
# bytes were still arriving (every agent's channel when a server stops) as "unexpected internal
# error" with a traceback; the closing reaches us as an exception and is logged above
WIRE_LOG = logging.getLogger("gpupool.agent.channel.wire")
WIRE_LOG.setLevel(logging.CRITICAL)
REFUSED_RETRY_S = 600.0
MAX_FRAME_BYTES = 64 * 1024 * 1024  # orders of a busy node; the server sends nothing bigger


class ChannelClosed(Exception):
    """The server ended the channel, or stopped answering beats."""


class AgentChannel:
    def __init__(
        self,
        server: str | Callable[[], str],
        token: str,
        node: str,
        interval: Callable[[], float],
        on_ok: Callable[[dict[str, Any], float], None],
        on_orders: Callable[[OrdersOut], None],
        on_down: Callable[[], None],
        tls: ssl.SSLContext | None = None,
        lag: Callable[[], float] = lambda: 0.0,
    ):
        """``interval``: the heartbeat interval now (the server's advice may change it);
        ``on_ok(frame, sent)``: a beat sent at ``sent`` (monotonic) was recorded;
        ``on_orders``: what ``GET /nodes/{name}/orders`` would answer; ``on_down``: the
        channel went down (the agent heartbeats over HTTP meanwhile)."""
        self._server = server if callable(server) else (lambda: server)
        self._node = node
        self.headers = {"Authorization": f"Bearer {token}"}
        self._tls = tls
        self.interval = interval
        self.on_ok, self.on_orders, self.on_down = on_ok, on_orders, on_down
        self.lag = lag  # how long the agent's loop has been in its current round
        self._lag_said = False
        self.up = threading.Event()
        self.down = threading.Event()  # the opposite of ``up``, to wait on
        self.down.set()
        self.refused: str | None = None  # why the server refused the upgrade, last time
        self.beats = 0
        self.telemetry_refused: str | None = None  # the server refused our telemetry: use HTTP
        self._ws: ClientConnection | None = None
        self._seq = 0
        self._sent: dict[int, tuple[float, bool]] = {}  # seq: (sent at, carried telemetry)
        self._lock = threading.Lock()
        self._answered = 0.0  # when a beat was last answered

    @property
    def url(self) -> str:
        base = self._server().rstrip("/")
        return "ws" + base.removeprefix("http") + f"/api/v1/nodes/{self._node}/channel"

    def run(self, stop: threading.Event) -> None:
        failures = 0
        rng = random.Random()
        while not stop.is_set():
            connected = False
            try:
                url = self.url  # the server the agent talks to now (it moves on failures)
                with connect(
                    url,
                    additional_headers=self.headers,
                    ssl=self._tls if url.startswith("wss:") else None,
                    open_timeout=10,
                    close_timeout=2,
                    ping_interval=None,  # beats every few seconds say more than pings
                    compression=None,  # frames of a few bytes: deflate costs, saves nothing
                    max_size=MAX_FRAME_BYTES,
                    logger=WIRE_LOG,
                ) as ws:
                    connected, failures, self.refused = True, 0, None
                    try:
                        self._serve(ws, stop)
                    finally:
                        self._down()
            except InvalidStatus as exc:
                code = exc.response.status_code
                if code in (403, 404):
                    self.refused = f"{code}: the server refused the channel"
                    log.info("channel: %s; heartbeats over HTTP", self.refused)
                    stop.wait(REFUSED_RETRY_S)
                    continue
                failures += 1
            except (ChannelClosed, OSError, TimeoutError, WebSocketException) as exc:
                if connected and not stop.is_set():
                    log.info("channel down (%s); heartbeats over HTTP until it is back", exc)
                elif not connected:
                    failures += 1
                    log.debug("channel: cannot connect: %s", exc)
            if failures:
                stop.wait(backoff_s(1.0, failures, rng))
            else:  # not every agent back in the same instant
                stop.wait(rng.uniform(0.5, 1.5))

    def close(self) -> None:
        """End the channel now (the agent is stopping); ``run`` returns once its stop is set."""
        with self._lock:
            ws = self._ws
        if ws is not None:
            ws.close()

    def send_telemetry(self, devices: list[dict[str, Any]]) -> bool:
        """Send telemetry as a beat now; False if the channel is not up."""
        return self._beat(devices)

    def _beat(self, devices: list[dict[str, Any]] | None = None) -> bool:
        with self._lock:
            ws = self._ws
            if ws is None:
                return False
            self._seq += 1
            frame: dict[str, Any] = {"beat": self._seq}
            if devices is not None:
                frame["devices"] = devices
            lag = self.lag()  # said while behind, and once more (0) when caught up
            if lag >= LAG_SAID_S or self._lag_said:
                frame["lag"] = round(lag, 1) if lag >= LAG_SAID_S else 0
                self._lag_said = lag >= LAG_SAID_S
            self._sent[self._seq] = (time.monotonic(), devices is not None)
            if len(self._sent) > 64:  # answers that never came
                del self._sent[min(self._sent)]
        try:  # not under the lock: a send into a closing socket waits for its handshake
            ws.send(json.dumps(frame, separators=(",", ":")))
        except (OSError, WebSocketException):
            return False
        self.beats += 1
        return True

    def _serve(self, ws: ClientConnection, stop: threading.Event) -> None:
        with self._lock:
            self._ws, self._sent = ws, {}
        self.down.clear()
        self.up.set()
        next_beat = 0.0
        self._answered = time.monotonic()
        while not stop.is_set():
            now = time.monotonic()
            if now >= next_beat:
                self._beat()
                next_beat = now + self.interval()
            if now - self._answered > 2 * self.interval() + 5:  # pushed orders do not count
                raise ChannelClosed("no answer to beats")
            try:
                text = ws.recv(timeout=max(0.05, next_beat - now))
            except TimeoutError:
                continue
            if self._handle(text):  # a beat refused (the database away): again soon
                next_beat = min(next_beat, time.monotonic() + REFUSED_BEAT_RETRY_S)

    def _handle(self, text: str | bytes) -> bool:
        """Act on one frame; True when it refused a beat that should be sent again soon."""
        try:
            frame = json.loads(text)
        except ValueError:
            log.warning("channel: a frame that is not JSON, ignored")
            return False
        if not isinstance(frame, dict):
            return False
        if "orders" in frame:
            try:
                self.on_orders(read_orders(frame["orders"]))
            except OrdersUnreadable as exc:
                log.warning("channel: %s; ignored", exc)
        elif "ok" in frame:
            if type(frame["ok"]) is not int:
                return False
            with self._lock:
                sent = self._sent.pop(frame["ok"], None)
            self._answered = time.monotonic()
            if sent is not None:
                self.on_ok(frame, sent[0])
        elif "refused" in frame:
            seq = frame["refused"]
            with self._lock:
                sent = self._sent.pop(seq, None) if type(seq) is int else None
            detail = frame.get("detail")
            if frame.get("status") == 404 or sent is None:
                raise ChannelClosed(f"the server refused: {detail}")
            if sent[1] and frame.get("status") == 422:  # a newer field this server lacks
                self.telemetry_refused = str(detail)
            log.warning("channel: beat refused: %s", detail)
            return True
        return False

    def _down(self) -> None:
        with self._lock:
            self._ws = None
        was_up = self.up.is_set()
        self.up.clear()
        self.down.set()
        if was_up:
            self.on_down()

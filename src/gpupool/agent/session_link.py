"""One interactive session's link to the server: a WebSocket the agent dials out
(``/api/v1/nodes/{node}/tunnels/{alloc}``, its own bearer token) that carries the session's
streams (``gpupool.model.relay``) — terminals attached to it, commands run in it — and
the terminals themselves, which outlive the link: a
dropped connection detaches them, the next link (the agent dials again, with backoff) lets a
person attach again and see what they printed meanwhile (the last ``RING`` bytes).

Two threads of its own, none of the agent's loop: the *link* receives frames and queues them;
the *pump* owns every descriptor (the terminals') and sends. What a terminal prints goes
out only against the stream's credit, so a terminal
that prints without end holds at most a window at the server; a terminal nobody is attached
to is read at most ``DETACHED_BPS`` (its printing then waits), and keeps what it read last."""

import collections
import contextlib
import json
import logging
import os
import random
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from websockets.exceptions import InvalidStatus, WebSocketException
from websockets.sync.client import ClientConnection, connect

from gpupool.agent.app_port import AppStream, AppUnreachable, connect_later
from gpupool.agent.backoff import backoff_s
from gpupool.agent.terminals import Terminal, TerminalError, Where, spawn
from gpupool.model.relay import (
    CHUNK,
    MAX_COLS,
    MAX_MESSAGE,
    MAX_ROWS,
    MAX_STREAMS,
    MAX_TERMINALS,
    WINDOW,
    FrameError,
    data_frame,
    open_request,
    read_data,
    signal_of,
    size,
)

log = logging.getLogger("gpupool.agent.sessions")
WIRE_LOG = logging.getLogger("gpupool.agent.sessions.wire")
WIRE_LOG.setLevel(logging.CRITICAL)
DETACHED_BPS = 64 * 1024  # a terminal nobody watches is read this fast at most
MAX_INBOX = 10_000  # frames queued from the server before the link is dropped
END_GRACE_S = 5.0  # a session that ends: its terminals hung up, killed this long after
SIGNALS = {"INT": 2, "TERM": 15, "HUP": 1, "QUIT": 3, "KILL": 9}


def notice_bytes(text: str) -> bytes:
    return f"\r\n\x1b[1m[gpupool] {text}\x1b[0m\r\n".encode(errors="replace")


class Stream:
    """One stream of the tunnel: a terminal attached."""

    def __init__(self, sid: int, terminal: Terminal):
        self.sid = sid
        self.terminal = terminal
        self.credit = WINDOW  # bytes it may still send the server
        self.inbox = bytearray()  # from the server, to write on
        self.eof = False  # the server sends no more input


# a tenant's app on the node's own loopback (tenant users without network namespaces) would
# be reachable by every tenant's workload there, and its port taken first by any of them
NO_WALLED_NETWORK = (
    "this node runs tenants' workloads without network namespaces of their own "
    "(--no-tenant-network): a web app's port would be on the node's loopback, open to every "
    "tenant there, so it is not proxied; run notebooks on nodes with tenant networks"
)


class SessionLink:
    def __init__(
        self,
        alloc_id: int,
        url: Callable[[], str],
        token: str,
        where: Callable[[], Where],
        folder: Path,
        tls: ssl.SSLContext | None = None,
        app_port: int | None = None,
    ):
        """``url``: the tunnel's WebSocket URL now; ``where``: the workload's sandbox;
        ``app_port``: a notebook's web app's port in the workload's network namespace."""
        self.alloc_id = alloc_id
        self.app_port = app_port
        self.apps: dict[int, AppStream] = {}  # streams to the web app, by stream id
        self._url, self._token, self._tls = url, token, tls
        self._where, self._folder = where, folder
        self.ws: ClientConnection | None = None
        self.up = threading.Event()
        self._inbox: collections.deque[tuple[str, Any]] = collections.deque()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        # the pump closes the pipe when it ends while the link thread may still post: a
        # write after the close would land on whatever the kernel gave that number next
        # (another session's pipe, a socket, a database file)
        self._wake_lock = threading.Lock()
        self._wake_closed = False
        self._stop = threading.Event()  # both threads end
        self.terminals: dict[int, Terminal] = {}
        self.streams: dict[int, Stream] = {}
        self._numbers = 0
        self._budget = float(DETACHED_BPS)  # what detached terminals may still be read
        self._budget_at = time.monotonic()
        self._ending_at: float | None = None
        self.threads: list[threading.Thread] = []

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> None:
        for target, name in ((self._link, "link"), (self._pump, "pump")):
            t = threading.Thread(target=target, daemon=True, name=f"session-{self.alloc_id}-{name}")
            t.start()
            self.threads.append(t)

    def end(self, why: str) -> None:
        """The session ends (its allocation released): terminals are told and hung up."""
        self._post("end", why)

    def tell(self, text: str) -> None:
        """A notice in every terminal of the session (an idle warning)."""
        self._post("tell", text)

    @property
    def done(self) -> bool:
        return self._stop.is_set()

    @property
    def ending(self) -> bool:
        return self._ending_at is not None

    def sessions_of_terminals(self) -> set[int]:
        """The session ids of its live terminals (their processes count as the session's)."""
        return {t.proc.pid for t in list(self.terminals.values()) if t.exit_code is None}

    def _post(self, kind: str, value: Any = None) -> None:
        self._inbox.append((kind, value))
        with self._wake_lock, contextlib.suppress(BlockingIOError, OSError):
            if not self._wake_closed:
                os.write(self._wake_w, b"x")

    # -- the link thread ------------------------------------------------------------------
    def _link(self) -> None:
        failures = 0
        rng = random.Random()
        while not self._stop.is_set():
            try:
                url = self._url()
                with connect(
                    url,
                    additional_headers={"Authorization": f"Bearer {self._token}"},
                    ssl=self._tls if url.startswith("wss:") else None,
                    open_timeout=10, close_timeout=2, ping_interval=20, ping_timeout=20,
                    max_size=MAX_MESSAGE, compression=None, logger=WIRE_LOG,
                ) as ws:  # fmt: skip
                    failures = 0
                    self.ws = ws
                    self.up.set()
                    self._post("up")
                    self._receive(ws)
            except InvalidStatus as exc:
                failures += 1
                log.info("session %s: tunnel refused (%s)", self.alloc_id,
                         exc.response.status_code)  # fmt: skip
            except (OSError, TimeoutError, WebSocketException) as exc:
                failures += 1
                log.debug("session %s: tunnel down: %s", self.alloc_id, exc)
            finally:
                if self.ws is not None:
                    self.ws = None
                    self.up.clear()
                    self._post("down")
            if not self._stop.is_set():
                self._stop.wait(backoff_s(0.5, failures, rng) if failures else 0.2)

    def _receive(self, ws: ClientConnection) -> None:
        while not self._stop.is_set():
            try:
                message = ws.recv(timeout=0.5)
            except TimeoutError:
                continue
            if len(self._inbox) > MAX_INBOX:
                log.warning("session %s: the server sends faster than it is served", self.alloc_id)
                return
            self._post("msg", message)

    def _send(self, message: str | bytes) -> None:
        ws = self.ws
        if ws is None:
            return
        with contextlib.suppress(OSError, WebSocketException):  # the link thread sees it go
            ws.send(message)

    def _control(self, **frame: Any) -> None:
        self._send(json.dumps(frame, separators=(",", ":")))

    # -- the pump thread ------------------------------------------------------------------
    def _pump(self) -> None:
        try:
            while True:
                self._drain_inbox()
                if self._ending_at is not None and self._finish_ending():
                    return
                self._poll_once()
                self._reap()
        except Exception:  # a bug must end this session's link, never the agent
            log.exception("session %s: its link stopped", self.alloc_id)
        finally:
            for t in self.terminals.values():
                t.kill()
                t.close()
            for app in self.apps.values():
                app.close()
            self._stop.set()
            ws = self.ws
            if ws is not None:
                ws.close()
            with self._wake_lock:
                self._wake_closed = True
                for fd in (self._wake_r, self._wake_w):
                    with contextlib.suppress(OSError):
                        os.close(fd)

    def _poll_once(self) -> None:
        poller = select.poll()
        actions: dict[int, list[tuple[str, Any, int]]] = collections.defaultdict(list)

        def want(fd: int | None, event: int, what: str, obj: Any, channel: int = 0) -> None:
            if fd is None:
                return
            actions[fd].append((what, obj, channel))
            poller.register(fd, _mask(actions[fd]))

        self._refill()
        want(self._wake_r, select.POLLIN, "wake", None)
        for t in self.terminals.values():
            stream = self.streams.get(t.stream) if t.stream is not None else None
            if (stream.credit > 0) if stream is not None else (self._budget >= 1):
                for fd, channel in t.outputs():
                    want(fd, select.POLLIN, "read", t, channel)
            if stream is not None and stream.inbox:
                want(t.input_fd(), select.POLLOUT, "write", stream)
        for app in self.apps.values():
            if app.sock is None:
                continue
            if app.credit > 0:
                want(app.sock.fileno(), select.POLLIN, "app-read", app)
            if app.inbox:
                want(app.sock.fileno(), select.POLLOUT, "app-write", app)
        for fd, events in poller.poll(200 if self._ending_at is None else 50):
            for what, obj, channel in actions.get(fd, []):
                if what == "wake":
                    with contextlib.suppress(BlockingIOError, OSError):
                        os.read(fd, 4096)
                elif what == "read" and events & (select.POLLIN | select.POLLHUP | select.POLLERR):
                    self._read_terminal(obj, fd, channel)
                elif what == "write" and events & (select.POLLOUT | select.POLLERR):
                    self._write_terminal(obj)
                elif what == "app-read" and events & (
                    select.POLLIN | select.POLLHUP | select.POLLERR
                ):
                    self._read_app(obj)
                elif what == "app-write" and events & (select.POLLOUT | select.POLLERR):
                    self._write_app(obj)

    def _refill(self) -> None:
        now = time.monotonic()
        grown = self._budget + (now - self._budget_at) * DETACHED_BPS
        self._budget = min(float(DETACHED_BPS), grown)
        self._budget_at = now

    # -- terminals ------------------------------------------------------------------------
    def _read_terminal(self, t: Terminal, fd: int, channel: int) -> str:
        """Read what it printed, as far as its stream's credit (or, detached, the budget)
        allows: "data", "none" (nothing there now), "eof", or "held" (no credit)."""
        stream = self.streams.get(t.stream) if t.stream is not None else None
        most = min(CHUNK, stream.credit) if stream is not None else min(CHUNK, int(self._budget))
        if most <= 0:
            return "held"
        try:
            data = os.read(fd, most)
        except BlockingIOError:
            return "none"
        except OSError:  # EIO: a pseudo-terminal whose last holder closed it
            data = b""
        if not data:
            if channel == 0:
                t.out_open = False
            else:
                t.err_open = False
            return "eof"
        t.keep(data)
        if stream is None:
            self._budget -= len(data)
        else:
            stream.credit -= len(data)
            self._send(data_frame(stream.sid, channel, data))
        return "data"

    def _write_terminal(self, stream: Stream) -> None:
        t = stream.terminal
        fd = t.input_fd()
        if fd is None:
            self._ack(stream, len(stream.inbox))
            stream.inbox.clear()
            return
        try:
            n = os.write(fd, stream.inbox[:CHUNK])
        except BlockingIOError:
            return
        except OSError:  # its input is gone: what was sent is dropped (and acknowledged)
            n = len(stream.inbox)
        del stream.inbox[:n]
        self._ack(stream, n)
        if stream.eof and not stream.inbox:
            t.close_input()

    # -- the web app's connections ------------------------------------------------------
    def _open_app(self, sid: int) -> None:
        if self.app_port is None:
            self._control(t="error", s=sid, detail="this session runs no web app (a notebook)")
            return
        try:
            where = self._where()
        except (OSError, ValueError) as exc:
            self._control(t="error", s=sid, detail=f"cannot read the job's sandbox: {exc}")
            return
        netns = where.netns
        if where.uid is not None and netns is None:  # tenant users, but no walled network
            self._control(t="error", s=sid, detail=NO_WALLED_NETWORK)
            return
        self.apps[sid] = AppStream(sid)
        connect_later(netns, self.app_port, lambda got: self._post("app", (sid, got)))

    def _app_connected(self, sid: int, got: socket.socket | AppUnreachable) -> None:
        app = self.apps.get(sid)
        if isinstance(got, AppUnreachable):
            if app is not None:
                del self.apps[sid]
                self._control(t="error", s=sid, detail=str(got)[:500])
            return
        if app is None or self._ending_at is not None:  # closed meanwhile
            got.close()
            return
        app.sock = got
        self._control(t="opened", s=sid, kind="port")

    def _read_app(self, app: AppStream) -> None:
        if app.sock is None:
            return
        try:
            data = app.sock.recv(min(CHUNK, app.credit))
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._end_app(app, "")
            return
        app.credit -= len(data)
        self._send(data_frame(app.sid, 0, data))

    def _write_app(self, app: AppStream) -> None:
        if app.sock is None:
            return
        try:
            n = app.sock.send(app.inbox[:CHUNK])
        except BlockingIOError:
            return
        except OSError:
            self._end_app(app, "the web app closed its connection")
            return
        del app.inbox[:n]
        if n > 0:
            self._control(t="ack", s=app.sid, n=n)
        if app.eof and not app.inbox:
            with contextlib.suppress(OSError):
                app.sock.shutdown(socket.SHUT_WR)

    def _end_app(self, app: AppStream, why: str) -> None:
        self.apps.pop(app.sid, None)
        app.close()
        if why:
            self._control(t="closed", s=app.sid, detail=why)
        else:
            self._control(t="closed", s=app.sid)

    def _app_frame(self, app: AppStream, kind: Any, frame: dict[str, Any]) -> None:
        if kind == "ack":
            app.credit = min(WINDOW, app.credit + size(frame.get("n"), "n", WINDOW))
        elif kind == "eof":
            app.eof = True
            if not app.inbox and app.sock is not None:
                with contextlib.suppress(OSError):
                    app.sock.shutdown(socket.SHUT_WR)
        elif kind == "close":
            self.apps.pop(app.sid, None)
            app.close()

    def _ack(self, stream: Stream, n: int) -> None:
        if n > 0:
            self._control(t="ack", s=stream.sid, n=n)

    def _reap(self) -> None:
        for number, t in list(self.terminals.items()):
            if not t.reap():
                continue
            if t.out_open or t.err_open:  # what it printed last, then its end
                results = {self._read_terminal(t, fd, ch) for fd, ch in t.outputs()}
                if results & {"data", "held"}:
                    continue  # more to read (as its stream takes it)
                t.out_open = t.err_open = False
            stream = self.streams.pop(t.stream, None) if t.stream is not None else None
            if stream is not None:
                self._control(t="exit", s=stream.sid, code=t.exit_code)
            t.stream = None
            if t.master is not None or t.stdin is not None or t.stdout is not None:
                t.close()
            if not t.pty or stream is not None:  # seen to its end: nothing to attach to
                del self.terminals[number]

    def _open_terminal(self, sid: int, req: dict[str, Any]) -> None:
        attach = req["attach"]
        if attach is not None:
            t = self._pick(attach)
            if t is None:
                self._control(t="error", s=sid, detail=f"no terminal {attach} in this session")
                return
            if t.stream is not None and t.stream in self.streams:
                old = self.streams.pop(t.stream)
                self._control(t="closed", s=old.sid, detail="attached from elsewhere")
            t.resize(req["cols"], req["rows"])
        else:
            ended = sorted((t for t in self.terminals.values() if t.exit_code is not None),
                           key=lambda t: t.ended_at or 0)  # fmt: skip
            while len(self.terminals) >= MAX_TERMINALS and ended:
                gone = ended.pop(0)
                del self.terminals[gone.number]
            if len(self.terminals) >= MAX_TERMINALS:
                self._control(t="error", s=sid, detail=f"this session has {MAX_TERMINALS} "
                              "terminals already (gpupool attach one)")  # fmt: skip
                return
            self._numbers += 1
            try:
                t = spawn(self._where(), self._folder, self._numbers, req["command"],
                          pty=req["pty"], cols=req["cols"], rows=req["rows"],
                          term=req["term"])  # fmt: skip
            except (TerminalError, OSError, ValueError) as exc:
                self._control(t="error", s=sid, detail=str(exc)[:500])
                return
            self.terminals[t.number] = t
        t.stream = sid
        stream = self.streams[sid] = Stream(sid, terminal=t)
        self._control(t="opened", s=sid, terminal=t.number, pty=t.pty)
        if attach is not None and t.ring:
            replay = bytes(t.ring[-min(len(t.ring), stream.credit) :])
            stream.credit -= len(replay)
            self._send(data_frame(sid, 0, replay))

    def _pick(self, attach: int | str) -> Terminal | None:
        if attach != "last":
            return self.terminals.get(int(attach))
        ranked = sorted(
            self.terminals.values(), key=lambda t: (t.exit_code is None, t.stream is None, t.number)
        )
        return ranked[-1] if ranked else None

    def _detach(self, stream: Stream) -> None:
        t = stream.terminal
        if t.stream == stream.sid:
            t.stream = None
            if not t.pty:  # a command's pipes end with their connection, as ssh's do
                t.hang_up()

    def _close_stream(self, stream: Stream) -> None:
        self.streams.pop(stream.sid, None)
        self._detach(stream)
        self._control(t="closed", s=stream.sid)

    # -- frames from the server -----------------------------------------------------------
    def _drain_inbox(self) -> None:
        while self._inbox:
            kind, value = self._inbox.popleft()
            if kind == "msg":
                self._frame(value)
            elif kind == "app":
                self._app_connected(*value)
            elif kind == "down":
                for stream in list(self.streams.values()):
                    self._detach(stream)
                self.streams.clear()
                for app in self.apps.values():  # a web app's connections end with the link
                    app.close()
                self.apps.clear()
            elif kind == "tell" and self._ending_at is None:
                self._tell(value)
            elif kind == "end" and self._ending_at is None:
                self._tell(f"{value}: this terminal ends now")
                for t in self.terminals.values():
                    t.hang_up()
                for app in list(self.apps.values()):
                    self._end_app(app, "the session ends")
                self._ending_at = time.monotonic()

    def _tell(self, text: str) -> None:
        """A notice in every terminal (and in what the next attach replays)."""
        data = notice_bytes(text)
        for t in self.terminals.values():
            if not t.pty or t.exit_code is not None:
                continue
            t.keep(data)
            if t.stream is not None and t.stream in self.streams:
                self._send(data_frame(t.stream, 0, data))

    def _finish_ending(self) -> bool:
        live = [t for t in self.terminals.values() if not t.reap()]
        return not live or time.monotonic() - (self._ending_at or 0) >= END_GRACE_S

    def _frame(self, message: str | bytes) -> None:
        if isinstance(message, bytes):
            try:
                sid, _, payload = read_data(message)
            except FrameError:
                return
            app = self.apps.get(sid)
            if app is not None:
                if len(app.inbox) + len(payload) > WINDOW:  # past its credit: not our peer
                    self._end_app(app, "sent past its window")
                else:
                    app.inbox += payload
                return
            stream = self.streams.get(sid)
            if stream is None:
                return
            if len(stream.inbox) + len(payload) > WINDOW:  # past its credit: not our peer
                self._close_stream(stream)
                return
            stream.inbox += payload
            return
        try:
            frame = json.loads(message)
        except ValueError:
            return
        if not isinstance(frame, dict):
            return
        try:
            self._control_frame(frame)
        except (FrameError, KeyError, TypeError, ValueError) as exc:
            if type(frame.get("s")) is int:
                self._control(t="error", s=frame["s"], detail=f"bad frame: {exc}"[:300])

    def _control_frame(self, frame: dict[str, Any]) -> None:
        kind, sid = frame.get("t"), frame.get("s")
        if type(sid) is not int:
            raise FrameError("s: a stream number")
        stream = self.streams.get(sid)
        if kind == "open":
            busy = len(self.streams) + len(self.apps) >= MAX_STREAMS
            if stream is not None or sid in self.apps or busy or self._ending_at:
                self._control(t="error", s=sid, detail="too many streams, or ending")
                return
            req = open_request(frame)
            if req["kind"] == "port":
                self._open_app(sid)
            else:
                self._open_terminal(sid, req)
            return
        app = self.apps.get(sid)
        if app is not None:
            self._app_frame(app, kind, frame)
            return
        if stream is None:
            return  # closed meanwhile
        if kind == "ack":
            stream.credit = min(WINDOW, stream.credit + size(frame.get("n"), "n", WINDOW))
        elif kind == "resize":
            stream.terminal.resize(size(frame.get("cols"), "cols", MAX_COLS),
                                   size(frame.get("rows"), "rows", MAX_ROWS))  # fmt: skip
        elif kind == "signal":
            stream.terminal.signal(SIGNALS[signal_of(frame.get("sig"))])
        elif kind == "eof":
            stream.eof = True
            if not stream.inbox:
                stream.terminal.close_input()
        elif kind == "close":
            self.streams.pop(sid, None)
            self._detach(stream)


def _mask(actions: list[tuple[str, Any, int]]) -> int:
    mask = 0
    for what, _, _ in actions:
        mask |= select.POLLOUT if what in ("write", "app-write") else select.POLLIN
    return mask

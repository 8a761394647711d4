"""A session's web app through one stream of its tunnel (docs/interactive.md, "Notebooks"):
an ``AppChannel`` carries bytes to and from the app's port (the agent connects there inside
the tenant's network namespace), with the relay's credit each way; over it one HTTP/1.1
exchange (``h11``; ``Connection: close``) or one WebSocket (``websockets``' sans-I/O client).

What crosses is filtered both ways (``app_headers``): the person's credentials (the
``Authorization`` header, the server's own cookies, the dashboard's CSRF header) never reach
the app, and the app's answer cannot set a cookie beyond its notebook's path, nor a service
worker's scope, HSTS or ``Clear-Site-Data`` for the server's origin."""

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator

import h11

from gpupool.model.relay import CHUNK, WINDOW
from gpupool.server.tunnels import BINARY, RelayClosed, RelayConn

OPEN_TIMEOUT_S = 15.0  # the agent's connect to the app
ANSWER_TIMEOUT_S = 300.0  # the app's silence within an HTTP answer
MAX_HEAD = 64 * 1024  # the app's status line and headers


class AppError(Exception):
    """The app cannot be reached or answered garbage; the reason goes to the person (502)."""


class AppChannel:
    """One stream to the app: what the app sends is acknowledged as it is taken (so it holds
    at most a window here); what is sent waits for the agent's credit."""

    def __init__(self, conn: RelayConn):
        self.conn = conn
        self.credit = WINDOW
        self.room = asyncio.Event()
        self.room.set()
        self.incoming: asyncio.Queue[bytes] = asyncio.Queue()  # b"": the app closed
        self.why = ""
        self._send_lock = asyncio.Lock()
        self._reader: asyncio.Task[None] | None = None
        self._closed = False

    @classmethod
    async def open(cls, conn: RelayConn) -> "AppChannel":
        chan = cls(conn)
        try:
            await conn.control(t="open", kind="port")
            kind, payload = await asyncio.wait_for(conn.receive(), OPEN_TIMEOUT_S)
        except (RelayClosed, TimeoutError) as exc:
            conn.close()
            raise AppError(f"the session's node did not answer: {exc or 'timed out'}") from None
        frame = json.loads(payload) if kind != BINARY else {}
        if not isinstance(frame, dict) or frame.get("t") != "opened":
            conn.close()
            raise AppError(str(frame.get("detail") or "the node refused the connection")[:300])
        chan._reader = asyncio.create_task(chan._read())
        return chan

    async def _read(self) -> None:
        try:
            while True:
                kind, payload = await self.conn.receive()
                if kind == BINARY:
                    if payload[1:]:
                        await self.incoming.put(payload[1:])
                    continue
                frame = json.loads(payload)
                if not isinstance(frame, dict):
                    continue
                if frame.get("t") == "ack":
                    self.credit = min(WINDOW, self.credit + int(frame.get("n") or 0))
                    self.room.set()
                elif frame.get("t") in ("closed", "error", "exit"):
                    self.why = str(frame.get("detail") or "")
                    break
        except (RelayClosed, ValueError, TypeError):
            self.why = self.why or "the link to the session's node dropped"
        finally:
            self.room.set()
            await self.incoming.put(b"")

    async def send(self, data: bytes) -> None:
        async with self._send_lock:
            for at in range(0, len(data), CHUNK):
                chunk = data[at : at + CHUNK]
                while self.credit < len(chunk):
                    if self._reader is None or self._reader.done():
                        raise RelayClosed(self.why or "the app's connection ended")
                    self.room.clear()
                    await self.room.wait()
                self.credit -= len(chunk)
                await self.conn.data(0, chunk)

    async def recv(self, timeout: float | None = None) -> bytes:
        """The app's next bytes (acknowledged now); b"" once it closed."""
        data = await asyncio.wait_for(self.incoming.get(), timeout)
        if data:
            with contextlib.suppress(RelayClosed):
                await self.conn.control(t="ack", n=len(data))
        else:
            await self.incoming.put(b"")  # stays closed for the next reader
        return data

    async def eof(self) -> None:
        with contextlib.suppress(RelayClosed):
            await self.conn.control(t="eof")

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(RelayClosed):
            await self.conn.control(t="close")
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader
        self.conn.close()


class TooLarge(Exception):
    pass


async def http_exchange(
    chan: AppChannel, method: str, target: str, headers: list[tuple[str, str]], body: bytes
) -> tuple[int, list[tuple[bytes, bytes]], h11.Connection]:
    """Send one request; the app's status and headers, and the connection to read its body
    from (``body_of``)."""
    h = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD)
    out = h.send(h11.Request(method=method, target=target,
                             headers=[*headers, ("Content-Length", str(len(body)))]))  # fmt: skip
    try:
        await chan.send(out or b"")
        if body:
            await chan.send(h.send(h11.Data(data=body)) or b"")
        await chan.send(h.send(h11.EndOfMessage()) or b"")
        while True:
            event = h.next_event()
            if event is h11.NEED_DATA:
                h.receive_data(await chan.recv(ANSWER_TIMEOUT_S))
                continue
            if isinstance(event, h11.Response):
                return event.status_code, list(event.headers), h
            if isinstance(event, h11.ConnectionClosed):
                raise AppError(chan.why or "the app closed the connection without answering")
    except h11.RemoteProtocolError as exc:
        raise AppError(f"the app's answer is not HTTP/1.1: {exc}") from None
    except (RelayClosed, TimeoutError) as exc:
        raise AppError(f"the app did not answer: {exc or 'timed out'}") from None


async def body_of(chan: AppChannel, h: h11.Connection, most: int) -> AsyncIterator[bytes]:
    """The answer's body, at most ``most`` bytes (past them it is cut off); the stream closed
    at its end."""
    sent = 0
    try:
        while True:
            event = h.next_event()
            if event is h11.NEED_DATA:
                h.receive_data(await chan.recv(ANSWER_TIMEOUT_S))
                continue
            if isinstance(event, h11.Data):
                data = bytes(event.data)[: max(0, most - sent)]
                sent += len(data)
                if data:
                    yield data
                if sent >= most:
                    return
                continue
            return  # EndOfMessage, ConnectionClosed
    except (h11.RemoteProtocolError, RelayClosed, TimeoutError):
        return
    finally:
        await chan.close()

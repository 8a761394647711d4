"""Where a session's two ends meet (docs/interactive.md, "The relay"): the agent's tunnel
lands on one API process, a person's terminal on any — another worker
of the same server, most of the time, behind ``--workers N``.

The process that holds a session's tunnel listens for its streams on a UNIX socket in the
server's data folder (``relay/t<alloc>.sock``, the folder 0700: the server's user and root
only), named by the allocation; any process that has a stream for the session connects there
and says what to open. One connection is one stream: messages ``kind (T text, B binary) |
length (4 bytes) | payload`` — text the relay's JSON control frames, binary ``channel |
bytes`` — which the holder passes to and from the tunnel with the stream's number. A newer
tunnel of the same session takes the name over (its agent reconnected); a stale name (its
process died) refuses connections and counts as no tunnel.

Bounds: at most ``MAX_STREAMS`` streams a tunnel; a stream whose peer sends past the credit
the relay grants (``WINDOW``) is closed, so a session that floods holds at most its windows
in this process."""

import asyncio
import contextlib
import json
import logging
import os
import secrets
import struct
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

from gpupool.model.relay import MAX_MESSAGE, MAX_STREAMS, WINDOW, data_frame, read_data

log = logging.getLogger(__name__)
LINK = struct.Struct(">cI")  # kind, length
TEXT, BINARY = b"T", b"B"
# a stream's end when the node's link drops: the terminal runs on there, and the person's
# client attaches again once the agent has dialled back ("retry")
DROPPED = b'{"t":"closed","retry":true,"detail":"the link to the session\'s node dropped"}'


class RelayClosed(Exception):
    """The other end of a stream went away."""


class AgentGone(Exception):
    """The agent's socket of a tunnel cannot be written: the tunnel is down."""


async def read_message(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    try:
        head = await reader.readexactly(LINK.size)
        kind, length = LINK.unpack(head)
        if kind not in (TEXT, BINARY) or length > MAX_MESSAGE:
            raise RelayClosed("a message that is not the relay's")
        return kind, await reader.readexactly(length)
    except (asyncio.IncompleteReadError, ConnectionError) as exc:
        raise RelayClosed(str(exc)) from None


def pack(kind: bytes, payload: bytes) -> bytes:
    return LINK.pack(kind, len(payload)) + payload


class RelayConn:
    """One stream, as the process that serves a person holds it."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader, self.writer = reader, writer

    async def receive(self) -> tuple[bytes, bytes]:
        return await read_message(self.reader)

    async def control(self, **frame: Any) -> None:
        await self._write(TEXT, json.dumps(frame, separators=(",", ":")).encode())

    async def data(self, channel: int, payload: bytes) -> None:
        await self._write(BINARY, bytes([channel]) + payload)

    async def _write(self, kind: bytes, payload: bytes) -> None:
        try:
            self.writer.write(pack(kind, payload))
            await self.writer.drain()
        except (ConnectionError, RuntimeError) as exc:
            raise RelayClosed(str(exc)) from None

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()


class TunnelHub:
    """This process's tunnels and the folder where every process of the server finds them."""

    def __init__(self, data_dir: Path):
        self._folder = Path(data_dir).resolve() / "relay"
        self._fd: int | None = None  # the folder, opened on first use
        self.tunnels: dict[int, Tunnel] = {}

    def path(self, name: str) -> str:
        """``name`` in the relay folder, through a descriptor of the folder: a data folder
        deep in the tree would pass the 107 characters a UNIX socket's name may have."""
        return f"/proc/self/fd/{self._dir()}/{name}"

    def _dir(self) -> int:
        if self._fd is None:
            self._folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            self._folder.chmod(0o700)
            self._fd = os.open(self._folder, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        return self._fd

    async def connect(self, alloc_id: int, wait_s: float = 0.0) -> RelayConn | None:
        """A stream of the session's tunnel, or None when none is up (waiting ``wait_s``
        for one: a session just started, an agent reconnecting)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        while True:
            try:
                reader, writer = await asyncio.open_unix_connection(
                    self.path(f"t{alloc_id}.sock"), limit=MAX_MESSAGE * 2
                )
                return RelayConn(reader, writer)
            except OSError:
                if loop.time() >= deadline:
                    return None
                await asyncio.sleep(0.2)

    async def serve(
        self,
        alloc_id: int,
        receive: Callable[[], Coroutine[Any, Any, str | bytes | None]],
        send_text: Callable[[str], Awaitable[None]],
        send_bytes: Callable[[bytes], Awaitable[None]],
    ) -> None:
        """Hold the tunnel of allocation ``alloc_id`` until its agent goes (``receive``
        answers None)."""
        tunnel = Tunnel(alloc_id, send_text, send_bytes)
        temporary = f"t{alloc_id}.{os.getpid()}.{secrets.token_hex(4)}.sock"
        folder = self._dir()
        server = await asyncio.start_unix_server(
            tunnel.accept, self.path(temporary), limit=MAX_MESSAGE * 2
        )
        mine = None
        try:
            os.rename(temporary, f"t{alloc_id}.sock", src_dir_fd=folder, dst_dir_fd=folder)
            mine = os.stat(f"t{alloc_id}.sock", dir_fd=folder).st_ino
            older = self.tunnels.get(alloc_id)
            self.tunnels[alloc_id] = tunnel
            if older is not None:
                older.retire()
            await tunnel.run(receive)
        finally:
            server.close()
            if self.tunnels.get(alloc_id) is tunnel:
                del self.tunnels[alloc_id]
                with contextlib.suppress(OSError):
                    if os.stat(f"t{alloc_id}.sock", dir_fd=folder).st_ino == mine:
                        os.unlink(f"t{alloc_id}.sock", dir_fd=folder)
            await tunnel.close_all()

    def close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None


class _Relayed:
    """A stream as the tunnel's holder sees it: the connection of the process serving it."""

    def __init__(self, sid: int, writer: asyncio.StreamWriter):
        self.sid = sid
        self.writer = writer
        self.queued = 0  # bytes from the agent not yet written on


class Tunnel:
    def __init__(
        self,
        alloc_id: int,
        send_text: Callable[[str], Awaitable[None]],
        send_bytes: Callable[[bytes], Awaitable[None]],
    ):
        self.alloc_id = alloc_id
        self._send_text, self._send_bytes = send_text, send_bytes
        self._lock = asyncio.Lock()  # one send at a time on the agent's socket
        self.streams: dict[int, _Relayed] = {}
        self._next = 0
        self._retired = asyncio.Event()

    def retire(self) -> None:
        """A newer tunnel of this session took over: this one ends."""
        self._retired.set()

    async def to_agent(self, frame: dict[str, Any] | bytes) -> None:
        """Send on the agent's socket; AgentGone when it is closed (whatever the framework
        raised: the tunnel's own loop then sees it go)."""
        async with self._lock:
            try:
                if isinstance(frame, bytes):
                    await self._send_bytes(frame)
                else:
                    await self._send_text(json.dumps(frame, separators=(",", ":")))
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                raise AgentGone(str(exc)) from None

    async def run(self, receive: Callable[[], Coroutine[Any, Any, str | bytes | None]]) -> None:
        retired = asyncio.create_task(self._retired.wait())
        try:
            while True:
                got = asyncio.create_task(receive())
                done, _ = await asyncio.wait({got, retired}, return_when=asyncio.FIRST_COMPLETED)
                if got not in done:
                    got.cancel()
                    return
                message = got.result()
                if message is None:
                    return
                await self._from_agent(message)
        finally:
            retired.cancel()

    async def _from_agent(self, message: str | bytes) -> None:
        if isinstance(message, bytes):
            try:
                sid, channel, payload = read_data(message)
            except ValueError:
                return
            stream = self.streams.get(sid)
            if stream is None:
                return
            if stream.queued + len(payload) > 2 * WINDOW:  # past any credit it was given
                await self._drop(stream, "the node sent past its window")
                return
            stream.queued += len(payload)
            await self._pass(stream, BINARY, bytes([channel]) + payload)
            stream.queued -= len(payload)
            return
        try:
            frame = json.loads(message)
        except ValueError:
            return
        number = frame.pop("s", None) if isinstance(frame, dict) else None
        found = self.streams.get(number) if isinstance(number, int) else None
        if found is None:
            return
        stream = found
        await self._pass(stream, TEXT, json.dumps(frame, separators=(",", ":")).encode())
        if frame.get("t") in ("exit", "closed", "error"):
            self.streams.pop(stream.sid, None)
            stream.writer.close()

    async def _pass(self, stream: _Relayed, kind: bytes, payload: bytes) -> None:
        try:
            stream.writer.write(pack(kind, payload))
            await asyncio.wait_for(stream.writer.drain(), 30)
        except (ConnectionError, RuntimeError, TimeoutError):
            await self._drop(stream, "")

    async def _drop(self, stream: _Relayed, why: str) -> None:
        if self.streams.pop(stream.sid, None) is None:
            return
        if why:
            log.warning("session allocation %s: stream %s closed: %s", self.alloc_id,
                        stream.sid, why)  # fmt: skip
        stream.writer.close()
        with contextlib.suppress(Exception):
            await self.to_agent({"t": "close", "s": stream.sid})

    async def accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """A process serving a person opens a stream: its first message says what."""
        try:
            kind, payload = await asyncio.wait_for(read_message(reader), 10)
            frame = json.loads(payload) if kind == TEXT else None
        except (RelayClosed, TimeoutError, ValueError):
            writer.close()
            return
        if not isinstance(frame, dict) or frame.get("t") != "open":
            writer.close()
            return
        if len(self.streams) >= MAX_STREAMS:
            writer.write(pack(TEXT, b'{"t":"error","detail":"too many streams on this session"}'))
            with contextlib.suppress(ConnectionError):
                await writer.drain()
            writer.close()
            return
        self._next += 1
        stream = self.streams[self._next] = _Relayed(self._next, writer)
        try:
            await self.to_agent({**frame, "s": stream.sid})
            while stream.sid in self.streams:
                kind, payload = await read_message(reader)
                if kind == BINARY:
                    if payload:
                        await self.to_agent(data_frame(stream.sid, payload[0], payload[1:]))
                    continue
                control = json.loads(payload)
                if isinstance(control, dict) and control.get("t") != "open":
                    await self.to_agent({**control, "s": stream.sid})
                    if control.get("t") == "close":
                        break
        except AgentGone:  # the person is told, and attaches again once the agent is back
            if self.streams.pop(stream.sid, None) is not None:
                with contextlib.suppress(Exception):
                    writer.write(pack(TEXT, DROPPED))
        except (RelayClosed, ValueError, ConnectionError):
            pass
        finally:
            if self.streams.pop(stream.sid, None) is not None:
                with contextlib.suppress(Exception):
                    await self.to_agent({"t": "close", "s": stream.sid})
            writer.close()

    async def close_all(self) -> None:
        for stream in list(self.streams.values()):
            with contextlib.suppress(Exception):
                stream.writer.write(pack(TEXT, DROPPED))
            stream.writer.close()
        self.streams.clear()

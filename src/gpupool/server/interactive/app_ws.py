"""A person's WebSocket to a session's web app (a Jupyter kernel's channels): the server
speaks WebSocket to the app over one stream of the tunnel (``websockets``' sans-I/O client,
messages of at most ``MAX_MESSAGE`` bytes) and relays messages each way."""

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from fastapi import WebSocket
from websockets.client import ClientProtocol
from websockets.datastructures import Headers
from websockets.frames import Frame, Opcode
from websockets.http11 import Response
from websockets.typing import Origin, Subprotocol
from websockets.uri import parse_uri

from gpupool.server.interactive.app_relay import OPEN_TIMEOUT_S, AppChannel, AppError
from gpupool.server.tunnels import RelayClosed

MAX_MESSAGE = 16 * 1024 * 1024


async def handshake(
    chan: AppChannel, host: str, target: str, headers: list[tuple[str, str]]
) -> tuple[ClientProtocol, str | None]:
    """The app's WebSocket opened: the protocol and the subprotocol it chose."""
    asked = [p.strip() for k, v in headers if k.lower() == "sec-websocket-protocol"
             for p in v.split(",") if p.strip()]  # fmt: skip
    origin = next((v for k, v in headers if k.lower() == "origin"), None)
    proto = ClientProtocol(
        parse_uri(f"ws://{host}{target}"), origin=Origin(origin) if origin else None,
        subprotocols=[Subprotocol(p) for p in asked] or None, max_size=MAX_MESSAGE,
    )  # fmt: skip
    request = proto.connect()
    for name, value in headers:
        if name.lower() in ("cookie", "user-agent", "accept-language"):
            request.headers[name] = value
    proto.send_request(request)
    await chan.send(b"".join(proto.data_to_send()))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + OPEN_TIMEOUT_S
    while True:
        try:
            data = await chan.recv(max(0.1, deadline - loop.time()))
        except TimeoutError:
            raise AppError("the app did not answer the WebSocket's opening") from None
        if data:
            proto.receive_data(data)
        else:
            proto.receive_eof()
        for event in proto.events_received():
            if isinstance(event, Response):
                if proto.handshake_exc is not None:
                    raise AppError(f"the app refused the WebSocket: {proto.handshake_exc}")
                return proto, _header(event.headers, "Sec-WebSocket-Protocol")
        if not data:
            raise AppError(chan.why or "the app closed the connection")


def _header(headers: Headers, name: str) -> str | None:
    return headers.get(name)


async def bridge(
    ws: WebSocket,
    chan: AppChannel,
    proto: ClientProtocol,
    on_input: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Messages each way until either side closes; ``on_input`` is awaited after each
    message from the person's side (a kernel's execute request: activity, for idle culling)."""

    async def flush() -> None:
        data = b"".join(proto.data_to_send())
        if data:
            await chan.send(data)

    async def up() -> None:
        while True:
            message = await ws.receive()
            if message["type"] == "websocket.disconnect":
                proto.send_close()
                await flush()
                return
            if message.get("bytes") is not None:
                proto.send_binary(message["bytes"])
            else:
                proto.send_text((message.get("text") or "").encode())
            await flush()
            if on_input is not None:
                await on_input()

    async def down() -> None:
        parts: list[bytes] = []
        text = False
        while True:
            data = await chan.recv()
            if data:
                proto.receive_data(data)
            else:
                proto.receive_eof()
            for frame in proto.events_received():
                if not isinstance(frame, Frame):
                    continue
                if frame.opcode in (Opcode.TEXT, Opcode.BINARY):
                    text, parts = frame.opcode is Opcode.TEXT, [bytes(frame.data)]
                elif frame.opcode is Opcode.CONT:
                    parts.append(bytes(frame.data))
                else:
                    continue  # ping (answered by the protocol), pong, close
                if frame.fin:
                    whole = b"".join(parts)
                    parts = []
                    if text:
                        await ws.send_text(whole.decode(errors="replace"))
                    else:
                        await ws.send_bytes(whole)
            await flush()
            if not data or proto.close_rcvd is not None:
                return

    tasks = [asyncio.create_task(up()), asyncio.create_task(down())]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        with contextlib.suppress(Exception):
            await asyncio.gather(*tasks, return_exceptions=True)
        with contextlib.suppress(RelayClosed, Exception):
            await ws.close()

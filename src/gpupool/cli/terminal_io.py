"""The person's end of a session's terminal: this terminal in raw mode (its keys, Ctrl-C
included, go to the remote one), its size followed (SIGWINCH), the remote output written
here, the remote command's exit code returned. A link that drops is reattached (the
terminal runs on, on its node) for ``REATTACH_S``; after that ``gpupool attach JOB N``
does it. Without a pseudo-terminal (``gpupool exec``) stdout and stderr stay apart, stdin's
end is passed on and Ctrl-C is sent as SIGINT."""

import contextlib
import json
import os
import select
import shutil
import signal
import sys
import termios
import threading
import time
import tty
from collections.abc import Iterator
from typing import Any

from websockets.exceptions import WebSocketException
from websockets.sync.client import ClientConnection

from gpupool.client import ApiClient, ClientError
from gpupool.client.terminal import open_terminal
from gpupool.model.relay import CHUNK, TERM_NAME

REATTACH_S = 60.0
DROPPED = 255  # the exit code when the link cannot be had back (as ssh's)


def _size() -> tuple[int, int]:
    size = shutil.get_terminal_size((80, 24))
    return max(1, size.columns), max(1, size.lines)


def _term() -> str:
    name = os.environ.get("TERM", "")
    return name if TERM_NAME.fullmatch(name) else "xterm-256color"


@contextlib.contextmanager
def raw_mode(on: bool) -> Iterator[None]:
    if not on:
        yield
        return
    saved = termios.tcgetattr(0)
    try:
        tty.setraw(0)
        yield
    finally:
        termios.tcsetattr(0, termios.TCSADRAIN, saved)


def say(text: str) -> None:
    """A line of gpupool's own on stderr, readable in raw mode too."""
    os.write(2, f"\r\n[gpupool] {text}\r\n".encode())


class _Reader(threading.Thread):
    def __init__(self, ws: ClientConnection):
        super().__init__(daemon=True)
        self.ws = ws
        self.code: int | None = None
        self.ended = threading.Event()
        self.why = ""  # closed from the server's side, not by the command's end
        self.retry = False  # ... because the node's link dropped: attach again

    def run(self) -> None:
        try:
            for message in self.ws:
                if isinstance(message, bytes):
                    if message:
                        fd = 2 if message[0] == 1 else 1
                        _write_all(fd, message[1:])
                    continue
                frame: dict[str, Any] = json.loads(message)
                kind = frame.get("t")
                if kind == "exit":
                    self.code = int(frame.get("code", 0))
                    return
                if kind in ("closed", "error"):
                    self.why = str(frame.get("detail") or kind)
                    self.retry = frame.get("retry") is True
                    return
                if kind == "notice":
                    say(str(frame.get("text", "")))
        except (OSError, WebSocketException, ValueError):
            self.why = ""
        finally:
            self.ended.set()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except BlockingIOError:
            select.select([], [fd], [], 1.0)
            continue
        view = view[n:]


def run(
    api: ApiClient,
    job_id: int,
    *,
    command: list[str] | None,
    pty: bool,
    attach: int | str | None = None,
    reattach: bool = True,
) -> int:
    """Open (or attach to) a terminal of session ``job_id`` and serve it here; the remote
    command's exit code."""
    interactive = pty and sys.stdin.isatty()
    cols, rows = _size()
    ws, opened = open_terminal(api, job_id, command=command, pty=pty, cols=cols, rows=rows,
                               term=_term(), attach=attach)  # fmt: skip
    number = opened.get("terminal")
    resized = threading.Event()
    previous = {}
    if interactive:
        previous[signal.SIGWINCH] = signal.signal(signal.SIGWINCH, lambda *_: resized.set())
    if not pty:
        previous[signal.SIGINT] = signal.signal(
            signal.SIGINT, lambda *_: _send(ws, json.dumps({"t": "signal", "sig": "INT"}))
        )
    try:
        with raw_mode(interactive):
            while True:
                reader = _Reader(ws)
                reader.start()
                stdin_open = _pump(ws, reader, pty, resized)
                if reader.code is not None:
                    return reader.code
                if reader.why and not reader.retry:
                    say(f"job {job_id}: terminal {number}: {reader.why}")
                    return 1
                if not (pty and reattach and number is not None):
                    say(f"job {job_id}: the link to the server dropped")
                    return DROPPED
                again = _reattach(api, job_id, number)
                if again is None:
                    say(f"could not reattach; the terminal runs on: gpupool attach {job_id} "
                        f"{number}")  # fmt: skip
                    return DROPPED
                ws = again
                if not stdin_open:
                    _send(ws, json.dumps({"t": "eof"}))
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        with contextlib.suppress(Exception):
            ws.close()


def _pump(ws: ClientConnection, reader: _Reader, pty: bool, resized: threading.Event) -> bool:
    """Send what is typed until the terminal ends or the link drops; whether stdin is open."""
    stdin_open = True
    while not reader.ended.is_set():
        if resized.is_set():
            resized.clear()
            cols, rows = _size()
            _send(ws, json.dumps({"t": "resize", "cols": cols, "rows": rows}))
        if not stdin_open:
            reader.ended.wait(0.2)
            continue
        ready, _, _ = select.select([0], [], [], 0.2)
        if not ready:
            continue
        try:
            data = os.read(0, CHUNK)
        except OSError:
            data = b""
        if not data:
            stdin_open = False
            _send(ws, b"\x00\x04" if pty else json.dumps({"t": "eof"}))
            continue
        _send(ws, b"\x00" + data)
    return stdin_open


def _send(ws: ClientConnection, message: str | bytes) -> None:
    with contextlib.suppress(OSError, WebSocketException):
        ws.send(message)


def _reattach(api: ApiClient, job_id: int, number: int) -> ClientConnection | None:
    say(f"the link to the server dropped; reattaching to terminal {number} of job {job_id}")
    deadline = time.monotonic() + REATTACH_S
    wait = 0.5
    while time.monotonic() < deadline:
        cols, rows = _size()
        try:
            ws, _ = open_terminal(api, job_id, pty=True, cols=cols, rows=rows, term=_term(),
                                  attach=number, timeout=10)  # fmt: skip
            return ws
        except ClientError as exc:
            if exc.status in (401, 403, 409):
                say(str(exc))
                return None
        time.sleep(wait)
        wait = min(wait * 2, 5.0)
    return None

"""A session's web app, as its node's agent reaches it (docs/interactive.md, "Notebooks"): a
TCP connection to ``127.0.0.1:PORT`` inside the workload's network namespace — the tenant's
— made by a thread of its own that enters the namespace only to create the socket (a socket
belongs to the namespace it was made in, whatever thread uses it later) and leaves it again,
then ends; so nothing else of the agent ever runs in a tenant's namespace, and no port of
the node is opened for the app."""

import contextlib
import ctypes
import os
import socket
import threading
from collections.abc import Callable

from gpupool.agent.sandbox import CLONE_NEWNET
from gpupool.model.relay import WINDOW

CONNECT_TIMEOUT_S = 5.0
_libc = ctypes.CDLL(None, use_errno=True)


class AppUnreachable(Exception):
    """The app's port cannot be connected to; the reason goes to the person who asked."""


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"cannot enter the job's network namespace: {os.strerror(err)}")


def socket_in(netns: str | None) -> socket.socket:
    """A TCP socket of the namespace ``netns`` (a file such as /run/netns/NAME; None: this
    process's own). Call it from a thread that ends after it (``connect_later``)."""
    if netns is None:
        return socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    target = os.open(netns, os.O_RDONLY | os.O_CLOEXEC)
    try:
        _setns(target)
        try:
            return socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        finally:
            _setns(own)  # should this fail, the thread ends without running anything else
    finally:
        os.close(own)
        os.close(target)


def connect(netns: str | None, port: int, timeout: float = CONNECT_TIMEOUT_S) -> socket.socket:
    """A connection to the app's loopback port in its namespace, non-blocking once made."""
    try:
        sock = socket_in(netns)
    except OSError as exc:
        raise AppUnreachable(f"cannot enter the job's network: {exc.strerror or exc}") from None
    try:
        sock.settimeout(timeout)
        sock.connect(("127.0.0.1", port))
    except OSError as exc:
        sock.close()
        why = "nothing listens there yet" if isinstance(exc, ConnectionRefusedError) else exc
        raise AppUnreachable(f"the job's web app on port {port}: {why}") from None
    sock.setblocking(False)
    return sock


def connect_later(
    netns: str | None, port: int, done: Callable[[socket.socket | AppUnreachable], None]
) -> None:
    """``connect`` on a thread of its own (a loopback connect whose app's backlog is full
    waits; the caller's loop does not), ``done`` called with the socket or the reason."""

    def work() -> None:
        try:
            result: socket.socket | AppUnreachable = connect(netns, port)
        except AppUnreachable as exc:
            result = exc
        except Exception as exc:  # a fault here must reach the stream, not end a thread mute
            result = AppUnreachable(f"cannot reach the job's web app: {exc}")
        with contextlib.suppress(Exception):
            done(result)

    threading.Thread(target=work, daemon=True, name=f"app-port-{port}").start()


class AppStream:
    """One stream of the tunnel: a connection to the session's web app (a notebook's)."""

    def __init__(self, sid: int):
        self.sid = sid
        self.sock: socket.socket | None = None  # None: still connecting
        self.credit = WINDOW
        self.inbox = bytearray()
        self.eof = False

    def close(self) -> None:
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.close()
        self.sock = None

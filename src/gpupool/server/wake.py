"""Waking a scheduler in another process: a Unix datagram socket in Linux's abstract
namespace (no file to clean up, gone with its process). An API worker that committed a change
sends one byte; the scheduler process wakes at once instead of at its next poll of the job
events. Best effort both ways: a lost byte only means the poll finds the change."""

import contextlib
import os
import select
import socket

WAKE_SOCKET = "WAKE_SOCKET_OF_GPUPOOL_SCHEDULER"  # outside the GPUPOOL_ settings prefix


def name_for(supervisor_pid: int) -> str:
    """The socket's name (an environment variable cannot hold the address's leading NUL)."""
    return f"gpupool-scheduler-{supervisor_pid}"


class WakeListener:
    """The scheduler process's end: ``wait`` returns True when poked within ``timeout``."""

    def __init__(self, name: str):
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.bind("\0" + name)
        self._sock.setblocking(False)

    def wait(self, timeout: float) -> bool:
        ready, _, _ = select.select([self._sock], [], [], timeout)
        if not ready:
            return False
        with contextlib.suppress(BlockingIOError):
            while self._sock.recv(64):  # one wake for every byte queued so far
                pass
        return True

    def close(self) -> None:
        self._sock.close()


class WakeSender:
    """A worker's end; ``poke`` never blocks and never fails."""

    def __init__(self, name: str):
        self.address = "\0" + name
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.setblocking(False)

    def poke(self) -> None:
        with contextlib.suppress(OSError):  # no listener, or its queue is full: it will poll
            self._sock.sendto(b"!", self.address)


def sender_from_environment() -> WakeSender | None:
    name = os.environ.get(WAKE_SOCKET)
    return WakeSender(name) if name else None

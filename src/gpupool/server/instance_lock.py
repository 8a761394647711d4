"""One ``gpupool up`` per data folder: a second one started beside a running one (a second
terminal, the same folder) would attach its agents to the first server and push its jobs
into it. The lock is the kernel's (released when the holder dies, however it dies); the file
says who holds it, for the refusal's words."""

import fcntl
import os
from pathlib import Path

from gpupool.model import SpecError

LOCK_FILE = "gpupool.lock"


class InstanceLock:
    def __init__(self, data_dir: Path):
        self.path = data_dir / LOCK_FILE
        self._fd: int | None = None

    def acquire(self, what: str) -> None:
        """Hold the folder's lock until this process ends, or refuse naming its holder.
        ``what``: how to reach this instance, said to a second one."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 500, 0).decode("utf-8", "replace").strip() or "another process"
            os.close(fd)
            raise SpecError(
                f"{self.path.parent} is in use by a running gpupool ({holder}); stop it, or "
                "give this one another --data-dir"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}, {what}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def port_free(host: str, port: int) -> None:
    """Refuse, naming it, a port something already listens on (checked before any agent
    starts: found by the server only after they did, the agents attached to the other one)."""
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds it
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise SpecError(
                f"port {port} on {host} is in use ({exc.strerror}): another gpupool or "
                "program listens there; choose another with --port"
            ) from None

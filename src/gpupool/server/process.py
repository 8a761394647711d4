"""``gpupool server`` as a child process on a loopback port: for the API benchmark and for
tests that kill servers."""

import os
import socket
import subprocess
import sys
from pathlib import Path

from gpupool.client import ClientError, wait_until_healthy

# the pid of the program that started a server for itself: the server stops once that is gone,
# even killed with SIGKILL (outside the GPUPOOL_ settings prefix)
STARTER_PID = "STARTER_PID_OF_GPUPOOL_SERVER"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(
    data_dir: Path,
    port: int,
    *,
    database_url: str = "",
    workers: int = 1,
    env: dict[str, str] | None = None,
    log_path: Path | None = None,
    timeout: float = 60,
) -> subprocess.Popen:
    """Start a server and return once ``/healthz`` answers; output goes to ``log_path``
    (default ``DATA_DIR/server-PORT.log``). A server that does not come up is killed; one
    whose starter dies (a benchmark killed by a timeout) stops by itself."""

    cmd = [sys.executable, "-m", "gpupool.cli.main", "server", "--data-dir", str(data_dir)]
    cmd += ["--port", str(port), "--workers", str(workers)]
    if database_url:
        cmd += ["--database-url", database_url]
    log_path = log_path or data_dir / f"server-{port}.log"
    with log_path.open("w") as log:  # the child keeps its own descriptor
        proc = subprocess.Popen(
            cmd,
            env={**os.environ, **(env or {}), STARTER_PID: str(os.getpid())},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until_healthy(f"http://127.0.0.1:{port}", lambda: proc.poll() is None, timeout)
    except ClientError as exc:
        proc.kill()
        proc.wait()
        raise ClientError(f"{exc} (see {log_path})") from None
    return proc

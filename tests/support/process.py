"""``gpupool server`` as a real child process, for kill -9 and fail-over tests."""

import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from gpupool.agent.processes import start_ticks
from gpupool.server.process import free_port, start_server


@dataclass
class ServerProcess:
    proc: subprocess.Popen
    url: str

    @classmethod
    def start(
        cls, data_dir: Path, database_url: str = "", *, cycle_s: float = 0.5, workers: int = 1
    ) -> "ServerProcess":
        port = free_port()
        env = {
            "GPUPOOL_CYCLE_INTERVAL_S": str(cycle_s),
            "GPUPOOL_LEADER_POLL_S": "0.5",
            "GPUPOOL_LOG_JSON": "true",
            "GPUPOOL_HEARTBEAT_TIMEOUT_S": "3600",  # these tests run no agents
        }
        proc = start_server(data_dir, port, database_url=database_url, env=env, workers=workers)
        return cls(proc, f"http://127.0.0.1:{port}")

    def kill9(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill9()


def alive(pid: int) -> bool:
    """Whether ``pid`` is a running process (not gone, not a zombie left unreaped)."""
    return start_ticks(pid) is not None


def admin_token(
    data_dir, database_url: str = "", *, role: str = "admin", name: str = "root",
    node: str | None = None,
) -> str:  # fmt: skip
    cmd = [
        sys.executable,
        "-m",
        "gpupool.cli.main",
        "admin",
        "token",
        "create",
        "--name",
        name,
        "--role",
        role,
        "--data-dir",
        str(data_dir),
    ]
    if node is not None:
        cmd += ["--node", node]
    if database_url:
        cmd += ["--database-url", database_url]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return out.split()[-1]

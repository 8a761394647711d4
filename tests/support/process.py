"""``gpupool server`` as a real child process, for kill -9 and fail-over tests."""

import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from gpupool.client import wait_until_healthy
from tests.support.postgres import free_port


@dataclass
class ServerProcess:
    proc: subprocess.Popen
    url: str

    @classmethod
    def start(
        cls, data_dir: Path, database_url: str = "", *, cycle_s: float = 0.5
    ) -> "ServerProcess":
        port = free_port()
        env = {
            **os.environ,
            "GPUPOOL_CYCLE_INTERVAL_S": str(cycle_s),
            "GPUPOOL_LEADER_POLL_S": "0.5",
            "GPUPOOL_LOG_JSON": "true",
        }
        if database_url:
            env["GPUPOOL_DATABASE_URL"] = database_url
        cmd = [
            sys.executable,
            "-m",
            "gpupool.cli.main",
            "server",
            "--data-dir",
            str(data_dir),
            "--port",
            str(port),
        ]
        log = open(data_dir / f"server-{port}.log", "w")  # noqa: SIM115 (closed with the process)
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
        server = cls(proc, f"http://127.0.0.1:{port}")
        server.wait_ready()
        return server

    def wait_ready(self, timeout: float = 60) -> None:
        wait_until_healthy(self.url, lambda: self.proc.poll() is None, timeout)

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

"""The season's real processes: one ``gpupool server`` on SQLite and agent-host processes
with simulated nodes, each of which can be killed with SIGKILL and started again."""

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from gpupool.server.process import free_port, start_server

SERVER_ENV = {
    "GPUPOOL_CYCLE_INTERVAL_S": "0.5",
    "GPUPOOL_HEARTBEAT_TIMEOUT_S": "30",  # embedded agents beat every 5 s: three misses, slack
    "GPUPOOL_METERING_INTERVAL_S": "5",  # live allocations' records cut often: more to add up
    "GPUPOOL_LOG_JSON": "false",
}


@dataclass
class Plane:
    root: Path
    agent_token: str
    nodes: list[list[str]]  # node names per agent-host process
    devices: str  # e.g. simulated:4xA100-80G
    port: int = field(default_factory=free_port)
    server: subprocess.Popen | None = None
    hosts: dict[int, subprocess.Popen] = field(default_factory=dict)
    restarts: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start_server(self) -> float:
        """Start (again) on the same port and data; seconds until it answered."""
        began = time.monotonic()
        self.restarts += 1
        log = self.root / f"server-{self.restarts}.log"
        self.server = start_server(
            self.root / "server", self.port, env=SERVER_ENV, log_path=log, timeout=120
        )
        return time.monotonic() - began

    def kill_server(self) -> None:
        if self.server is not None:
            self.server.send_signal(signal.SIGKILL)
            self.server.wait(timeout=30)
            self.server = None

    def start_host(self, index: int) -> None:
        argv = [
            sys.executable,
            "-m",
            "gpupool.bench.season.agent_host",
            "--server",
            self.url,
            "--state-dir",
            str(self.root / f"agents-{index}"),
            "--work-dir",
            str(self.root / "work"),
            "--nodes",
            ",".join(self.nodes[index]),
            "--devices",
            self.devices,
        ]
        env = {**os.environ, "GPUPOOL_AGENT_TOKEN": self.agent_token}
        with (self.root / f"agents-{index}.log").open("a") as log:
            self.hosts[index] = subprocess.Popen(argv, env=env, stdout=log, stderr=log)

    def kill_host(self, index: int) -> None:
        proc = self.hosts.pop(index)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)

    def stop(self) -> None:
        """Agents first (they stop their workloads), then the server."""
        for proc in self.hosts.values():
            proc.terminate()
        for proc in self.hosts.values():
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.hosts.clear()
        if self.server is not None:
            self.server.terminate()
            try:
                self.server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.kill_server()
            self.server = None

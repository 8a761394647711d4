"""Agents inside the ``gpupool up`` process: one simulated agent per example server (or one
real agent with ``--devices auto``), each in a thread, talking to the server over loopback
HTTP like any other agent."""

import contextlib
import threading
from pathlib import Path

from gpupool.agent.agent import Agent, AgentConfig
from gpupool.agent.workloads import IsolationConfig
from gpupool.client import ClientError, wait_until_healthy
from gpupool.model.labels import ADDRESS_LABEL


class EmbeddedAgents:
    def __init__(
        self,
        server: str,
        token: str,
        state_dir: Path,
        nodes: dict[str, str],
        isolation: IsolationConfig | None = None,
    ):
        """``nodes`` maps node names to device specs (``simulated:4xA100-80G`` or ``auto``)."""
        self.server = server
        self.agents = [
            Agent(
                AgentConfig(
                    server=server,
                    token=token,
                    name=name,
                    devices=spec,
                    state_dir=state_dir / name,
                    stop_workloads_on_exit=True,
                    grace_s=5,
                    cpu_millis=64_000 if spec != "auto" else None,
                    memory_mib=512 * 1024 if spec != "auto" else None,
                    # the embedded agents run on this host: replicas answer on loopback
                    labels={ADDRESS_LABEL: "127.0.0.1"}
                    | ({"simulated": "true"} if spec != "auto" else {}),
                    isolation=isolation or IsolationConfig(),
                )
            )
            for name, spec in nodes.items()
        ]
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def describe(self) -> str:
        return self.agents[0].launcher.describe() if self.agents else "no agents"

    def start(self) -> None:
        """Start every agent once the server (starting in this process) answers."""
        for agent in self.agents:
            t = threading.Thread(target=self._run, args=(agent,), name=f"agent-{agent.name}")
            t.daemon = True
            t.start()
            self._threads.append(t)

    def _run(self, agent: Agent) -> None:
        with contextlib.suppress(ClientError):  # not up in time: the agent retries and says so
            wait_until_healthy(self.server, lambda: not self._stop.is_set(), timeout=120)
        agent.run(self._stop)

    def signal_stop(self) -> None:
        """Ask every agent to stop (and stop its workloads); returns at once."""
        self._stop.set()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=30)

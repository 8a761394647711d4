"""Agents inside the ``gpupool up`` process: one simulated agent per example server (or one
real agent with ``--devices auto``), each in a thread, talking to the server over loopback
HTTP like any other agent."""

import threading
from pathlib import Path

from gpupool.agent.agent import Agent, AgentConfig


class EmbeddedAgents:
    def __init__(self, server: str, token: str, state_dir: Path, nodes: dict[str, str]):
        """``nodes`` maps node names to device specs (``simulated:4xA100-80G`` or ``auto``)."""
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
                    labels={"simulated": "true"} if spec != "auto" else {},
                )
            )
            for name, spec in nodes.items()
        ]
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        for agent in self.agents:
            t = threading.Thread(
                target=agent.run, args=(self._stop,), name=f"agent-{agent.name}", daemon=True
            )
            t.start()
            self._threads.append(t)

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=30)

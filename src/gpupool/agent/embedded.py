"""Agents inside the ``gpupool up`` process: one simulated agent per example server (or one
real agent with ``--devices auto``), each in a thread, talking to the server over loopback
HTTP like any other agent."""

import contextlib
import ssl
import threading
from pathlib import Path

from gpupool.agent.agent import Agent, AgentConfig
from gpupool.agent.api import agent_client
from gpupool.agent.workloads import IsolationConfig
from gpupool.client import ClientError, wait_until_healthy
from gpupool.model.labels import ADDRESS_LABEL

STEP = 20  # agents started together
STEP_PAUSE_S = 0.05
HEARTBEATS_PER_S = 40  # what the embedded agents send together, at most
LOOKS_PER_S = 200  # workload checks of all embedded agents together, at most


def pace(agents: int) -> tuple[float, float]:
    """(heartbeat_s, sync_s) of each of ``agents`` agents sharing one process (and its GIL)
    with their server. 1,000 agents at the standalone 5 s / 1 s sent 200 heartbeats/s (~5 ms
    of server CPU each) and woke 1,000 times a second: the server starved, heartbeats timed
    out, nodes were declared lost and registered again in a storm. New orders still arrive at
    once (long poll); a workload's end is seen within ``sync_s``."""
    return max(5.0, agents / HEARTBEATS_PER_S), max(1.0, agents / LOOKS_PER_S)


def heartbeat_timeout(agents: int, configured: float) -> float:
    """The server's lost-node timeout that ``agents`` embedded agents need: three missed
    heartbeats and some slack, never less than configured."""
    return max(configured, 3 * pace(agents)[0] + 10)


class EmbeddedAgents:
    def __init__(
        self,
        server: str,
        token: str,
        state_dir: Path,
        nodes: dict[str, str],
        isolation: IsolationConfig | None = None,
        verify: ssl.SSLContext | bool = True,
    ):
        """``nodes`` maps node names to device specs (``simulated:4xA100-80G`` or ``auto``);
        ``verify``: whom the server's certificate is trusted from (HTTPS)."""
        self.server = server
        # a client per agent: one client shared by 1,000 agents held 2,000 connections in one
        # pool, which httpcore scans under one lock for every request (a fifth of the process's
        # time went to waiting on it); one TLS context for all of them (each costs ~ms)
        tls = ssl.create_default_context() if verify is True else verify
        self.verify = tls
        self.clients = [agent_client(server, token, verify=tls) for _ in nodes]
        heartbeat_s, sync_s = pace(len(nodes))
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
                    heartbeat_s=heartbeat_s,
                    sync_s=sync_s,
                ),
                client=client,
            )
            for (name, spec), client in zip(nodes.items(), self.clients, strict=True)
        ]
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._starter: threading.Thread | None = None

    def describe(self) -> str:
        return self.agents[0].launcher.describe() if self.agents else "no agents"

    def start(self) -> None:
        """Start the agents once the server (starting in this process) answers: one waiter
        for all of them — each agent polling /healthz ten times a second starved the
        server's start-up (200 agents: 2,000 requests/s) — then the agents a few at a time,
        so their registrations do not all arrive in the same instant."""
        self._starter = threading.Thread(target=self._start_when_ready, name="agents-start")
        self._starter.daemon = True
        self._starter.start()

    def _start_when_ready(self) -> None:
        with contextlib.suppress(ClientError):  # not up in time: the agents retry and say so
            wait_until_healthy(self.server, lambda: not self._stop.is_set(), 300, self.verify)
        for i, agent in enumerate(self.agents):
            if self._stop.is_set():
                return
            t = threading.Thread(target=agent.run, args=(self._stop,), name=f"agent-{agent.name}")
            t.daemon = True
            t.start()
            self._threads.append(t)
            if i % STEP == STEP - 1:
                self._stop.wait(STEP_PAUSE_S)

    def signal_stop(self) -> None:
        """Ask every agent to stop (and stop its workloads); returns at once."""
        self._stop.set()

    def stop(self) -> None:
        self._stop.set()
        if self._starter is not None:
            self._starter.join(timeout=30)
        for t in self._threads:
            t.join(timeout=30)
        for client in self.clients:
            client.close()

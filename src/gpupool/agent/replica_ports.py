"""Ports for service replicas, chosen by the agent that runs them — never derived from a
global id another tenant can steer (ports were ``20000 + job id mod 20000``: a tenant that
submitted enough jobs got its replica onto another's port).

A port is handed to one allocation at a time, host-wide (agents on one host share the
registry, ``/run/gpupool/replica-ports.json`` under a file lock, or a file of the agent's
user in the temp folder without root), and only when nothing on the host listens on it.
A released port stays **quarantined**: its published rule keeps pointing into the old
replica's namespace for ``QUARANTINE_S``, so a client or health check still on its way never
reaches whoever binds it next; it is handed out again only after twice that (by then its
agent, which refreshes its rules every round, has dropped the rule).
"""

import contextlib
import os
import random
import socket
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpupool.agent.host_registry import locked_json

QUARANTINE_S = 30.0
DEFAULT_RANGE = (20000, 32767)  # below Linux's ephemeral ports (32768-60999)


class NoPortError(Exception):
    """Every port of the range is held, quarantined or in use on the host."""


SERVE, CONTROL = "serve", "control"


@dataclass(frozen=True, slots=True)
class Held:
    port: int
    alloc_id: int
    address: str | None  # the namespace address it is published to; None: host network
    released_at: float | None
    kind: str = SERVE  # CONTROL: the replica's platform endpoints, never published


def default_registry() -> Path:
    if os.geteuid() == 0:
        return Path("/run/gpupool/replica-ports.json")
    return Path(tempfile.gettempdir()) / f"gpupool-{os.geteuid()}-replica-ports.json"


def free_on_host(port: int) -> bool:
    """Nothing on the host's network holds ``port`` (TCP, any address)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


class ReplicaPorts:
    def __init__(
        self,
        scope: str,
        ports: tuple[int, int] = DEFAULT_RANGE,
        registry: Path | None = None,
        quarantine_s: float = QUARANTINE_S,
    ):
        self.scope = scope
        self.low, self.high = ports
        self.registry = registry or default_registry()
        self.quarantine_s = quarantine_s

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, Any]]:
        with locked_json(self.registry) as known:
            now = time.time()
            for key, entry in list(known.items()):  # free again once its owner dropped
                gone = entry.get("released_at")  # the rule (after one quarantine) for sure
                if gone is not None and now - gone >= 2 * self.quarantine_s:
                    del known[key]
            yield known

    def claim(self, alloc_id: int, address: str | None, kind: str = SERVE) -> int:
        """The allocation's port of ``kind``: the one it holds already (an agent that
        restarted), else a free one of the range, recorded before it is returned. A replica
        has two: SERVE, published for its clients, and CONTROL, where the agent alone asks
        for its health, load, sleep and wake (in its tenant's walled namespace: nobody but
        root on the host reaches it)."""
        with self._locked() as known:
            for key, entry in known.items():
                if (
                    self._mine(entry, alloc_id)
                    and entry.get("released_at") is None
                    and entry.get("kind", SERVE) == kind
                ):
                    return int(key)
            span = self.high - self.low + 1
            start = random.randrange(span)
            order = [self.low + (start + step) % span for step in range(span)]
            # a port nothing on the host holds; for a published one (address), any port of
            # the range: its rule comes before the host's sockets, so a job that binds ports
            # of the range on the host network cannot keep replicas from starting
            passes = [True] if address is None else [True, False]
            for must_be_free in passes:
                for port in order:
                    if str(port) in known or (must_be_free and not free_on_host(port)):
                        continue
                    known[str(port)] = {
                        "scope": self.scope, "alloc": alloc_id, "address": address,
                        "released_at": None, "kind": kind,
                    }  # fmt: skip
                    return port
        raise NoPortError(
            f"no free port for a service replica in {self.low}-{self.high} on this host"
        )

    def release(self, alloc_id: int) -> bool:
        """Quarantine the allocation's ports; whether it held one."""
        held = False
        with self._locked() as known:
            for entry in known.values():
                if self._mine(entry, alloc_id) and entry.get("released_at") is None:
                    entry["released_at"] = time.time()
                    held = True
        return held

    def held(self) -> list[Held]:
        """This agent's ports, live and in quarantine (whose rules it keeps)."""
        now = time.time()
        with self._locked() as known:
            return [
                Held(
                    int(p), e["alloc"], e.get("address"), e.get("released_at"), e.get("kind", SERVE)
                )
                for p, e in sorted(known.items())
                if e.get("scope") == self.scope
                and (e.get("released_at") is None or now - e["released_at"] < self.quarantine_s)
            ]

    def release_all_but(self, live: set[int]) -> None:
        """After a restart: ports of allocations that no longer run here are quarantined."""
        with self._locked() as known:
            now = time.time()
            for entry in known.values():
                if entry.get("scope") == self.scope and entry["alloc"] not in live:
                    entry["released_at"] = entry.get("released_at") or now

    def _mine(self, entry: dict[str, Any], alloc_id: int) -> bool:
        return entry.get("scope") == self.scope and entry.get("alloc") == alloc_id

"""The agent's look at its service replicas: health, load and sleep, read on each replica's
control port — which only the agent reaches (in the tenant's walled namespace, never
published) — and passed on to the server (``POST /nodes/{name}/readings``).

Nothing of the platform's is on a replica's published port: its clients (any tenant's jobs
among them) reach what the replica serves there and nothing else, so no neighbour can put a
replica to sleep, wake a parked one onto a card lent to training, or read its counters.

A thread of its own looks every ``interval_s``, in a pool where one tenant's slow replicas
delay only its own checks (``replicas.probe_pool``); the agent's main loop never waits for a
replica. What a look found is also what the agent checks its own belief against: a parked
engine found awake, or a serving one found asleep, is a fault (``replica_sleep``)."""

import logging
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from gpupool.agent.state import Record
from gpupool.autoscale.reading import Reading
from gpupool.model.protocol import OrderOut
from gpupool.replicas.probe_pool import ProbePool, Target

log = logging.getLogger("gpupool.agent")
INTERVAL_S = 1.0
TIMEOUT_S = 1.0
PER_TENANT = 4
THREADS = 16
MAX_SENT = 500  # readings in one report (the server refuses more)


def control_of(rec: Record) -> str | None:
    """Where the agent reaches the replica's control endpoints: its control port, or (a
    replica started by an agent before control ports) its own port on this host."""
    if rec.control:
        return rec.control
    return f"127.0.0.1:{rec.port}" if rec.port is not None else None


def targets(records: dict[int, Record], desired: dict[int, OrderOut]) -> dict[int, Target]:
    """What to look at: every running replica the server still wants here."""
    out: dict[int, Target] = {}
    for alloc_id, order in desired.items():
        rec = records.get(alloc_id)
        endpoint = control_of(rec) if rec is not None else None
        if rec is None or rec.released or rec.stop_sent_at is not None or endpoint is None:
            continue
        probe = order.probe
        out[alloc_id] = Target(
            order.tenant,
            endpoint,
            probe.health_path if probe else "/health",
            sleepy=bool(probe and probe.sleepy) or order.parked,
            parked=order.parked,
        )
    return out


@dataclass(frozen=True, slots=True)
class Seen:
    """The last look at one replica, for the agent's own checks."""

    at: float
    asleep: bool | None


def wire(alloc_id: int, reading: Reading, fault: str = "") -> dict[str, Any]:
    """A reading as the readings route takes it."""
    out = asdict(reading)
    out["buckets"] = {str(le): count for le, count in reading.buckets.items()}
    out.pop("gpu_util", None)  # the server's, from the cards' telemetry
    return out | {"alloc_id": alloc_id, "fault": fault[:300]}


class ReplicaWatch:
    def __init__(
        self,
        send: Callable[[list[dict[str, Any]]], None],
        interval_s: float = INTERVAL_S,
        timeout_s: float = TIMEOUT_S,
    ):
        self.send = send
        self.interval_s = interval_s
        self.pool = ProbePool(timeout_s, PER_TENANT, threads=THREADS)
        self._lock = threading.Lock()
        self._targets: dict[int, Target] = {}
        self._seen: dict[int, Seen] = {}
        self._unsent: dict[int, dict[str, Any]] = {}  # the newest of each, until sent
        self._faults: list[tuple[int, str]] = []
        self._wake = threading.Event()

    def watch(self, now: dict[int, Target]) -> None:
        """The replicas to look at from now on (the agent's main loop, each round)."""
        with self._lock:
            changed = now != self._targets
            self._targets = dict(now)
            for gone in set(self._seen) - set(now):
                del self._seen[gone]
        if changed:
            self._wake.set()  # a new replica is looked at without waiting a whole interval

    def seen(self) -> dict[int, Seen]:
        with self._lock:
            return dict(self._seen)

    def fault(self, alloc_id: int, what: str) -> None:
        """A fault the agent found (and how it handled it): sent with the next readings."""
        log.warning("allocation %s: %s", alloc_id, what)
        with self._lock:
            self._faults.append((alloc_id, what))
        self._wake.set()

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                self.look()
            except Exception:  # a bug here must not end the looks
                log.exception("replica watch: unexpected error; carrying on")
            self._wake.wait(self.interval_s)
            self._wake.clear()
        self.pool.close()

    def look(self) -> None:
        """One round: look at every replica (waiting at most a timeout for the answers),
        then send what was found and the faults noted since."""
        with self._lock:
            now = dict(self._targets)
        readings = self.pool.round(now, self.pool.timeout * 2) if now else {}
        with self._lock:
            for alloc_id, reading in readings.items():
                if alloc_id in self._targets:
                    self._seen[alloc_id] = Seen(reading.at or 0.0, reading.asleep)
                    self._unsent[alloc_id] = wire(alloc_id, reading)
            for alloc_id, what in self._faults:
                entry = self._unsent.get(alloc_id)
                if entry is not None:
                    entry["fault"] = what[:300]
                else:
                    self._unsent[alloc_id] = {"alloc_id": alloc_id, "fault": what[:300]}
            self._faults.clear()
            batch = list(self._unsent.values())[:MAX_SENT]
        if not batch:
            return
        try:
            self.send(batch)
        except Exception as exc:  # the server away: the newest are sent next round
            log.debug("replica readings: %s", exc)
            return
        with self._lock:
            for entry in batch:
                if self._unsent.get(entry["alloc_id"]) is entry:
                    del self._unsent[entry["alloc_id"]]

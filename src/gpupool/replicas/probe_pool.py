"""Health checks that one tenant cannot slow down for another.

Every tenant gets at most ``per_tenant`` checks under way at once, in a pool of threads shared
by all; its further checks wait in a queue of its own, holding no thread. A pass hands in the
replicas to check and takes the readings that have finished — waiting at most ``wait_s`` for
them — so a tenant with many slow replicas (a byte every 0.3 s, answers that never finish)
delays its own checks, never another's, and never the pass. A replica whose check is still
queued or under way is not checked again until it ends.
"""

import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from functools import partial

from gpupool.autoscale.reading import Reading
from gpupool.replicas.probe import awake, probe, sleeping

THREADS = 64


@dataclass(frozen=True, slots=True)
class Target:
    tenant: str
    endpoint: str  # host:port
    health_path: str
    sleepy: bool = False  # a service that parks replicas: asleep is not ready (is_sleeping)
    parked: bool = False  # meant to sleep: only whether it does is read (GET /is_sleeping)


Prober = Callable[[str, str, float], Reading]


class ProbePool:
    def __init__(
        self, timeout: float, per_tenant: int, prober: Prober = probe, threads: int = THREADS
    ):
        self.timeout = timeout
        self.per_tenant = per_tenant
        self.prober = prober
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="probe")
        self._lock = threading.RLock()
        self._queued: dict[str, deque[tuple[int, Target]]] = defaultdict(deque)
        self._running: dict[str, int] = defaultdict(int)
        self._pending: set[int] = set()  # queued or under way
        self._futures: dict[int, Future[Reading]] = {}

    def round(self, targets: dict[int, Target], wait_s: float) -> dict[int, Reading]:
        """Check every target not checked already; the readings finished by now (waiting at
        most ``wait_s`` for this round's), of replicas still among ``targets``."""
        for job, target in targets.items():
            if job not in self._pending:
                with self._lock:
                    self._pending.add(job)
                    self._queued[target.tenant].append((job, target))
                self._dispatch(target.tenant)
        with self._lock:
            under_way = [self._futures[j] for j in targets if j in self._futures]
        if under_way:
            wait(under_way, timeout=wait_s)
        out: dict[int, Reading] = {}
        with self._lock:
            for job, future in list(self._futures.items()):
                if future.done():
                    del self._futures[job]
                    self._pending.discard(job)
                    if job in targets:
                        out[job] = future.result()
        return out

    def _dispatch(self, tenant: str) -> None:
        with self._lock:
            queue = self._queued[tenant]
            while queue and self._running[tenant] < self.per_tenant:
                job, target = queue.popleft()
                self._running[tenant] += 1
                future = self._executor.submit(self._check, target)
                self._futures[job] = future
                future.add_done_callback(partial(self._finished, tenant))

    def _check(self, target: Target) -> Reading:
        at = time.time()
        try:
            if target.parked:
                reading = Reading(ready=False, asleep=sleeping(target.endpoint, self.timeout))
            else:
                reading = self.prober(target.endpoint, target.health_path, self.timeout)
                if target.sleepy:
                    reading = awake(target.endpoint, self.timeout, reading)
        except Exception as exc:  # a bug in one check is that replica's failed check
            reading = Reading(ready=False, error=f"health: {type(exc).__name__}: {exc}"[:300])
        reading.at = at
        return reading

    def _finished(self, tenant: str, _done: Future[Reading]) -> None:
        with self._lock:
            self._running[tenant] -= 1
        self._dispatch(tenant)

    def busy(self) -> dict[str, int]:
        """Checks queued or under way, per tenant (for the tests and status)."""
        with self._lock:
            return {t: self._running[t] + len(q) for t, q in self._queued.items() if
                    self._running[t] + len(q)}  # fmt: skip

    def close(self) -> None:
        with self._lock:
            self._queued.clear()
        self._executor.shutdown(wait=False, cancel_futures=True)

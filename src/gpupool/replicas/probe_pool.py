"""Health checks that one tenant cannot slow down for another (``fair_pool``): a pass hands
in the replicas to check and takes the readings that have finished — waiting at most
``wait_s`` for them — so a tenant with many slow replicas (a byte every 0.3 s, answers that
never finish) delays its own checks, never another's, and never the pass. A replica whose
check is still queued or under way is not checked again until it ends.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from gpupool.autoscale.reading import Reading
from gpupool.fair_pool import FairPool
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
    """Checks of replicas in a ``FairPool``: at most ``per_tenant`` of one tenant's at once."""

    def __init__(
        self, timeout: float, per_tenant: int, prober: Prober = probe, threads: int = THREADS
    ):
        self.timeout = timeout
        self.prober = prober
        self._pool: FairPool[int, Reading] = FairPool(per_tenant, threads, "probe")

    def round(self, targets: dict[int, Target], wait_s: float) -> dict[int, Reading]:
        """Check every target not checked already; the readings finished by now (waiting at
        most ``wait_s`` for this round's), of replicas still among ``targets``."""
        for job, target in targets.items():
            self._pool.submit(job, target.tenant, partial(self._check, target))
        readings = self._pool.take(targets, wait_s)
        self._pool.drop(keep=targets)
        return readings

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

    def busy(self) -> dict[str, int]:
        """Checks queued or under way, per tenant (for the tests and status)."""
        return self._pool.busy()

    def close(self) -> None:
        self._pool.close()

"""The duties of the control plane, each run at its own interval, each failing alone.

A duty (liveness, metering checkpoints, the scheduling cycle, alerts, ...) is a function of
the time that reads, decides and applies. The runner calls every duty that is due; one that
raises is logged, counted and tried again after a backoff (1 s, doubling to 10 s, never later
than its own interval) while the others go on. ``LostLeadership`` is not a failure: it ends
the pass, because no duty may apply anything once another process leads.

Each duty's health (last success, failures in a row, the last error) is what ``/api/v1/status``
shows and what ``gpupool_duty_*`` metrics export; a leader whose scheduling duty has not
succeeded lately stops proving life, so ``/healthz`` says so (see ``SchedulerLoop``).
"""

import logging
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from gpupool.server.commit import LostLeadership

log = logging.getLogger("gpupool.control")
BACKOFF_S = (1.0, 10.0)  # after the first failure, doubling to at most this


@dataclass(frozen=True, slots=True)
class Duty:
    name: str
    run: Callable[[float], object]  # given the time; what it returns is not used
    every_s: float = 0.0  # 0: every pass


@dataclass(slots=True)
class DutyHealth:
    last_ok: float | None = None
    last_error: str = ""
    failures: int = 0  # in a row
    failures_total: int = 0
    next_at: float = -math.inf

    def as_dict(self) -> dict[str, object]:
        return {
            "last_ok": self.last_ok,
            "failures": self.failures,
            "failures_total": self.failures_total,
            "last_error": self.last_error,
        }


class DutyMetrics(Protocol):
    def duty_known(self, name: str) -> None: ...
    def duty_ok(self, name: str, at: float) -> None: ...
    def duty_failed(self, name: str) -> None: ...


def retry_after(failures: int, every_s: float) -> float:
    """Seconds before a duty that failed ``failures`` times in a row is tried again."""
    backoff = min(BACKOFF_S[0] * 2.0 ** (failures - 1), BACKOFF_S[1])
    return min(backoff, every_s) if every_s > 0 else backoff


class Runner:
    def __init__(self, duties: Iterable[Duty], metrics: DutyMetrics | None = None):
        self.duties = list(duties)
        names = [d.name for d in self.duties]
        if len(set(names)) != len(names):
            raise ValueError(f"duty names repeat: {names}")
        self.metrics = metrics
        self.health = {d.name: DutyHealth() for d in self.duties}
        if metrics is not None:  # exported at 0 from the start, so rates see the first failure
            for name in names:
                metrics.duty_known(name)

    def run_due(self, now: float) -> list[str]:
        """Run every duty due at ``now``, in order; returns the names of those that failed."""
        failed = []
        for duty in self.duties:
            health = self.health[duty.name]
            if now < health.next_at:
                continue
            try:
                duty.run(now)
            except LostLeadership:
                raise
            except Exception as exc:
                failed.append(duty.name)
                self._failed(duty, health, now, exc)
            else:
                health.last_ok, health.failures, health.last_error = now, 0, ""
                health.next_at = now + duty.every_s
                if self.metrics is not None:
                    self.metrics.duty_ok(duty.name, now)
        return failed

    def _failed(self, duty: Duty, health: DutyHealth, now: float, exc: Exception) -> None:
        health.failures += 1
        health.failures_total += 1
        first = str(exc).splitlines()[0][:300] if str(exc) else ""
        health.last_error = f"{type(exc).__name__}: {first}"
        wait = retry_after(health.failures, duty.every_s)
        health.next_at = now + wait
        log.error(
            "duty %s failed (%d in a row); again in %.0f s",
            duty.name,
            health.failures,
            wait,
            exc_info=exc,
        )
        if self.metrics is not None:
            self.metrics.duty_failed(duty.name)

    def reset(self) -> None:
        """Forget when each duty is next due (a new lead: every duty runs at once)."""
        for health in self.health.values():
            health.next_at = -math.inf

    def ok_within(self, name: str, now: float, seconds: float) -> bool:
        last = self.health[name].last_ok
        return last is not None and now - last <= seconds

    def report(self) -> dict[str, dict[str, object]]:
        return {name: h.as_dict() for name, h in self.health.items()}

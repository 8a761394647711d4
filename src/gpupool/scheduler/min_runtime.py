"""Minimum run time before a job may be stopped for another (pure): Slurm's
``PreemptExemptTime``, KAI's reclaim minimum runtime.

A running job that started less than its minimum run time ago is *protected*: preempt,
reclaim and defragment choose other victims, and a job only protected jobs would make room
for waits, told until when (``Wait.PROTECTED``). One bound keeps a guarantee a guarantee: a
claim within its tenant's guarantee (every preempt and reclaim claim is one; defragment's
when it serves a guarantee) that has waited ``bound_s`` or more since it was submitted may
take protected jobs when no set of unprotected ones frees the cards — unprotected victims
first, then protected ones by the usual order (lowest priority, least work lost) — and each
such victim's ``Preemption.protection`` says ``Protection.WAIVED``. So a guarantee waits at
most ``bound_s`` (plus a cycle) for protections, and a protected job is stopped early only for
a guarantee that has waited that long.

Minimum run times are set per priority class and overridden per tenant (the nearest tenant on
the job's chain that sets one: a team's value holds for its projects unless they set their
own); 0 protects nothing.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from gpupool.model import Job
from gpupool.scheduler.types import RunningJob

DEFAULT_BOUND_S = 600.0


@dataclass(frozen=True, slots=True)
class MinRuntime:
    by_class: Mapping[str, float] = field(default_factory=dict)
    by_tenant: Mapping[str, float] = field(default_factory=dict)
    bound_s: float = DEFAULT_BOUND_S

    @property
    def active(self) -> bool:
        return any(v > 0 for v in self.by_class.values()) or any(
            v > 0 for v in self.by_tenant.values()
        )

    def of(self, job: Job, chain: Sequence[str]) -> float:
        """Seconds ``job`` runs before it may be stopped (its chain from itself up)."""
        for tenant in chain:
            value = self.by_tenant.get(tenant)
            if value is not None:
                return value
        return self.by_class.get(job.priority_class, 0.0)

    def until(self, r: RunningJob, chain: Sequence[str]) -> float:
        """When ``r`` stops being protected (its start when it has no minimum)."""
        return r.start_time + self.of(r.job, chain)

    def waived(self, claim: Job, now: float) -> bool:
        """Whether ``claim`` (within its guarantee) has waited past the bound."""
        return now - claim.submit_time >= self.bound_s


def minutes(seconds: float) -> str:
    m = seconds / 60
    return f"{m:g} min" if m < 120 else f"{m / 60:g} h"

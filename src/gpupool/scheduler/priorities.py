"""Priority classes and queue order with aging (so large jobs are not starved forever)."""

from collections.abc import Mapping
from dataclasses import dataclass, field

from gpupool.model import DEFAULT_PRIORITY_CLASSES, Job, SpecError


@dataclass(frozen=True, slots=True)
class QueuePolicy:
    """``classes`` maps a priority class to its value (higher runs first); a job's own
    ``priority`` orders it within the class. Every ``aging_s`` of waiting adds
    ``aging_step`` (0 disables aging); a job waiting ``starvation_s`` or more gets a
    reservation: jobs behind it may only backfill if they end before it can start.
    ``fairshare_weight``: priority points a fair-share factor of 1.0 adds when the cycle is
    given a usage history (``scheduler/fairshare.py``; Slurm's PriorityWeightFairshare): the
    default is ten aging steps, far below the gap between two classes, so it orders jobs
    within a class."""

    classes: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_PRIORITY_CLASSES))
    aging_s: float = 600.0
    aging_step: int = 1
    starvation_s: float = 3600.0
    fairshare_weight: int = 10_000

    def class_value(self, job: Job) -> int:
        try:
            return self.classes[job.priority_class]
        except KeyError:
            known = ", ".join(self.classes)
            raise SpecError(
                f"job {job.id}: unknown priority class {job.priority_class!r} (known: {known})",
                field="priority_class",
            ) from None

    def base_priority(self, job: Job) -> int:
        """Priority for preemption decisions: class value + the job's own priority, no aging."""
        return self.class_value(job) * 1000 + job.priority

    def effective(self, job: Job, now: float, fairshare: float = 0.0) -> float:
        """Class value and the job's own priority, aging, and ``fairshare_weight`` times its
        tenant's fair-share factor (0: none given)."""
        waited = max(0.0, now - job.submit_time)
        aging = (waited // self.aging_s) * self.aging_step * 1000 if self.aging_s > 0 else 0
        return self.base_priority(job) + aging + self.fairshare_weight * fairshare

    def order(
        self, jobs: list[Job], now: float, factors: Mapping[str, float] | None = None
    ) -> list[Job]:
        """Queue order: effective priority, then submit time, then id (deterministic).
        ``factors``: each tenant's fair-share factor (none: no fair-share term)."""
        if not factors:
            return sorted(jobs, key=lambda j: (-self.effective(j, now), j.submit_time, j.id))
        return sorted(
            jobs,
            key=lambda j: (
                -self.effective(j, now, factors.get(j.tenant, 0.0)),
                j.submit_time,
                j.id,
            ),
        )

    def starving(self, job: Job, now: float) -> bool:
        return now - job.submit_time >= self.starvation_s

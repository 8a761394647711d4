"""Priority classes and queue order with aging (so large jobs are not starved forever)."""

from collections.abc import Mapping
from dataclasses import dataclass, field

from gpupool.model import DEFAULT_PRIORITY_CLASSES, Job, SpecError


@dataclass(frozen=True, slots=True)
class QueuePolicy:
    """``classes`` maps a priority class to its value (higher runs first); a job's own
    ``priority`` orders it within the class. Every ``aging_s`` of waiting adds
    ``aging_step`` (0 disables aging); a job waiting ``starvation_s`` or more gets a
    reservation: jobs behind it may only backfill if they end before it can start."""

    classes: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_PRIORITY_CLASSES))
    aging_s: float = 600.0
    aging_step: int = 1
    starvation_s: float = 3600.0

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

    def effective(self, job: Job, now: float) -> float:
        waited = max(0.0, now - job.submit_time)
        aging = (waited // self.aging_s) * self.aging_step * 1000 if self.aging_s > 0 else 0
        return self.base_priority(job) + aging

    def order(self, jobs: list[Job], now: float) -> list[Job]:
        """Queue order: effective priority, then submit time, then id (deterministic)."""
        return sorted(jobs, key=lambda j: (-self.effective(j, now), j.submit_time, j.id))

    def starving(self, job: Job, now: float) -> bool:
        return now - job.submit_time >= self.starvation_s

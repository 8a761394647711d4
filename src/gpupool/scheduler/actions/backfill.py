"""backfill: EASY backfill behind starving heads."""

from gpupool.model import Job
from gpupool.scheduler.reasons import Reason
from gpupool.scheduler.session import Session
from gpupool.scheduler.types import Placement


def backfill(cy: Session, behind: list[tuple[Job, Job]]) -> None:
    """A job may run now only if it declares a maximum run time that ends before its head's
    earliest possible start."""
    shadows: dict[str, float] = {}
    for job, head in behind:
        if head.id in cy.running:
            shadow = float("inf")  # the head got its place in a later action
        elif head.id not in shadows:
            shadow = shadows[head.id] = shadow_time(cy, head)
        else:
            shadow = shadows[head.id]
        if job.max_runtime_s is None or cy.now + job.max_runtime_s > shadow:
            continue
        ok, _, reason = cy.quota(job, cy.estimate(job), True)
        result = cy.try_place(job) if ok else reason
        if isinstance(result, Reason):
            cy.result.pending[job.id] = result
            continue
        ok, borrows, reason = cy.quota(job, cy.usage(result), True)
        if ok:
            cy.bind(job, result, borrows, "backfill")
        else:
            cy.result.pending[job.id] = reason
    for head_id, shadow in shadows.items():
        if shadow != float("inf") and head_id not in cy.running:
            cy.result.starts_by[head_id] = shadow


def shadow_time(cy: Session, head: Job) -> float:
    """When ``head`` could start if running jobs end at their declared maximum run times:
    it must fit the cluster and, counting its tenant's ended jobs, its quota."""
    trial = cy.state.clone()
    need = dict(cy.estimate(head))
    for r in sorted(cy.running.values(), key=lambda r: (r.expected_end, r.job.id)):
        if r.expected_end == float("inf"):
            break
        trial.release(r.job.id)
        if r.job.tenant == head.tenant:
            for f, q in cy.usage(r.placement).items():
                if f in need:
                    need[f] -= q
        quota_ok, _, _ = cy.plugins.quota(head.tenant, need, True)
        if quota_ok and isinstance(
            cy.plugins.place(trial, head, None, "not available to this job", False, ()), Placement
        ):
            return r.expected_end
    return float("inf")

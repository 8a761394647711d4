"""preempt: a blocked job takes capacity from jobs of its own tenant that the
``preemptable`` plugin lets give way (by default: lower priority)."""

from gpupool.model import Job
from gpupool.scheduler.actions.victims import VictimPool, search_victims
from gpupool.scheduler.session import RunningJob, Session


def preempt(cy: Session, blocked: list[Job]) -> list[Job]:
    pool = VictimPool(cy)
    may = cy.plugins.preemptable

    def candidates(job: Job) -> list[RunningJob]:
        return [r for r in pool.of_tenant(job.tenant) if may(r, job, "preempt")]

    return search_victims(cy, blocked, "preempt", candidates)

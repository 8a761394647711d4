"""reclaim: a job within its tenant's guarantee takes back capacity lent to other tenants
(jobs admitted on borrowed capacity that the ``preemptable`` plugin lets give way)."""

from gpupool.model import Job
from gpupool.scheduler.actions.victims import VictimPool, search_victims
from gpupool.scheduler.session import RunningJob, Session


def reclaim(cy: Session, blocked: list[Job]) -> list[Job]:
    pool = VictimPool(cy)
    may = cy.plugins.preemptable

    def candidates(job: Job) -> list[RunningJob]:
        return [r for r in pool.borrowed() if may(r, job, "reclaim")]

    return search_victims(cy, blocked, "reclaim", candidates)

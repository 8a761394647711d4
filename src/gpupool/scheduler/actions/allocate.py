"""allocate: admit jobs within their tenant's guarantee, in queue order."""

from gpupool.model import Job
from gpupool.scheduler.lookahead import DEPTH
from gpupool.scheduler.reasons import Reason, Wait
from gpupool.scheduler.session import Session


def allocate(cy: Session, queue: list[Job]) -> tuple[list[Job], list[Job], list[tuple[Job, Job]]]:
    """Admit jobs within their tenant's guarantee, in queue order.

    A starving job that does not fit becomes a head: behind a capacity-blocked head the jobs
    of its tenant and every job beyond its own tenant's guarantee wait, behind a quota-blocked
    one the jobs of its tenant do; the backfill action may still start those that end in time.
    Work of other teams within their guarantee is never held back by another team's head.
    Returns (blocked, need borrowing, (job, head) behind).
    """
    blocked: list[Job] = []
    to_borrow: list[Job] = []
    behind: list[tuple[Job, Job]] = []
    head: Job | None = None
    tenant_heads: dict[str, Job] = {}
    ahead = cy.placer.looks_ahead
    for i, job in enumerate(queue):
        ok, borrows, reason = cy.quota(job, cy.estimate(job), False)
        first = tenant_heads.get(job.tenant) or (
            head if head is not None and (head.tenant == job.tenant or not ok) else None
        )
        if first is not None:  # another team's work within its guarantee never waits here
            behind.append((job, first))
            cy.result.pending[job.id] = Reason(
                Wait.BEHIND, f"waiting behind {first.id} (starving; backfill only)"
            )
            continue
        if not ok:  # over its guarantee whatever the placement: no need to place it now
            cy.result.pending[job.id] = reason
            (to_borrow if borrows else blocked).append(job)
            if cy.q.starving(job, cy.now):
                tenant_heads[job.tenant] = job
            continue
        upcoming = [j.request for j in queue[i + 1 : i + 1 + DEPTH]] if ahead else ()
        result = cy.try_place(job, upcoming)
        if isinstance(result, Reason):
            cy.result.pending[job.id] = result
            blocked.append(job)
            if cy.q.starving(job, cy.now):
                head = job
            continue
        if cy.exact_after_placement or job.request.whole_node:  # a whole node: all its cards
            ok, borrows, reason = cy.quota(job, cy.usage(result), False)
        if ok:
            cy.bind(job, result, False, "allocate")
            continue
        cy.result.pending[job.id] = reason
        (to_borrow if borrows else blocked).append(job)
    return blocked, to_borrow, behind

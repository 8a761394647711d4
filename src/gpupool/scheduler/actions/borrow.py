"""borrow: admit jobs on capacity other tenants leave idle, fairly (DRF)."""

import heapq

from gpupool.model import Job
from gpupool.scheduler.reasons import Reason
from gpupool.scheduler.session import Session


def borrow(cy: Session, jobs: list[Job]) -> list[Job]:
    """Admit jobs on capacity other tenants leave idle; the tenant with the smallest weighted
    dominant share goes first (DRF), so borrowers share fairly."""
    capacity = _capacity(cy)
    queues: dict[str, list[Job]] = {}
    for job in jobs:
        queues.setdefault(job.tenant, []).append(job)
    heap = [(cy.tree.dominant_share(t, capacity), t) for t in queues]
    heapq.heapify(heap)
    blocked: list[Job] = []
    while heap:
        _, tenant = heapq.heappop(heap)
        job = queues[tenant].pop(0)
        ok, _, reason = cy.quota(job, cy.estimate(job), True)
        result = cy.try_place(job) if ok else reason
        if isinstance(result, Reason):
            cy.result.pending[job.id] = result
            blocked.append(job)
        else:
            ok, _, reason = cy.quota(job, cy.usage(result), True)
            if ok:
                cy.bind(job, result, True, "borrow")
            else:
                cy.result.pending[job.id] = reason
                blocked.append(job)  # preempting its own lower-priority work may still help
        if queues[tenant]:
            heapq.heappush(heap, (cy.tree.dominant_share(tenant, capacity), tenant))
    return blocked


def _capacity(cy: Session) -> dict[str, int]:
    s = cy.state
    return {
        "gpu": int(s.exists.sum()) * 100,
        "gpu_mem": int(s.dev_mem.sum()),
        "cpu": int(s.cpu_cap.sum()),
    }

"""borrow: admit jobs on capacity other tenants leave idle, fairly (DRF)."""

import heapq

from gpupool.model import Job
from gpupool.scheduler.reasons import Reason
from gpupool.scheduler.session import Session
from gpupool.scheduler.tenants import CARD


def borrow(cy: Session, jobs: list[Job]) -> list[Job]:
    """Admit jobs on capacity other tenants leave idle; the tenant with the smallest weighted
    dominant share goes first (DRF), so borrowers share fairly — or, given a usage history,
    the first in the Fair Tree's order (``scheduler/fairshare.py``)."""
    if cy.fairshare is not None:
        return _borrow_by_fair_tree(cy, jobs)
    capacity = _capacity(cy)
    queues: dict[str, list[Job]] = {}
    for job in jobs:
        queues.setdefault(job.tenant, []).append(job)
    heap = [(cy.tree.dominant_share(t, capacity), t) for t in queues]
    heapq.heapify(heap)
    blocked: list[Job] = []
    while heap:
        _, tenant = heapq.heappop(heap)
        _try(cy, queues[tenant].pop(0), blocked)
        if queues[tenant]:
            heapq.heappush(heap, (cy.tree.dominant_share(tenant, capacity), tenant))
    return blocked


def _try(cy: Session, job: Job, blocked: list[Job]) -> None:
    ok, _, reason = cy.quota(job, cy.estimate(job), True)
    result = cy.try_place(job) if ok else reason
    if isinstance(result, Reason):
        cy.result.pending[job.id] = result
        blocked.append(job)
        return
    ok, _, reason = cy.quota(job, cy.usage(result), True)
    if ok:
        cy.bind(job, result, True, "borrow")
    else:
        cy.result.pending[job.id] = reason
        blocked.append(job)  # preempting its own lower-priority work may still help


def _borrow_by_fair_tree(cy: Session, jobs: list[Job]) -> list[Job]:
    """The borrower first in the Fair Tree's order goes first; each card it borrows counts
    at once (its usage grows by a mean life's card-hours), so the next may be another. Keys
    only grow during the action, so a popped key that is stale is pushed back (lazily) and
    the first current one popped is the least."""
    fs = cy.fairshare
    assert fs is not None
    usage = dict(fs.usage)
    queues: dict[str, list[Job]] = {}
    for job in jobs:
        queues.setdefault(job.tenant, []).append(job)
    heap = [(fs.key(t, usage), t) for t in queues]
    heapq.heapify(heap)
    blocked: list[Job] = []
    while heap:
        key, tenant = heapq.heappop(heap)
        now_key = fs.key(tenant, usage)
        if now_key != key:
            heapq.heappush(heap, (now_key, tenant))
            continue
        before = cy.tree.borrowed(tenant, "gpu")
        _try(cy, queues[tenant].pop(0), blocked)
        grew = cy.tree.borrowed(tenant, "gpu") - before
        if grew:
            fs.charge(usage, tenant, grew / CARD)
        if queues[tenant]:
            heapq.heappush(heap, (fs.key(tenant, usage), tenant))
    return blocked


def _capacity(cy: Session) -> dict[str, int]:
    s = cy.state
    return {
        "gpu": int(s.exists.sum()) * 100,
        "gpu_mem": int(s.dev_mem.sum()),
        "cpu": int(s.cpu_cap.sum()),
    }

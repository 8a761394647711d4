"""park and wake (issue 49), first in a cycle: a service's replica parks — its engine asleep,
its allocation keeps the node's CPU and memory and lends its card — or wakes onto the card it
had. A wake vacates the card: the jobs on it stop (with their checkpoint grace: the
seconds-fast vacate) when the ``preemptable`` plugin lets them give way to the replica —
lower-priority jobs of its tenant, or another tenant's borrowed jobs while the card is within
the replica tenant's guarantee; else the wake waits, said why, and the reconciler replaces
the replica with a cold one after its wake limit."""

from collections.abc import Sequence
from dataclasses import dataclass

from gpupool.scheduler.reasons import Cause
from gpupool.scheduler.session import Regrant, RunningJob, Session
from gpupool.scheduler.types import Placement


@dataclass(frozen=True, slots=True)
class ParkAsk:
    job_id: str
    placement: Placement  # what it is to hold: without its card (park) or with it (wake)
    wake: bool


def park_and_wake(cy: Session, asks: Sequence[ParkAsk]) -> None:
    for ask in asks:
        r = cy.running.get(ask.job_id)
        if r is None:
            continue
        if not ask.wake:
            _regrant(cy, r, ask.placement, False, (), r.borrowed)
            continue
        why = _wake(cy, r, ask.placement)
        if why:
            cy.result.unwoken[ask.job_id] = why


def _wake(cy: Session, r: RunningJob, placement: Placement) -> str:
    """Vacate the card and wake ``r`` onto it; "" when done, else why not now."""
    cards = {(d.node, d.device) for d in placement.devices}
    victims = [
        v
        for v in cy.running.values()
        if v.job.id != r.job.id and cards & {(d.node, d.device) for d in v.placement.devices}
    ]
    extra = dict(cy.usage(placement))
    for f, q in cy.usage(r.placement).items():
        extra[f] = extra.get(f, 0) - q
    within, _, _ = cy.quota(r.job, extra, False)
    fits, borrows, why = cy.quota(r.job, extra, True)
    may = cy.plugins.preemptable
    for v in victims:
        if v.job.id not in cy.started_before:
            return f"job {v.job.id} was placed on its card in this cycle"
        if v.job.tenant == r.job.tenant and may(v, r.job, "preempt"):
            continue  # (the plugin's preempt compares priorities; the tenant is the action's)
        if not (may(v, r.job, "reclaim") and within):
            return f"job {v.job.id} on its card may not give way to it"
    if not fits:
        return why.message
    for v in victims:
        cy.stop(v, r.job.id, f"vacated for service replica {r.job.id} waking", Cause.PREEMPT)
    _regrant(cy, r, placement, True, tuple(v.job.id for v in victims), borrows)
    return ""


def _regrant(
    cy: Session,
    r: RunningJob,
    placement: Placement,
    wake: bool,
    after: tuple[str, ...],
    borrowed: bool,
) -> None:
    cy.state.release(r.job.id)
    cy.tree.charge(r.job.tenant, cy.usage(r.placement), -1)
    cy.state.apply(placement)
    cy.tree.charge(r.job.tenant, cy.usage(placement))
    cy.running[r.job.id] = RunningJob(r.job, placement, r.start_time, borrowed)
    cy.result.regrants.append(Regrant(r.job.id, placement, wake, after, borrowed))

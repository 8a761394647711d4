"""Victim selection: the fewest, lowest-priority, most recently started jobs whose release
lets the preemptor fit — and none at all when it still would not fit."""

from typing import TYPE_CHECKING

from gpupool.model import Job
from gpupool.scheduler.types import Placement

if TYPE_CHECKING:
    from gpupool.scheduler.cycle import RunningJob, _Cycle


def choose_victims(
    cy: "_Cycle", job: Job, candidates: list["RunningJob"], *, within_guarantee: bool
) -> tuple[list["RunningJob"], Placement] | None:
    """Release candidates in preference order on a trial snapshot until ``job`` fits (and,
    with ``within_guarantee``, fits its tenant's guarantee); then put back every victim that
    is not needed. Returns (victims, placement) or None."""
    order = sorted(candidates, key=lambda r: (cy.q.base_priority(r.job), -r.start_time, r.job.id))
    trial = cy.state.clone()
    freed: dict[str, int] = {}
    chosen: list[RunningJob] = []
    placement: Placement | None = None
    for victim in order:
        trial.release(victim.job.id)
        chosen.append(victim)
        if victim.job.tenant == job.tenant:
            for f, q in cy.usage(victim.placement).items():
                freed[f] = freed.get(f, 0) + q
        placement = _fits(cy, trial, job, freed, within_guarantee)
        if placement is not None:
            break
    if placement is None:
        return None
    for victim in sorted(chosen[:-1], key=lambda r: (-cy.q.base_priority(r.job), r.start_time)):
        trial.apply(victim.placement)
        if victim.job.tenant == job.tenant:
            usage = cy.usage(victim.placement)
            for f, q in usage.items():
                freed[f] -= q
        again = _fits(cy, trial, job, freed, within_guarantee)
        if again is None:
            trial.release(victim.job.id)
            if victim.job.tenant == job.tenant:
                for f, q in cy.usage(victim.placement).items():
                    freed[f] += q
        else:
            chosen.remove(victim)
            placement = again
    return chosen, placement


def _fits(cy: "_Cycle", trial, job: Job, freed: dict[str, int], within: bool):
    mask, reason = cy.mask(job)
    result = cy.placer.place(trial, job, mask, reason, explain=False)
    if not isinstance(result, Placement):
        return None
    if within:
        usage = cy.usage(result)
        have = cy.tree.usage[job.tenant]
        for f, q in usage.items():
            if not cy.tree.managed(f) or q <= 0:
                continue
            if have.get(f, 0) - freed.get(f, 0) + q > cy.tree.nominal(job.tenant, f):
                return None
    return result

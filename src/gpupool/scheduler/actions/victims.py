"""Victim search shared by preempt and reclaim: the jobs running before this cycle that the
``preemptable`` plugin lets give way, the fewest, lowest-priority, least work lost of them
(a job that saves on a signal loses its grace; any other all it ran since its last
checkpoint) whose release lets the job fit (within its tenant's guarantee), and none at all
when it still would not fit. ``CycleConfig.victim_order`` "age" counts that work per card
(the youngest first where no job says anything). Searches are bounded per cycle and a failed
ask is remembered until capacity is released."""

from collections.abc import Callable

from gpupool.model import Job
from gpupool.model.checkpoint import work_lost_s
from gpupool.scheduler.min_runtime import minutes
from gpupool.scheduler.reasons import Cause, Reason, Wait
from gpupool.scheduler.reservations import iso
from gpupool.scheduler.session import RunningJob, Session, estimate_usage
from gpupool.scheduler.state import ClusterState
from gpupool.scheduler.tenants import fmt_amount, resource_label
from gpupool.scheduler.types import Placement


class VictimPool:
    """Jobs running before this cycle (a job bound in this cycle is never evicted in it),
    indexed by tenant and by borrowing; evicted ones drop out as the cycle goes."""

    def __init__(self, cy: Session):
        self.cy = cy
        self.by_tenant: dict[str, list[RunningJob]] = {}
        self.lent: list[RunningJob] = []
        for r in cy.running.values():
            if r.job.id in cy.started_before:
                self.by_tenant.setdefault(r.job.tenant, []).append(r)
                if r.borrowed:
                    self.lent.append(r)

    def of_tenant(self, tenant: str) -> list[RunningJob]:
        return [r for r in self.by_tenant.get(tenant, ()) if r.job.id in self.cy.running]

    def borrowed(self) -> list[RunningJob]:
        return [r for r in self.lent if r.job.id in self.cy.running]


def search_victims(
    cy: Session, blocked: list[Job], action: str, candidates: Callable[[Job], list[RunningJob]]
) -> list[Job]:
    """Try ``action`` for each blocked job while the cycle's search budget lasts; returns the
    jobs still blocked."""
    left: list[Job] = []
    for i, job in enumerate(blocked):
        if cy.searches_left <= 0:
            left.extend(blocked[i:])
            break
        if not _take(cy, job, candidates, action):
            left.append(job)
    return left


def _take(
    cy: Session, job: Job, candidates_of: Callable[[Job], list[RunningJob]], action: str
) -> bool:
    """The memo is asked before the candidates are listed: with thousands of jobs running
    and hundreds blocked, listing them for each blocked job was most of a busy cycle.
    Candidates only leave during a cycle, and usage only grows between releases, so "no
    candidates" and "over the guarantee" hold for the same ask until something is freed."""
    if cy.searches_left <= 0:
        return False
    waived = cy.min_runtime.active and cy.min_runtime.waived(job, cy.now)
    key = (action, job.tenant, job.request, job.gang_size, cy.q.base_priority(job), waived)
    memo = cy.victimless.get(key)
    if memo is not None and memo[0] == cy.state.releases:
        _say(cy, job, memo[1])  # the same ask found no victims and nothing was freed since
        return False
    candidates = candidates_of(job)
    same = [r for r in candidates if r.job.tenant == job.tenant]
    past = _past_guarantee(cy, job, same) if candidates else None
    if not candidates or past is not None:
        # a reclaim refused by the guarantee is said: the placement's "no free gpu" hid that
        # lent capacity was there to take back, were the team not (slightly) over its own
        why = f"cannot reclaim lent capacity: {past}" if past and action == "reclaim" else ""
        cy.victimless[key] = (cy.state.releases, why)
        _say(cy, job, why)
        return False
    cy.searches_left -= 1
    free = [r for r in candidates if not cy.protected(r)]
    chosen = choose_victims(cy, job, free, within_guarantee=True) if free else None
    if chosen is None and len(free) < len(candidates) and cy.searches_left > 0:
        # jobs within their minimum run time would make room: only for a guarantee that
        # waited past the bound (scheduler/min_runtime.py); else the job is told until when
        cy.searches_left -= 1
        wider = choose_victims(cy, job, candidates, within_guarantee=True)
        if wider is not None and not waived:
            _wait_for_protected(cy, job, [r for r in candidates if cy.protected(r)], action)
            return False
        chosen = wider
    if chosen is None:
        cy.victimless[key] = (cy.state.releases, "")
        return False
    victims, placement = chosen
    why = (
        f"preempted by higher-priority {job.id}"
        if action == "preempt"
        else f"reclaimed by {job.tenant} for {job.id} (capacity was borrowed)"
    )
    for v in victims:
        cy.evict(v, job, why, Cause.PREEMPT if action == "preempt" else Cause.RECLAIM)
    cy.bind(job, placement, False, action, tuple(v.job.id for v in victims))
    return True


def _wait_for_protected(cy: Session, job: Job, protected: list[RunningJob], action: str) -> None:
    """``job`` waits: only jobs within their minimum run time would make room (not
    remembered: the protections end and the job's wait grows)."""
    ends = min(cy.protected_until(r) for r in protected)
    bound = cy.min_runtime.bound_s
    verb = "reclaim" if action == "reclaim" else "preempt"
    cy.result.pending[job.id] = Reason(
        Wait.PROTECTED,
        f"{verb}: the jobs that would make room are within their minimum run time (the first "
        f"of them until {iso(ends)}); a job within its guarantee takes them once it has "
        f"waited {minutes(bound)} (from {iso(job.submit_time + bound)})",
    )


def _say(cy: Session, job: Job, why: str) -> None:
    if why and job.id in cy.result.pending:
        cy.result.pending[job.id] = cy.result.pending[job.id].also(why)


def _past_guarantee(cy: Session, job: Job, own_victims: list[RunningJob]) -> str | None:
    """Cheap necessary check before a victim search: with every own victim gone, the job's
    cards and CPU fit its tenant's guarantee (a share counts its compute percent, MIG and
    memory-only shares 1%). Preemption never lifts a job above its guarantee. Returns None
    when it fits, else the numbers that do not."""
    need = dict(estimate_usage(job))
    for v in own_victims:
        for f, q in cy.usage(v.placement).items():
            if f in need:
                need[f] -= q
    ok, _, _ = cy.plugins.quota(job.tenant, need, False)
    if ok:
        return None
    for f, q in need.items():
        have, nominal = cy.tree.usage[job.tenant].get(f, 0), cy.tree.nominal(job.tenant, f)
        if q > 0 and have + q > nominal:
            return (
                f"{job.tenant} holds {fmt_amount(f, have)} {resource_label(f)} against a "
                f"guarantee of {fmt_amount(f, nominal)}, and this job's {fmt_amount(f, q)} more "
                "would pass it (reclaim takes back no more than a guarantee)"
            )
    return "past its tenant's guarantee"  # an ancestor's cap for its subtree


def choose_victims(
    cy: Session, job: Job, candidates: list[RunningJob], *, within_guarantee: bool
) -> tuple[list[RunningJob], Placement] | None:
    """Release candidates in preference order on a trial snapshot until ``job`` fits (and,
    with ``within_guarantee``, fits its tenant's guarantee); then put back every victim that
    is not needed. Returns (victims, placement) or None."""

    per_card = cy.config.victim_order == "age"

    def cost(r: RunningJob) -> tuple[bool, int, float, float, str]:
        lost = lost_if_stopped(r, cy.now, per_card)  # protected jobs last (min_runtime.py)
        return cy.protected(r), cy.q.base_priority(r.job), lost, -r.start_time, r.job.id

    order = sorted(candidates, key=cost)
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

    def keep_first(r: RunningJob) -> tuple[bool, int, float]:  # protected ones put back first
        return not cy.protected(r), -cy.q.base_priority(r.job), r.start_time

    for victim in sorted(chosen[:-1], key=keep_first):
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


def lost_if_stopped(r: RunningJob, now: float, per_card: bool = False) -> float:
    """Card-seconds of work stopping ``r`` now costs: what it ran since its last checkpoint
    (its agent passes them on), or since it started; at most its checkpoint grace when it
    saves on a signal. Among victims of one priority, the least is taken first (the
    youngest, as before, where none says anything and all hold alike). ``per_card``: the
    seconds alone, whatever ``r`` holds."""
    cards = 1.0 if per_card else r.placement.card_percent / 100
    return work_lost_s(cards, r.start_time, r.checkpointed_at, now, r.job.checkpoint_grace_s)


def _fits(
    cy: Session, trial: ClusterState, job: Job, freed: dict[str, int], within: bool
) -> Placement | None:
    mask, reason = cy.mask(job)
    result = cy.plugins.place(trial, job, mask, reason, False, ())
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

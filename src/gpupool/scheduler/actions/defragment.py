"""defragment: room for a job within its tenant's guarantee on one node when the cards it
needs are free but scattered — the plan comes from ``gpupool.scheduler.defrag``, the moved
jobs (those the ``preemptable`` plugin lets move) are suspended with a reason naming where
they restart, and the waiting job is bound behind them."""

import numpy as np

from gpupool.model import Job
from gpupool.scheduler.defrag import Movable, plan_defrag
from gpupool.scheduler.memo import RefusedAsks
from gpupool.scheduler.reasons import Cause, Reason, Wait
from gpupool.scheduler.session import Session
from gpupool.scheduler.state import ClusterState
from gpupool.scheduler.types import Placement

MAX_MOVES = 4  # jobs one plan may move


def spent(hourly: int | None) -> str:
    if hourly is None:
        return "defragmentation: no moves left in this cycle"
    return f"defragmentation paused: this hour's {hourly} moves are made (defrag_moves_per_hour)"


def over(needed: int, left: int, hourly: int | None) -> str:
    bound = "in this cycle" if hourly is None else f"of this hour's {hourly}"
    moves = "move" if left == 1 else "moves"
    return f"defragmentation would move {needed} jobs, {left} {moves} left {bound}"


def not_yet(moves: int, cost: float, gain: float) -> str:
    jobs = "1 job" if moves == 1 else f"{moves} jobs"
    return (
        f"defragmentation waits: moving {jobs} would lose up to {cost / 3600:.2f} card-hours of "
        f"work, more than the {gain / 3600:.2f} card-hours this job has waited"
    )


def defragment(cy: Session, blocked: list[Job]) -> None:
    """A job within its tenant's guarantee that waited ``defrag_after_s`` while the cards it
    needs are free but scattered gets room on one node: jobs that allow it (``on_preempt:
    suspend``) are suspended and restart on free cards elsewhere — an inference replica is
    never broken: a copy of it starts first (make-before-break, ``Session.replace``) and the
    job gets its room once the replicas stopped — at most ``defrag_moves`` in the cycle (see
    ``gpupool.scheduler.defrag``). While copies start, no other plan is made.

    Only when the gain beats the cost: the work the moved jobs may lose (their cards x the
    time since they started, at most ``defrag_checkpoint_s``: a job that may be suspended is
    taken to checkpoint at least that often) must not exceed the service the waiting job has
    been denied (its cards x the time it waited)."""
    budget, hourly = cy.config.defrag_moves, cy.config.defrag_hourly
    if hourly == 0 or (hourly is None and budget <= 0):
        return  # off
    may = cy.plugins.preemptable
    # an ask no plan served stays unserved until something is released (as victim searches)
    planless = RefusedAsks(cy.state)

    def place(state: ClusterState, job: Job, allowed: np.ndarray) -> Placement | None:
        mask, _ = cy.mask(job)
        where = allowed if mask is None else allowed & mask
        result = cy.plugins.place(state, job, where, "not available to this job", False, ())
        return result if isinstance(result, Placement) else None

    def refuse(job: Job, why: str) -> None:
        if job.id in cy.result.pending:
            cy.result.pending[job.id] = cy.result.pending[job.id].also(why)

    plans_left = cy.config.max_defrag_plans
    moved_now: set[str] = set()
    starting = ", ".join(sorted(cy.config.replacing))
    floor = cy.config.defrag_class
    floor_value = None if floor is None else cy.q.classes.get(floor)

    def urgent(job: Job) -> bool:
        return floor_value is not None and cy.q.class_value(job) >= floor_value

    for job in blocked:
        if cy.now - job.submit_time < cy.config.defrag_after_s:
            continue
        guaranteed, _, _ = cy.plugins.quota(job.tenant, cy.estimate(job), False)
        if not guaranteed and not urgent(job):
            continue  # defragmentation serves guarantees, and urgent classes
        if not guaranteed and not cy.plugins.quota(job.tenant, cy.estimate(job), True)[0]:
            continue  # not even borrowing may hold it
        if starting:  # one plan at a time while replicas' copies start: never two for one
            refuse(job, f"defragmentation waits for the copies of job {starting} to start")
            continue
        if budget <= 0:  # nothing is planned: the bound is the whole answer
            refuse(job, spent(hourly))
            continue
        key = (job.tenant, job.request, job.gang_size, cy.q.base_priority(job), guaranteed)
        plan, why = None, str(planless.detail(key)) if planless.refused(key) else None
        if why is None and plans_left <= 0:  # bounded work per cycle, as victim searches
            refuse(job, f"defragmentation planned for {cy.config.max_defrag_plans} jobs in "
                        "this cycle; this one is tried in the next")  # fmt: skip
            continue
        if why is None:
            plans_left -= 1
            live = [
                Movable(r.job, r.placement, r.start_time)
                for r in cy.running.values()
                if r.job.id in cy.started_before
                and r.job.id not in moved_now  # once a cycle
                and (may(r, job, "defragment") or may(r, job, "replace"))
                # beyond a guarantee: never at the cost of another team's guaranteed work
                and (guaranteed or r.borrowed or r.job.tenant == job.tenant)
            ]
            # jobs within their minimum run time move only for a guarantee that waited past
            # the bound, and only when no plan without them frees the room (min_runtime.py)
            free = [m for m in live if not cy.protected(cy.running[m.job.id])]
            moves = min(budget, MAX_MOVES)
            plan = plan_defrag(cy.state, job, free, place, cy.now, max_moves=moves)
            waived = guaranteed and cy.min_runtime.waived(job, cy.now)
            if plan is None and len(free) < len(live) and waived:
                plan = plan_defrag(cy.state, job, live, place, cy.now, max_moves=moves)
            else:
                live = free
            if plan is None:
                why = "no defragmentation move frees room for it"
                if budget < MAX_MOVES:  # would more moves than are left serve it?
                    bigger = plan_defrag(cy.state, job, live, place, cy.now, max_moves=MAX_MOVES)
                    if bigger is not None:
                        why = over(len(bigger.moves), budget, hourly)
                planless.add(key, why)
        if plan is None:
            assert why is not None  # every way to a missing plan above says why
            refuse(job, why)
            continue
        # a replica is copied first (make-before-break): its move loses no work
        copied = {m.job_id for m in plan.moves if may(cy.running[m.job_id], job, "replace")}
        cost = sum(
            cy.estimate(cy.running[m.job_id].job).get("gpu", 0)
            / 100
            * min(cy.now - cy.running[m.job_id].start_time, cy.config.defrag_checkpoint_s)
            for m in plan.moves
            if m.job_id not in copied
        )
        gain = cy.estimate(job).get("gpu", 0) / 100 * (cy.now - job.submit_time)
        if gain < cost:  # not remembered: the gain grows as the job waits
            refuse(job, not_yet(len(plan.moves), cost, gain))
            continue
        budget -= len(plan.moves)
        moved = []
        for m in plan.moves:
            victim = cy.running[m.job_id]
            moved_now.add(m.job_id)
            if m.job_id in copied:
                why = (
                    f"replaced by defragmentation: a copy starts on {m.targets()} and this one "
                    f"stops once it runs, so that {job.id} gets {plan.room()} on {plan.node}"
                )
                cy.replace(victim, m.target, job.id, why)
                continue
            why = (
                f"moved by defragmentation: restarts on {m.targets()} so that {job.id} gets "
                f"{plan.room()} on {plan.node}"
            )
            cy.evict(victim, job, why, Cause.DEFRAGMENT)
            moved.append((victim, m))
        if not copied:
            after = tuple(m.job_id for m in plan.moves)
            cy.bind(job, plan.placement, not guaranteed, "defragment", after, plan.describe())
        # the room each moved job restarts in is held for it: bound now, behind itself
        for victim, m in moved:
            note = f"moved by defragmentation so that {job.id} gets {plan.room()} on {plan.node}"
            cy.bind(victim.job, m.target, victim.borrowed, "defragment", (m.job_id,), note)
        if copied:  # its room is still held by the replicas: it starts once they stopped
            cy.result.pending[job.id] = Reason(
                Wait.PREEMPTING, plan.describe(copied) + "; it starts once they stopped"
            )
            starting = ", ".join(sorted(copied))

"""When will each pending job start, and where (pure): the real cycle run forward.

``plan_starts`` runs ``run_cycle`` on the current snapshot, then again at every expected end
of a running job (and at every reservation's edge), each time with the jobs that ended
released and the jobs it bound running on — so every rule of the engine (quotas, borrowing
and fair share, priorities and aging, preemption and reclaim, backfill, reservations) decides
the plan as it will decide the real cycles, if jobs end when expected. A pending job's
estimate is the time of the step that binds it and the nodes it gets; its *basis* says whose
expected ends it waited for (``from time limits``, ``from history of 37 similar jobs``).
Expected run times come from ``runtime_model`` (a time limit, or the team's history).

Between two ends the plan does not step (a job's aging may order the queue a little
differently there); a job preempted in the plan waits again with what it had left to run;
the plan stops after ``max_steps`` steps, past ``horizon_s``, when ``want`` are all bound, or
when nothing is expected to end. A job the plan did not bind gets no time (``start`` None).
"""

import math
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace

from gpupool.model import Job
from gpupool.scheduler.fairshare import UsageHistory
from gpupool.scheduler.placer import Placer
from gpupool.scheduler.reservations import Reservation
from gpupool.scheduler.runtime_model import Expected, remaining
from gpupool.scheduler.session import CycleConfig, CycleResult, RunningJob
from gpupool.scheduler.state import ClusterState
from gpupool.scheduler.tenants import TenantTree

NOW = "room now"


@dataclass(frozen=True, slots=True)
class StartEstimate:
    job_id: str
    start: float | None  # None: not within the plan
    nodes: tuple[str, ...] = ()
    basis: str = ""  # "from time limits", "from history of 37 similar jobs", ...


@dataclass(frozen=True, slots=True)
class Plan:
    estimates: dict[str, StartEstimate]
    steps: int  # cycles run
    until: float  # the plan's last step


Cycle = Callable[..., CycleResult]


def plan_starts(
    state: ClusterState,
    running: Sequence[RunningJob],
    pending: Sequence[Job],
    tenants: TenantTree,
    now: float,
    expected: Mapping[str, Expected],
    *,
    reservations: Sequence[Reservation] = (),
    config: CycleConfig | None = None,
    history: UsageHistory | None = None,
    horizon_s: float = 7 * 86400.0,
    max_steps: int = 200,
    want: Collection[str] | None = None,
    cycle: Cycle | None = None,
    budget_s: float | None = None,
) -> Plan:
    """Estimates for ``pending`` (or only ``want`` of them, stopping once they are bound).
    ``state`` is owned (changed); ``tenants`` must carry no usage (a fresh tree is made for
    every step from its tenants); ``expected``: run times by job id (running and pending;
    missing: unknown). ``cycle``: ``run_cycle`` (tests may wrap it). ``budget_s``: seconds
    the plan may take (wall clock; the server's bound); jobs not bound by then get no time."""
    from gpupool.scheduler.cycle import run_cycle

    cycle = cycle or run_cycle
    config = config or CycleConfig()
    todo = {j.id for j in pending} if want is None else set(want)
    out: dict[str, StartEstimate] = {}
    live: dict[str, RunningJob] = {r.job.id: r for r in running}
    ends: dict[str, float] = {}
    basis: dict[str, str] = {}
    for r in running:
        exp = expected.get(r.job.id, Expected(None, "unknown"))
        left = remaining(exp, now - r.start_time, r.job.max_runtime_s)
        ends[r.job.id] = math.inf if left is None else now + left
        basis[r.job.id] = exp.words()
    queue: dict[str, Job] = {j.id: j for j in pending}
    to_run: dict[str, float | None] = {}  # pending job -> what it has left to run
    for j in pending:
        to_run[j.id] = expected.get(j.id, Expected(None, "unknown")).seconds
    edges = sorted(
        {t for r in reservations for t in (r.start, r.end) if now < t <= now + horizon_s}
    )
    t, steps, waited_for = now, 0, NOW
    until = math.inf if budget_s is None else time.perf_counter() + budget_s
    while steps < max_steps and todo - out.keys() and time.perf_counter() < until:
        fresh = TenantTree(list(tenants.tenants.values()), tenants.closed)
        result = cycle(
            state,
            list(live.values()),
            list(queue.values()),
            fresh,
            t,
            reservations,
            config,
            Placer(config.policy),
            history=history,
        )
        steps += 1
        _carry_out(result, state, live, queue, ends, to_run, basis, expected, t)
        for b in result.bindings:
            if b.job_id in todo and b.job_id not in out:
                out[b.job_id] = StartEstimate(b.job_id, t, b.placement.node_names, waited_for)
        if not queue:
            break
        upcoming = [e for e in ends.values() if t < e < math.inf]
        upcoming += [e for e in edges if e > t]
        if not upcoming:
            break
        t_next = min(upcoming)
        if t_next > now + horizon_s:
            break
        done = sorted((j for j, e in ends.items() if e <= t_next), key=lambda j: (ends[j], j))
        for job_id in done:
            state.release(job_id)
            del live[job_id], ends[job_id]
        waited_for = _words([basis.pop(j) for j in done]) if done else "reservations"
        t = t_next
    for job_id in todo:
        out.setdefault(job_id, StartEstimate(job_id, None))
    return Plan(out, steps, t)


def _carry_out(
    result: CycleResult,
    state: ClusterState,
    live: dict[str, RunningJob],
    queue: dict[str, Job],
    ends: dict[str, float],
    to_run: dict[str, float | None],
    basis: dict[str, str],
    expected: Mapping[str, Expected],
    t: float,
) -> None:
    """The cycle's decisions, as the server would carry them out (at once)."""
    for p in result.preemptions:
        victim = live.pop(p.job_id)
        left = ends.pop(p.job_id) - t
        basis.pop(p.job_id, None)
        if p.action == "suspend":  # waits again with what it had left
            queue[p.job_id] = victim.job
            to_run[p.job_id] = None if math.isinf(left) else max(left, 1.0)
    for c in result.replacements:  # the copy runs, the original stops
        moved = live[c.job_id]
        state.release(f"{c.job_id}+")
        state.release(c.job_id)
        state.apply(replace(c.placement, job_id=c.job_id))
        live[c.job_id] = RunningJob(moved.job, replace(c.placement, job_id=c.job_id),
                                    moved.start_time, moved.borrowed)  # fmt: skip
    for b in result.bindings:
        job = queue.pop(b.job_id, None)
        if job is None:  # a moved job bound again behind itself (defragmentation)
            job = live[b.job_id].job if b.job_id in live else None
            if job is None:
                continue
        live[b.job_id] = RunningJob(job, b.placement, t, b.borrowed)
        run = to_run.pop(b.job_id, None) if b.job_id in to_run else None
        ends[b.job_id] = math.inf if run is None else t + run
        basis[b.job_id] = expected.get(b.job_id, Expected(None, "unknown")).words()


def _words(bases: Sequence[str]) -> str:
    """``from time limits``, ``from history of 37 similar jobs and time limits``."""
    seen = list(dict.fromkeys(bases))
    if not seen:
        return NOW
    return "from " + " and ".join(seen[:2]) + (" and others" if len(seen) > 2 else "")

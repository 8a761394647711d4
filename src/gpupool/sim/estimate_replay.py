"""Start-time estimates judged on the openb trace in time (``gpupool simulate estimates``).

Pods arrive at their ``creation_time`` (divided by ``time_scale``: a busier cluster, as
``simulate openb-time``) and run as long as they ran in production, on a seeded sample of the
trace's nodes (``sample_nodes``: the same mix of models); the server's cycle (``run_cycle``,
one tenant, FIFO with aging, starvation and backfill) decides at every arrival and every
end, until every pod has started. Users give time limits as Slurm users do: the run time
rounded up to the next hour (``limit_round_s``). At a pod's submission, before the cycle of
that instant, two estimates of its start are made with the same plan
(``scheduler/estimates.plan_starts``, the real cycle run forward) on the same state:

- **gpupool**: expected run times from the run-time model (``scheduler/runtime_model``):
  the median of the last jobs of the same request that *ended before then* (online: no pod's
  future is read), capped by its limit; a limit where there is no history;
- **Slurm's method**: every job ends at its time limit (Slurm's backfill plan, ``squeue
  --start``).

Each is compared with the pod's actual start in the same replay. Pods that started at once
(no wait) are left out; a pod the plan gave no time counts as infinitely wrong. Only pods
created (trace time) in ``[score_from_s, score_until_s)`` are estimated; the replay runs every
pod created before ``score_until_s`` (earlier pods load the cluster and make the history).

Held out: the knobs that make the cluster busy enough to wait (``time_scale`` 4, 1% of the
nodes) and the run-time model's (``MODEL``: the 0.25 quantile, same-limit jobs first; the
engine's default is the median) were chosen on node sample 0 and days 0-131; the figures
reported are those of days 132-146 (``SCORED_DAYS``). At 1% of the nodes every seed keeps the
same cluster (one node of each model group, and a group's nodes are alike): the hold-out is by
days (docs/fair-share-and-estimates.md).
"""

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from gpupool.model import Job, JobKind, Node
from gpupool.scheduler import ClusterState
from gpupool.scheduler.cycle import CycleConfig, RunningJob, run_cycle
from gpupool.scheduler.estimates import plan_starts
from gpupool.scheduler.runtime_model import Ended, Expected, RuntimeHistory, RuntimeModel
from gpupool.scheduler.tenants import Tenant, TenantTree
from gpupool.sim.fgd_protocol import PROTOCOL_SHARING
from gpupool.sim.openb_time import sample_nodes
from gpupool.sim.traces.openb import Pod

TENANT = "openb"
SHORT_S = 3600.0  # a wait below this is short
DAY = 86400.0
# held out: the knobs were chosen on days 0-131; days 147-149 (the last burst) are left out,
# too slow to replay with estimates (a queue of hundreds)
SCORED_DAYS = (132.0, 147.0)
REPORT_SEEDS = (1, 2, 3)  # held out: the knobs were chosen on node sample 0
TIME_SCALE = 4.0
NODE_FRACTION = 0.01
# chosen on node sample 0, days 0-131 (median 0.56 -> 0.44 of the wait, p90 3.8 -> 0.93 there,
# against the engine's default model: the median, without the limit)
MODEL = RuntimeModel(quantile=0.25, by_limit=True)


def limit_of(run_s: float, round_s: float) -> int:
    """A user's time limit for a job that runs ``run_s``: rounded up to ``round_s``."""
    return max(1, math.ceil(max(run_s, 1.0) / round_s)) * int(round_s)


@dataclass
class Guess:
    job: str
    submit: float
    ours: float | None
    slurm: float | None
    ours_basis: str = ""
    actual: float | None = None


@dataclass
class EstimateReplay:
    pods: int
    estimated: list[Guess] = field(default_factory=list)
    cycles: int = 0
    plan_steps: int = 0

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"pods": self.pods, "cycles": self.cycles}
        out["plan_steps"] = self.plan_steps
        return out | judge(self.estimated)


def judge(guesses: Sequence[Guess]) -> dict[str, Any]:
    """Errors of both methods over the pods that waited: all, short waits, long waits."""
    waited = [g for g in guesses if g.actual is not None and g.actual > g.submit]
    never = sum(1 for g in guesses if g.actual is None)
    out: dict[str, Any] = {"estimated": len(guesses), "waited": len(waited), "never": never}
    groups = {
        "all": waited,
        "short": [g for g in waited if (g.actual or 0) - g.submit < SHORT_S],
        "long": [g for g in waited if (g.actual or 0) - g.submit >= SHORT_S],
    }
    for name, group in groups.items():
        out[name] = {
            "jobs": len(group),
            "wait_p50_s": _round(_q([(g.actual or 0) - g.submit for g in group], 0.5)),
            "gpupool": errors([(g.ours, g) for g in group]),
            "slurm": errors([(g.slurm, g) for g in group]),
        }
    return out


def errors(pairs: list[tuple[float | None, Guess]]) -> dict[str, Any]:
    """Absolute error of each estimate relative to the actual wait: its median and p90,
    and the median absolute error in seconds (a missing estimate: infinite)."""
    rel, abs_s, missing = [], [], 0
    for est, g in pairs:
        wait = (g.actual or 0) - g.submit
        if est is None:
            missing += 1
            rel.append(math.inf)
            abs_s.append(math.inf)
            continue
        err = abs(est - (g.actual or 0))
        rel.append(err / wait)
        abs_s.append(err)
    return {
        "median_rel_error": _round(_q(rel, 0.5)),
        "p90_rel_error": _round(_q(rel, 0.9)),
        "median_abs_error_s": _round(_q(abs_s, 0.5)),
        "no_estimate": missing,
    }


def _q(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _round(x: float | None) -> float | None:
    return None if x is None or math.isinf(x) else round(x, 4)


def replay_estimates(
    nodes: Sequence[Node],
    pods: Sequence[Pod],
    *,
    policy: str = "best-fit",
    limit_round_s: float = 3600.0,
    model: RuntimeModel | None = None,
    every: int = 1,
    horizon_s: float = 30 * 86400.0,
    max_steps: int = 400,
    time_scale: float = 1.0,
    score_from_s: float = 0.0,
    score_until_s: float = math.inf,
) -> EstimateReplay:
    """Replay ``pods`` created before ``score_until_s`` (with times, in arrival order) and
    estimate the start of every ``every``-th one created from ``score_from_s``, at its
    submission, both ways."""
    arrivals = sorted(
        (
            p
            for p in pods
            if p.created_s is not None and p.run_s is not None and p.created_s < score_until_s
        ),
        key=lambda p: p.created_s or 0,
    )
    scored = {str(k) for k, p in enumerate(arrivals) if (p.created_s or 0) >= score_from_s}
    jobs = [
        Job(
            id=str(k),
            request=p.request,
            tenant=TENANT,
            kind=JobKind.BATCH,
            priority_class="training",
            submit_time=float(p.created_s or 0) / time_scale,
            max_runtime_s=limit_of(float(p.run_s or 0), limit_round_s),
        )
        for k, p in enumerate(arrivals)
    ]
    run_of = {j.id: float(arrivals[k].run_s or 0) for k, j in enumerate(jobs)}
    spec_of = {j.id: j.request.to_spec() for j in jobs}
    tenants = TenantTree([Tenant(TENANT)])
    config = CycleConfig(policy=policy)
    state = ClusterState(list(nodes), PROTOCOL_SHARING)
    history = RuntimeHistory(model)
    out = EstimateReplay(pods=len(jobs))
    guesses: dict[str, Guess] = {}
    running: dict[str, RunningJob] = {}
    ends: dict[str, float] = {}
    queue: dict[str, Job] = {}
    i = 0
    t = float(jobs[0].submit_time) if jobs else 0.0
    while i < len(jobs) or queue:
        done = sorted((j for j, e in ends.items() if e <= t), key=lambda j: (ends[j], j))
        for job_id in done:
            state.release(job_id)
            r = running.pop(job_id)
            del ends[job_id]
            limit = r.job.max_runtime_s
            history.add(Ended(TENANT, "", "", spec_of[job_id], t - r.start_time, limit))
        arrived = []
        while i < len(jobs) and jobs[i].submit_time <= t:
            queue[jobs[i].id] = jobs[i]
            arrived.append(i)
            i += 1
        for k in arrived:
            if k % every == 0 and jobs[k].id in scored:
                guesses[jobs[k].id] = _guess(
                    state, running, queue, tenants, t, config, history, jobs[k],
                    limit_round_s, horizon_s, max_steps, out,
                )  # fmt: skip
        result = run_cycle(
            state, list(running.values()), list(queue.values()), TenantTree([Tenant(TENANT)]),
            t, (), config,
        )  # fmt: skip
        out.cycles += 1
        for b in result.bindings:
            job = queue.pop(b.job_id)
            running[b.job_id] = RunningJob(job, b.placement, t)
            ends[b.job_id] = t + run_of[b.job_id]
            if b.job_id in guesses:
                guesses[b.job_id].actual = t
        upcoming = [e for e in ends.values() if e > t]
        if i < len(jobs):
            upcoming.append(jobs[i].submit_time)
        if not upcoming:
            break  # nothing will change: what waits now waits for ever
        t = min(upcoming)
    out.estimated = list(guesses.values())
    return out


def _guess(
    state: ClusterState,
    running: dict[str, RunningJob],
    queue: dict[str, Job],
    tenants: TenantTree,
    t: float,
    config: CycleConfig,
    history: RuntimeHistory,
    job: Job,
    limit_round_s: float,
    horizon_s: float,
    max_steps: int,
    out: EstimateReplay,
) -> Guess:
    """Both estimates of ``job``'s start, made at ``t`` on the state as it is."""
    jobs = [r.job for r in running.values()] + list(queue.values())
    ran = {r.job.id: t - r.start_time for r in running.values()}
    ours = {
        j.id: history.expect(
            TENANT, "", "", j.request.to_spec(), j.max_runtime_s, ran_s=ran.get(j.id, 0.0)
        )
        for j in jobs
    }
    slurm = {j.id: Expected(float(j.max_runtime_s or 0), "time limit") for j in jobs}
    starts: list[tuple[float | None, str]] = []
    for expected in (ours, slurm):
        plan = plan_starts(
            state.clone(), list(running.values()), list(queue.values()), tenants, t, expected,
            config=config, horizon_s=horizon_s, max_steps=max_steps, want={job.id},
        )  # fmt: skip
        out.plan_steps += plan.steps
        est = plan.estimates[job.id]
        starts.append((est.start, est.basis))
    return Guess(job.id, job.submit_time, starts[0][0], starts[1][0], starts[0][1])


def held_out(
    nodes: Sequence[Node],
    pods: Sequence[Pod],
    *,
    seeds: Sequence[int] = REPORT_SEEDS,
    node_fraction: float = NODE_FRACTION,
    time_scale: float = TIME_SCALE,
    days: tuple[float, float] = SCORED_DAYS,
    model: RuntimeModel = MODEL,
    every: int = 1,
) -> dict[str, Any]:
    """The replay on each node sample of ``seeds``, scored on ``days``: per seed, and pooled
    over the seeds (every waited pod of every sample counts once)."""
    per_seed: dict[str, Any] = {}
    pooled: list[Guess] = []
    for seed in seeds:
        cluster = sample_nodes(nodes, node_fraction, seed)
        run = replay_estimates(
            cluster, pods, model=model, time_scale=time_scale, every=every,
            score_from_s=days[0] * DAY, score_until_s=days[1] * DAY,
        )  # fmt: skip
        per_seed[str(seed)] = run.summary() | {"gpus": sum(len(n.devices) for n in cluster)}
        pooled += run.estimated
    return {
        "seeds": list(seeds),
        "days": list(days),
        "time_scale": time_scale,
        "node_fraction": node_fraction,
        "limit_round_s": 3600.0,
        "every": every,
        "model": asdict(model),
        "pooled": judge(pooled),
        "per_seed": per_seed,
    }

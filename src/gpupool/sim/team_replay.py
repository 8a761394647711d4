"""Discrete-time replay of a team scenario: static partition versus pooled sharing.

Jobs are generated once from the scenario (seeded) and replayed three times through the same
scheduling cycle as the server:

- ``static_partition``: what teams do by hand today. Each team's guaranteed cards are servers
  of its own (whole servers first, the remainder as named cards of a server split between
  teams, with that server's CPU and memory split in proportion); nobody else places there and
  nobody borrows. A 4-card job does not fit in two 2-card halves of one server.
- ``static_quota``: one shared pool, every team capped at its guarantee (borrowing 0), but
  placed anywhere — a quota, not a partition: it still packs better than a partition.
- ``pooled``: teams borrow idle capacity that owners reclaim.

A cycle runs every ``tick_minutes``; a preempted job is suspended and resumes later with the
work it had left (checkpointing), so every mode does the same work.
"""

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gpupool.model import Job, JobKind, Node, SpecError, make_devices, parse_request
from gpupool.scheduler import ClusterState
from gpupool.scheduler.cycle import CycleConfig, CycleResult, RunningJob, run_cycle
from gpupool.scheduler.reservations import Reservation
from gpupool.scheduler.tenants import CARD, Quota, Tenant, TenantTree
from gpupool.sim.scenario import Scenario
from gpupool.sim.stats import percentile
from gpupool.sim.traces.jobs import load_job_trace
from gpupool.sim.traces.rows import bad_rows_error

HOUR = 3600.0
MODES = ("static_partition", "static_quota", "pooled")
FOREVER = 10.0**12  # a partition's "reservation" never ends
CLASS_BY_KIND = {
    JobKind.INFERENCE: "online-inference",
    JobKind.TRAINING: "training",
    JobKind.DEV: "dev-test",
    JobKind.BATCH: "dev-test",
}


@dataclass(frozen=True, slots=True)
class SimJob:
    job: Job
    work_s: float  # run time it needs


def build_nodes(scenario: Scenario) -> list[Node]:
    nodes: list[Node] = []
    for g, group in enumerate(scenario.cluster):
        for i in range(group.count):
            name = f"g{g}-{i:03d}"
            devices = make_devices(group.model, group.cards, node=name)
            nodes.append(Node(name, group.cpu * 1000, group.memory_gib * 1024, devices))
    return nodes


def partition(scenario: Scenario) -> tuple[list[Node], dict[str, list[str]]]:
    """The cluster cut into the teams' own servers: each team in turn takes whole servers
    while its guarantee covers one, then the cards it still lacks from the next server (split
    with the next team). Cards no guarantee covers stay unowned (nobody places there)."""
    owed = {t.name: round(t.guarantee) for t in scenario.teams}
    order = [t.name for t in scenario.teams]
    nodes: list[Node] = []
    owners: dict[str, list[str]] = {t: [] for t in order}
    for g, group in enumerate(scenario.cluster):
        for i in range(group.count):
            left, part = group.cards, 0
            while left and any(owed.values()):
                team = next(t for t in order if owed[t] > 0)
                take = min(left, owed[team])
                name = f"g{g}-{i:03d}" + (f"-{part}" if take < group.cards else "")
                share = take / group.cards
                devices = make_devices(group.model, take, node=name)
                cpu, mem = int(group.cpu * 1000 * share), int(group.memory_gib * 1024 * share)
                nodes.append(Node(name, cpu, mem, devices))
                owners[team].append(name)
                owed[team] -= take
                left -= take
                part += 1
    return nodes, owners


def generate_jobs(scenario: Scenario) -> list[SimJob]:
    """Seeded arrivals: Poisson during each workload's hours, or hourly service replicas."""
    rng = random.Random(scenario.seed)
    horizon = scenario.days * 24 * HOUR
    jobs: list[SimJob] = []
    for w_index, w in enumerate(scenario.workloads):
        request = parse_request(w.request)
        cls = w.priority_class or CLASS_BY_KIND[w.kind]

        def add(t: float, work: float, w=w, request=request, cls=cls, w_index=w_index) -> None:
            job = Job(
                id=f"w{w_index}-{len(jobs):05d}",
                request=request,
                tenant=w.team,
                kind=w.kind,
                priority_class=cls,
                submit_time=t,
                max_runtime_s=max(1, math.ceil(work)),
            )
            jobs.append(SimJob(job, work))

        if w.service is not None:
            low, high = w.service.day_hours
            for hour in range(int(horizon // HOUR)):
                in_day = low <= hour % 24 < high
                for _ in range(w.service.day if in_day else w.service.night):
                    add(hour * HOUR, HOUR)
            continue
        start, end = w.hours
        t = 0.0
        rate = w.arrivals_per_hour / HOUR  # type: ignore[operator]
        while True:
            t += rng.expovariate(rate)
            if t >= horizon:
                break
            if start <= (t / HOUR) % 24 < end:
                add(t, rng.expovariate(1.0 / (w.duration_hours * HOUR)))
    jobs.extend(trace_jobs(scenario, len(jobs)))
    jobs.sort(key=lambda j: (j.job.submit_time, j.job.id))
    return jobs


def trace_jobs(scenario: Scenario, first_index: int = 0) -> list[SimJob]:
    """Jobs of the scenario's trace files; rows of unknown teams are refused by name."""
    teams = {t.name for t in scenario.teams}
    out: list[SimJob] = []
    for path in scenario.traces:
        rows, errors = load_job_trace(path)
        if errors:
            raise bad_rows_error(f"trace {Path(path).name}", errors)
        for row in rows:
            if row.tenant not in teams:
                raise SpecError(f"trace {Path(path).name}: unknown team {row.tenant!r}")
            job = Job(
                id=f"t{first_index + len(out):05d}",
                request=row.request,
                tenant=row.tenant,
                kind=row.kind,
                priority_class=row.priority_class or CLASS_BY_KIND[row.kind],
                submit_time=row.submit_s,
                max_runtime_s=max(1, math.ceil(row.duration_s)),
            )
            out.append(SimJob(job, row.duration_s))
    return out


@dataclass
class ModeResult:
    mode: str
    card_seconds: float = 0.0
    preemptions: int = 0
    copies: int = 0  # replicas moved make-before-break (a copy started, then it stopped)
    started: dict[str, list[float]] = field(default_factory=dict)  # team -> queue delays
    waiting: dict[str, list[float]] = field(default_factory=dict)  # never started: wait so far
    busy: list[tuple[float, float]] = field(default_factory=list)  # (hour, cards in use)
    submitted: dict[str, int] = field(default_factory=dict)
    finished: dict[str, int] = field(default_factory=dict)

    def summary(self, cards: int, horizon: float) -> dict[str, Any]:
        teams: dict[str, Any] = {}
        every: list[float] = []
        for team, n in sorted(self.submitted.items()):
            started = self.started.get(team, [])
            delays = started + self.waiting.get(team, [])  # unstarted jobs count what they waited
            every += delays
            teams[team] = {
                "jobs": n,
                "started": len(started),
                "finished": self.finished.get(team, 0),
                "queue_delay_p50_s": percentile(delays, 50),
                "queue_delay_p95_s": percentile(delays, 95),
            }
        return {
            "gpu_utilization": round(self.card_seconds / (cards * horizon), 4),
            "cards_in_use": self.busy,
            "queue_delay_p95_s": percentile(every, 95),
            "preemptions": self.preemptions,
            "replicas_copied": self.copies,
            "tenants": teams,
        }


def replay_mode(
    scenario: Scenario,
    jobs: list[SimJob],
    mode: str,
    config: CycleConfig | None = None,
    advisor: Callable[[CycleResult, float], None] | None = None,
) -> ModeResult:
    """``advisor``: changes each cycle's result before it is carried out (advisory mode)."""
    if mode not in MODES:
        raise SpecError(f"mode: {mode!r} is not one of {', '.join(MODES)}", field="mode")
    reservations: list[Reservation] = []
    if mode == "static_partition":
        nodes, owners = partition(scenario)
        reservations = [
            Reservation(f"own-{team}", team, tuple(names), 0.0, FOREVER)
            for team, names in owners.items()
            if names
        ]
    else:
        nodes = build_nodes(scenario)
    pooled = mode == "pooled"
    config = replace(config or CycleConfig(), victim_order=scenario.victim_order)
    tick = scenario.tick_minutes * 60.0
    horizon = scenario.days * 24 * HOUR
    result = ModeResult(mode)
    left = {j.job.id: j.work_s for j in jobs}
    started: dict[str, float] = {}
    running: dict[str, RunningJob] = {}
    pending: list[Job] = []
    upcoming = list(jobs)
    next_job = 0
    now = 0.0
    while now < horizon:
        for rid, r in list(running.items()):  # finish what is done
            if left[rid] <= 0:
                del running[rid]
                result.finished[r.job.tenant] = result.finished.get(r.job.tenant, 0) + 1
        while next_job < len(upcoming) and upcoming[next_job].job.submit_time <= now:
            sj = upcoming[next_job]
            pending.append(sj.job)
            result.submitted[sj.job.tenant] = result.submitted.get(sj.job.tenant, 0) + 1
            next_job += 1
        cycle = run_cycle(
            ClusterState(nodes),
            list(running.values()),
            pending,
            _tree(scenario, pooled),
            now,
            reservations=reservations,
            config=config,
        )
        if advisor is not None:
            advisor(cycle, now)
        by_id = {j.id: j for j in pending}
        for p in cycle.preemptions:
            victim = running.pop(p.job_id)
            pending_job = victim.job
            by_id[pending_job.id] = pending_job
            result.preemptions += 1
        for copy in cycle.replacements:  # the copy starts and the replica stops in the tick
            moved = running[copy.job_id]
            running[copy.job_id] = RunningJob(moved.job, copy.placement, moved.start_time)
            result.copies += 1
        for b in cycle.bindings:
            job = by_id[b.job_id]
            running[job.id] = RunningJob(job, b.placement, now, b.borrowed)
            if job.id not in started:
                started[job.id] = now
                result.started.setdefault(job.tenant, []).append(now - job.submit_time)
        pending = [j for j in by_id.values() if j.id not in running]  # incl. preempted ones
        step = min(tick, horizon - now)
        in_use = 0.0
        for rid, r in running.items():
            cards = r.placement.card_percent / CARD
            used = min(step, left[rid])
            result.card_seconds += cards * used
            in_use += cards
            left[rid] -= step
        result.busy.append((round(now / HOUR, 3), round(in_use, 2)))
        now += tick
    for sj in upcoming[next_job:]:  # arrived after the last cycle: submitted, never started
        pending.append(sj.job)
        result.submitted[sj.job.tenant] = result.submitted.get(sj.job.tenant, 0) + 1
    for job in pending:
        if job.id not in started:
            result.waiting.setdefault(job.tenant, []).append(horizon - job.submit_time)
    return result


def _tree(scenario: Scenario, pooled: bool) -> TenantTree:
    teams = [Tenant("company")]
    for t in scenario.teams:
        quota = Quota.cards(t.guarantee) if pooled else Quota.cards(t.guarantee, borrowing=0)
        teams.append(Tenant(t.name, "company", {"gpu": quota}))
    return TenantTree(teams)


def compare(scenario: Scenario) -> dict[str, Any]:
    """Replay the scenario's jobs under a true static partition, under per-team quota caps on
    one pool, and under pooling."""
    jobs = generate_jobs(scenario)
    cards = sum(g.count * g.cards for g in scenario.cluster)
    horizon = scenario.days * 24 * HOUR
    out: dict[str, Any] = {"scenario": scenario.name, "cards": cards, "jobs": len(jobs)}
    out["victim_order"] = scenario.victim_order
    for mode in MODES:
        out[mode] = replay_mode(scenario, jobs, mode).summary(cards, horizon)
    return out


def defrag_waits(
    scenario: Scenario,
    moves_per_hour: int = 12,
    after_s: float = 300.0,
    checkpoint_s: float = 1800.0,
) -> dict:
    """The pooled replay without and with defragmentation (the server's limits: moves per
    hour spread over the cycles, a job waits ``after_s`` first, a move costs at most
    ``checkpoint_s`` of a job's work): queue delays per team."""
    jobs = generate_jobs(scenario)
    cards = sum(g.count * g.cards for g in scenario.cluster)
    horizon = scenario.days * 24 * HOUR
    per_cycle = max(1, math.ceil(moves_per_hour * scenario.tick_minutes / 60))
    out: dict[str, Any] = {"scenario": scenario.name, "moves_per_cycle": per_cycle}
    for name, moves in (("without", 0), ("with", per_cycle)):
        config = CycleConfig(
            defrag_moves=moves, defrag_after_s=after_s, defrag_checkpoint_s=checkpoint_s
        )
        out[name] = replay_mode(scenario, jobs, "pooled", config).summary(cards, horizon)
    return out

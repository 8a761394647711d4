"""One scheduling cycle: a short list of actions over a snapshot, as Volcano does.

enqueue -> allocate (within guarantee) -> borrow (idle capacity, DRF between borrowers)
-> preempt (lower priority, same tenant) -> reclaim (owners take back lent capacity)
-> backfill (jobs that end before the starving head job can start).

``run_cycle`` is pure: (snapshot, running jobs, queue, tenants, now) -> decisions. It owns the
``ClusterState`` it is given (placements are applied to it) and touches nothing else.
"""

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field

from gpupool.model import Job, ResourceRequest, SpecError
from gpupool.scheduler.defragment import defragment
from gpupool.scheduler.lookahead import DEPTH
from gpupool.scheduler.placer import Placer
from gpupool.scheduler.preemption import choose_victims
from gpupool.scheduler.priorities import QueuePolicy
from gpupool.scheduler.reservations import Reservation, node_mask
from gpupool.scheduler.state import ClusterState
from gpupool.scheduler.tenants import TenantTree, Usage, usage_of
from gpupool.scheduler.types import Placement, Unplaceable
from gpupool.sharing import TABLES

MIG_PERCENT = {
    p.name: round(100 * p.compute_slices / t.compute_slices)
    for t in TABLES.values()
    for p in t.profiles
}


@dataclass(frozen=True, slots=True)
class RunningJob:
    job: Job
    placement: Placement
    start_time: float
    borrowed: bool = False  # admitted above its tenant's guarantee: reclaimable

    @property
    def expected_end(self) -> float:
        m = self.job.max_runtime_s
        return float("inf") if m is None else self.start_time + m


@dataclass(frozen=True, slots=True)
class Binding:
    job_id: str
    placement: Placement
    borrowed: bool
    action: str  # allocate, borrow, preempt, reclaim, defragment or backfill
    after: tuple[str, ...] = ()  # victims that must stop first
    note: str = ""  # said in the job's reason with the action (defragment: the moves)


@dataclass(frozen=True, slots=True)
class Preemption:
    job_id: str
    by: str
    reason: str
    grace_s: int
    action: str  # suspend (requeue, keeps its place) or kill


@dataclass
class CycleConfig:
    """``max_victim_searches`` bounds the trial placements preempt + reclaim may run in one
    cycle (each clones the snapshot); jobs past the budget wait for the next cycle."""

    policy: str = "auto"
    queue: QueuePolicy = field(default_factory=QueuePolicy)
    grace_s: int = 30
    max_victim_searches: int = 64
    defrag_moves: int = 0  # jobs this cycle may move to make room (0: no defragmentation)
    defrag_after_s: float = 300.0  # how long a job within its guarantee waits before


@dataclass
class CycleResult:
    bindings: list[Binding] = field(default_factory=list)
    preemptions: list[Preemption] = field(default_factory=list)
    pending: dict[str, str] = field(default_factory=dict)  # job id -> reason
    # pending heads whose earliest start backfill computed: if running jobs end at their
    # declared time limits, they can start by then (squeue's expected start time)
    starts_by: dict[str, float] = field(default_factory=dict)

    @property
    def admitted(self) -> int:
        return len(self.bindings)


class _Cycle:
    def __init__(self, state, running, tenants, reservations, now, config, placer):
        self.state: ClusterState = state
        self.tree: TenantTree = tenants
        self.reservations: Sequence[Reservation] = reservations
        self.now: float = now
        self.config: CycleConfig = config
        self.placer: Placer = placer
        self.q = config.queue
        self.models = state.device_model
        self._usage = state.usage_cache
        self._estimates: dict[tuple, Usage] = {}
        self.running: dict[str, RunningJob] = {}
        self.started_before = {r.job.id for r in running}  # only these can be victims
        for r in running:
            self.running[r.job.id] = r
            if r.job.id not in state.placements:
                state.apply(r.placement)
            self.tree.charge(r.job.tenant, self.usage(r.placement))
        self.result = CycleResult()
        self.failed: dict[tuple, tuple[int, str]] = {}  # (request, gang) -> (releases, reason)
        self.searches_left = config.max_victim_searches
        self.victimless: dict[tuple, int] = {}  # victim searches that failed, by ask
        # quotas on per-model cards or device memory need the placement to be checked
        self.exact_after_placement = bool(tenants._managed - {"gpu", "cpu"})

    def usage(self, placement: Placement) -> Usage:
        cached = self._usage.get(placement.job_id)
        if cached is None or cached[0] is not placement:
            cached = self._usage[placement.job_id] = (
                placement,
                usage_of(placement, MIG_PERCENT, self.models),
            )
        return cached[1]

    def estimate(self, job: Job) -> Usage:
        """Usage known before placement: cards (percent) and CPU (see ``estimate_usage``)."""
        key = (job.request, job.gang_size)
        usage = self._estimates.get(key)
        if usage is None:
            usage = self._estimates[key] = estimate_usage(job)
        return usage

    def mask(self, job: Job):
        return node_mask(
            self.reservations, job, self.now, self.state.index, self.tree.chain[job.tenant]
        )

    def try_place(self, job: Job, upcoming: Sequence[ResourceRequest] = ()) -> Placement | str:
        """Place ``job`` on the snapshot (not applied). Failures are remembered until the
        snapshot releases capacity, so identical asks behind a refused one cost nothing.
        ``upcoming``: the requests of the jobs queued next (for ``fgd-lookahead``)."""
        mask, reason = self.mask(job)
        key = (job.request, job.gang_size)
        if mask is None:
            seen = self.failed.get(key)
            if seen is not None and seen[0] == self.state.releases:
                return seen[1]
        result = self.placer.place(self.state, job, mask, reason, upcoming=upcoming)
        if isinstance(result, Unplaceable):
            if mask is None:
                self.failed[key] = (self.state.releases, result.reason)
            return result.reason
        return result

    def bind(
        self,
        job: Job,
        placement: Placement,
        borrowed: bool,
        action: str,
        after: tuple[str, ...] = (),
        note: str = "",
    ) -> None:
        self.state.apply(placement)
        self.tree.charge(job.tenant, self.usage(placement))
        self.running[job.id] = RunningJob(job, placement, self.now, borrowed)
        self.result.bindings.append(Binding(job.id, placement, borrowed, action, after, note))
        self.result.pending.pop(job.id, None)

    def evict(self, victim: RunningJob, by: Job, reason: str) -> None:
        self.state.release(victim.job.id)
        self.tree.charge(victim.job.tenant, self.usage(victim.placement), -1)
        del self.running[victim.job.id]
        self.result.preemptions.append(
            Preemption(victim.job.id, by.id, reason, self.config.grace_s, victim.job.on_preempt)
        )


def run_cycle(
    state: ClusterState,
    running: Sequence[RunningJob],
    pending: Sequence[Job],
    tenants: TenantTree,
    now: float,
    reservations: Sequence[Reservation] = (),
    config: CycleConfig | None = None,
    placer: Placer | None = None,
) -> CycleResult:
    """Decide one cycle. ``tenants`` must carry no usage yet: running jobs are charged here."""
    config = config or CycleConfig()
    placer = placer or Placer(config.policy)
    cy = _Cycle(state, running, tenants, reservations, now, config, placer)
    queue = enqueue(cy, pending)
    placer.observe(queue, state)
    blocked, to_borrow, behind = allocate(cy, queue)
    blocked += borrow(cy, to_borrow)
    blocked = preempt(cy, blocked)
    blocked = reclaim(cy, blocked)
    defragment(cy, blocked)
    backfill(cy, behind)
    return cy.result


def enqueue(cy: _Cycle, pending: Sequence[Job]) -> list[Job]:
    """Validate and order the queue; invalid jobs stay pending with the reason."""
    valid: list[Job] = []
    for job in pending:
        try:
            cy.tree.require(job.tenant)
            cy.q.class_value(job)
        except SpecError as exc:
            cy.result.pending[job.id] = str(exc)
            continue
        valid.append(job)
    return cy.q.order(valid, cy.now)


def allocate(cy: _Cycle, queue: list[Job]) -> tuple[list[Job], list[Job], list[tuple[Job, Job]]]:
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
        ok, borrows, reason = cy.tree.check(job.tenant, cy.estimate(job), allow_borrow=False)
        first = tenant_heads.get(job.tenant) or (
            head if head is not None and (head.tenant == job.tenant or not ok) else None
        )
        if first is not None:  # another team's work within its guarantee never waits here
            behind.append((job, first))
            cy.result.pending[job.id] = f"waiting behind {first.id} (starving; backfill only)"
            continue
        if not ok:  # over its guarantee whatever the placement: no need to place it now
            cy.result.pending[job.id] = reason
            (to_borrow if borrows else blocked).append(job)
            if cy.q.starving(job, cy.now):
                tenant_heads[job.tenant] = job
            continue
        upcoming = [j.request for j in queue[i + 1 : i + 1 + DEPTH]] if ahead else ()
        result = cy.try_place(job, upcoming)
        if isinstance(result, str):
            cy.result.pending[job.id] = result
            blocked.append(job)
            if cy.q.starving(job, cy.now):
                head = job
            continue
        if cy.exact_after_placement:
            ok, borrows, reason = cy.tree.check(job.tenant, cy.usage(result), allow_borrow=False)
        if ok:
            cy.bind(job, result, False, "allocate")
            continue
        cy.result.pending[job.id] = reason
        (to_borrow if borrows else blocked).append(job)
    return blocked, to_borrow, behind


def borrow(cy: _Cycle, jobs: list[Job]) -> list[Job]:
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
        ok, _, reason = cy.tree.check(tenant, cy.estimate(job))
        result = cy.try_place(job) if ok else reason
        if not ok:
            cy.result.pending[job.id] = reason
            blocked.append(job)
        elif isinstance(result, str):
            cy.result.pending[job.id] = result
            blocked.append(job)
        else:
            ok, _, reason = cy.tree.check(tenant, cy.usage(result))
            if ok:
                cy.bind(job, result, True, "borrow")
            else:
                cy.result.pending[job.id] = reason
                blocked.append(job)  # preempting its own lower-priority work may still help
        if queues[tenant]:
            heapq.heappush(heap, (cy.tree.dominant_share(tenant, capacity), tenant))
    return blocked


def _capacity(cy: _Cycle) -> dict[str, int]:
    s = cy.state
    return {
        "gpu": int(s.exists.sum()) * 100,
        "gpu_mem": int(s.dev_mem.sum()),
        "cpu": int(s.cpu_cap.sum()),
    }


def preempt(cy: _Cycle, blocked: list[Job]) -> list[Job]:
    """A blocked job takes capacity from lower-priority jobs of its own tenant."""
    pool = _VictimPool(cy)

    def candidates(job: Job) -> list[RunningJob]:
        mine = cy.q.base_priority(job)
        return [r for r in pool.of_tenant(job.tenant) if pool.priority[r.job.id] < mine]

    return _search_victims(cy, blocked, "preempt", candidates)


def reclaim(cy: _Cycle, blocked: list[Job]) -> list[Job]:
    """A job within its tenant's guarantee takes back capacity lent to other tenants."""
    pool = _VictimPool(cy)

    def candidates(job: Job) -> list[RunningJob]:
        return [r for r in pool.borrowed() if r.job.tenant != job.tenant]

    return _search_victims(cy, blocked, "reclaim", candidates)


def _search_victims(cy: _Cycle, blocked: list[Job], action: str, candidates) -> list[Job]:
    """Try ``action`` for each blocked job while the cycle's search budget lasts; returns the
    jobs still blocked."""
    left: list[Job] = []
    for i, job in enumerate(blocked):
        if cy.searches_left <= 0:
            left.extend(blocked[i:])
            break
        if not _take(cy, job, candidates(job), action):
            left.append(job)
    return left


class _VictimPool:
    """Jobs running before this cycle (a job bound in this cycle is never evicted in it),
    indexed by tenant; evicted ones drop out as the cycle goes."""

    def __init__(self, cy: _Cycle):
        self.cy = cy
        self.by_tenant: dict[str, list[RunningJob]] = {}
        self.lent: list[RunningJob] = []
        self.priority: dict[str, int] = {}
        for r in cy.running.values():
            if r.job.id in cy.started_before:
                self.priority[r.job.id] = cy.q.base_priority(r.job)
                self.by_tenant.setdefault(r.job.tenant, []).append(r)
                if r.borrowed:
                    self.lent.append(r)

    def of_tenant(self, tenant: str) -> list[RunningJob]:
        return [r for r in self.by_tenant.get(tenant, ()) if r.job.id in self.cy.running]

    def borrowed(self) -> list[RunningJob]:
        return [r for r in self.lent if r.job.id in self.cy.running]


def _take(cy: _Cycle, job: Job, candidates: list[RunningJob], action: str) -> bool:
    if not candidates or cy.searches_left <= 0:
        return False
    same = [r for r in candidates if r.job.tenant == job.tenant]
    if not _guarantee_allows(cy, job, same):
        return False
    key = (action, job.tenant, job.request, job.gang_size, cy.q.base_priority(job))
    if cy.victimless.get(key) == cy.state.releases:
        return False  # the same ask found no victims and nothing was freed since
    cy.searches_left -= 1
    chosen = choose_victims(cy, job, candidates, within_guarantee=True)
    if chosen is None:
        cy.victimless[key] = cy.state.releases
        return False
    victims, placement = chosen
    why = (
        f"preempted by higher-priority {job.id}"
        if action == "preempt"
        else f"reclaimed by {job.tenant} for {job.id} (capacity was borrowed)"
    )
    for v in victims:
        cy.evict(v, job, why)
    cy.bind(job, placement, False, action, tuple(v.job.id for v in victims))
    return True


def _guarantee_allows(cy: _Cycle, job: Job, own_victims: list[RunningJob]) -> bool:
    """Cheap necessary check before a victim search: with every own victim gone, the job's
    cards and CPU fit its tenant's guarantee (a share counts its compute percent, MIG and
    memory-only shares 1%). Preemption never lifts a job above its guarantee."""
    need = dict(estimate_usage(job))
    for v in own_victims:
        for f, q in cy.usage(v.placement).items():
            if f in need:
                need[f] -= q
    ok, _, _ = cy.tree.check(job.tenant, need, allow_borrow=False)
    return ok


def estimate_usage(job: Job) -> Usage:
    """The card percent and CPU a job takes wherever it lands (device memory and per-model
    cards depend on the placement and are checked after it)."""
    r = job.request
    kind = r.kind.value
    if kind == "mig":
        per = MIG_PERCENT.get(r.mig_profile or "", 1)
    elif kind == "share":
        per = r.gpu_share_pct or 1
    else:
        per = 100
    usage: Usage = {"cpu": r.cpu_millis * job.gang_size}
    if r.gpu_count:
        usage["gpu"] = per * r.gpu_count * job.gang_size
    return usage


def backfill(cy: _Cycle, behind: list[tuple[Job, Job]]) -> None:
    """EASY backfill behind starving heads: a job may run now only if it declares a maximum
    run time that ends before its head's earliest possible start."""
    shadows: dict[str, float] = {}
    for job, head in behind:
        if head.id in cy.running:
            shadow = float("inf")  # the head got its place in a later action
        elif head.id not in shadows:
            shadow = shadows[head.id] = shadow_time(cy, head)
        else:
            shadow = shadows[head.id]
        if job.max_runtime_s is None or cy.now + job.max_runtime_s > shadow:
            continue
        ok, _, reason = cy.tree.check(job.tenant, cy.estimate(job))
        result = cy.try_place(job) if ok else reason
        if isinstance(result, str):
            cy.result.pending[job.id] = result
            continue
        ok, borrows, reason = cy.tree.check(job.tenant, cy.usage(result))
        if ok:
            cy.bind(job, result, borrows, "backfill")
        else:
            cy.result.pending[job.id] = reason
    for head_id, shadow in shadows.items():
        if shadow != float("inf") and head_id not in cy.running:
            cy.result.starts_by[head_id] = shadow


def shadow_time(cy: _Cycle, head: Job) -> float:
    """When ``head`` could start if running jobs end at their declared maximum run times:
    it must fit the cluster and, counting its tenant's ended jobs, its quota."""
    trial = cy.state.clone()
    need = dict(cy.estimate(head))
    for r in sorted(cy.running.values(), key=lambda r: (r.expected_end, r.job.id)):
        if r.expected_end == float("inf"):
            break
        trial.release(r.job.id)
        if r.job.tenant == head.tenant:
            for f, q in cy.usage(r.placement).items():
                if f in need:
                    need[f] -= q
        quota_ok, _, _ = cy.tree.check(head.tenant, need)
        if quota_ok and isinstance(cy.placer.place(trial, head, explain=False), Placement):
            return r.expected_end
    return float("inf")

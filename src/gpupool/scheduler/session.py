"""One cycle's session, as Volcano's: the snapshot it owns, the tenant tree charged with what
runs, the decisions so far, and the plugins its actions call. Actions (``scheduler/actions``)
read and change the session; nothing else does."""

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np

from gpupool.model import Job, ResourceRequest
from gpupool.scheduler.fairshare import FairShare, UsageHistory, present_borrowing
from gpupool.scheduler.memo import RefusedAsks
from gpupool.scheduler.min_runtime import MinRuntime, minutes
from gpupool.scheduler.placer import Placer
from gpupool.scheduler.plugins import Plugins, default_plugins
from gpupool.scheduler.priorities import QueuePolicy
from gpupool.scheduler.reasons import Cause, Protection, Reason, Wait
from gpupool.scheduler.reservations import Fence, Reservation, fence, held_on, iso, owned
from gpupool.scheduler.state import ClusterState
from gpupool.scheduler.tenants import TenantTree, Usage, usage_of
from gpupool.scheduler.types import Placement, RunningJob, Unplaceable
from gpupool.sharing import TABLES

NOT_ALLOWED = "not allowed by its node selector, affinity or tolerations"
EXCLUDED = "excluded by the job (-x/--exclude)"
MIG_PERCENT = {
    p.name: round(100 * p.compute_slices / t.compute_slices)
    for t in TABLES.values()
    for p in t.profiles
}


@dataclass(frozen=True, slots=True)
class Binding:
    job_id: str
    placement: Placement
    borrowed: bool
    action: str  # allocate, borrow, preempt, reclaim, defragment or backfill
    after: tuple[str, ...] = ()  # victims that must stop first
    note: str = ""  # said in the job's reason with the action (defragment: the moves)
    # reservations ahead whose nodes it takes, no other node having room (online work):
    # when such a window begins, the job is moved (a copy elsewhere first)
    ahead: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Preemption:
    job_id: str
    by: str
    reason: str
    grace_s: int
    action: str  # suspend (requeue, keeps its place) or kill
    cause: Cause = Cause.PREEMPT
    reservation: str = ""  # cause reservation: the reservation whose window began
    # within its minimum run time, taken for a guarantee that waited past the bound
    protection: Protection = Protection.NONE


VictimlessKey = tuple[str, str, ResourceRequest, int, int, bool]
VictimOrder = Literal["work", "age"]
VICTIM_ORDERS: tuple[VictimOrder, ...] = ("work", "age")


@dataclass
class CycleConfig:
    """``max_victim_searches`` bounds the trial placements preempt + reclaim may run in one
    cycle (each clones the snapshot); jobs past the budget wait for the next cycle."""

    policy: str = "auto"
    queue: QueuePolicy = field(default_factory=QueuePolicy)
    grace_s: int = 30
    max_victim_searches: int = 64
    defrag_moves: int = 0  # jobs this cycle may move to make room (0: no defragmentation)
    max_defrag_plans: int = 16  # distinct asks the defragment action plans for in one cycle
    # the bound ``defrag_moves`` is what is left of (the server's moves per hour), for the
    # reasons: 0 there means defragmentation is off; None: the cycle's own budget
    defrag_hourly: int | None = None
    defrag_after_s: float = 300.0  # how long a job within its guarantee waits before
    # a suspendable job is taken to lose at most this much work when moved (its checkpoints)
    defrag_checkpoint_s: float = 1800.0
    # jobs whose replacement is starting (make-before-break): not moved again meanwhile
    replacing: frozenset[str] = frozenset()
    # jobs of this priority class or above are served beyond their guarantee too, moving
    # only their own tenant's jobs or borrowed ones (None: guarantees only)
    defrag_class: str | None = None
    # victims of one priority, first: "work" — the least work lost, cards x seconds since the
    # last checkpoint (at most the grace of a job that saves on its signal); "age" — the fewest
    # seconds since the last checkpoint whatever the job holds (the youngest, where none says
    # anything: the order before the fast vacate). docs/quotas-and-cycle.md has the figures.
    victim_order: VictimOrder = "work"
    # a reservation that begins copies online work off its nodes first (make-before-break);
    # False: it stops it like the rest (Kubernetes mode: a pod is not copied, it is evicted)
    copy_for_reservations: bool = True
    # minimum run times before a job may be stopped for another (none by default)
    min_runtime: MinRuntime = field(default_factory=MinRuntime)


@dataclass(frozen=True, slots=True)
class Replacement:
    """Make-before-break: start a copy of ``job_id`` at ``placement``; the running one stops
    once the copy runs (a service's replica: once the copy is ready; the server does that),
    and its room goes to ``by`` — a job defragmentation serves, or a reservation that
    began (``cause``)."""

    job_id: str
    placement: Placement
    by: str
    reason: str
    cause: Cause = Cause.DEFRAGMENT
    reservation: str = ""  # cause reservation: the reservation whose window began


@dataclass(frozen=True, slots=True)
class Regrant:
    """A running replica's placement changed (issue 49): parked (its devices lent) or woken
    (its card back once ``after`` — the jobs vacated from it — have stopped)."""

    job_id: str
    placement: Placement
    wake: bool
    after: tuple[str, ...] = ()
    borrowed: bool = False


@dataclass
class CycleResult:
    bindings: list[Binding] = field(default_factory=list)
    preemptions: list[Preemption] = field(default_factory=list)
    replacements: list[Replacement] = field(default_factory=list)
    regrants: list[Regrant] = field(default_factory=list)
    unwoken: dict[str, str] = field(default_factory=dict)  # replica job -> why not woken now
    pending: dict[str, Reason] = field(default_factory=dict)  # job id -> why it waits
    # pending heads whose earliest start backfill computed: if running jobs end at their
    # declared time limits, they can start by then (squeue's expected start time)
    starts_by: dict[str, float] = field(default_factory=dict)

    @property
    def admitted(self) -> int:
        return len(self.bindings)


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


class Session:
    def __init__(
        self,
        state: ClusterState,
        running: Sequence[RunningJob],
        tenants: TenantTree,
        reservations: Sequence[Reservation],
        now: float,
        config: CycleConfig,
        placer: Placer,
        plugins: Plugins | None = None,
        history: UsageHistory | None = None,
    ):
        self.state = state
        self.tree = tenants
        self.reservations = reservations
        self.now = now
        self.config = config
        self.placer = placer
        self.q = config.queue
        self.models = state.device_model
        self._usage = state.usage_cache
        self._estimates: dict[tuple[ResourceRequest, int], Usage] = {}  # (request, gang size)
        self.running: dict[str, RunningJob] = {}
        self.started_before = {r.job.id for r in running}  # only these can be victims
        for r in running:
            self.running[r.job.id] = r
            if r.job.id not in state.placements:
                state.apply(r.placement)
            self.tree.charge(r.job.tenant, self.usage(r.placement))
        # fair share over time, when the cycle is given the past (scheduler/fairshare.py)
        self.fairshare = (
            None if history is None else FairShare(tenants, history, present_borrowing(tenants))
        )
        factors = None if self.fairshare is None else self.fairshare.factors()
        self.plugins = plugins or default_plugins(config.queue, tenants, placer, factors)
        self.min_runtime = config.min_runtime
        self.result = CycleResult()
        self.failed = RefusedAsks(state)  # (request, gang) -> reason
        self.searches_left = config.max_victim_searches
        # victim searches that failed, by (action, tenant, request, gang size, priority,
        # past the minimum run time's bound) (the releases count then, and what the job's
        # reason adds: "" for nothing)
        self.victimless: dict[VictimlessKey, tuple[int, str]] = {}
        self._allowed: dict[frozenset[str], np.ndarray] = {}  # jobs' own node sets as masks
        # hold_room's answers, with the nodes' versions they were computed at
        self._rooms: dict[str, tuple[tuple[str, tuple[int, ...]], dict[str, int]]] = {}
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

    def fence(self, job: Job) -> Fence:
        """The reservations that keep ``job`` off nodes now."""
        return fence(self.reservations, job, self.now, self.tree.chain[job.tenant], self.hold_room)

    def mask(
        self, job: Job, ahead: bool = True, fenced: Fence | None = None
    ) -> tuple[np.ndarray | None, str]:
        """The nodes ``job`` may use now and why not the others; ``ahead`` False: also the
        nodes of reservations whose window lies ahead (online work's last resort).
        ``fenced``: ``self.fence(job)`` when the caller has it."""
        f = self.fence(job) if fenced is None else fenced
        mask, reason = f.mask(self.state.index, ahead), f.reason(ahead)
        if job.excluded_nodes:  # sbatch -x: never these
            kept = ~self._node_mask(job.excluded_nodes)
            mask, reason = (kept, EXCLUDED) if mask is None else (mask & kept, reason or EXCLUDED)
        if job.nodes is None:
            return mask, reason
        allowed = self._node_mask(job.nodes)
        why = job.nodes_why or NOT_ALLOWED
        if mask is None:
            return allowed, why
        return mask & allowed, reason or why

    def _node_mask(self, names: frozenset[str]) -> np.ndarray:
        """The nodes of ``names`` that the snapshot has, as a mask (cached per set)."""
        allowed = self._allowed.get(names)
        if allowed is None:
            allowed = np.zeros(len(self.state.index), dtype=bool)
            for name in names:
                if name in self.state.index:
                    allowed[self.state.index[name]] = True
            self._allowed[names] = allowed
        return allowed

    def ahead_of(self, job: Job, placement: Placement) -> tuple[str, ...]:
        """The reservations ahead whose nodes ``placement`` takes, that keep ``job`` off
        them unless nowhere else fits (online work that would run past their start)."""
        f = self.fence(job)
        nodes = set(placement.node_names)
        return tuple(k.reservation.id for k in f.kept_off if not k.active and nodes & set(k.nodes))

    def hold_room(self, r: Reservation) -> dict[str, int]:
        """For a reservation of N cards, per node of it: the cards free or its owner's there,
        less what the hold keeps there — how many others may still take (below 0: short).
        The N cards are held on its nodes in their order, each node's as far as it has
        cards (held packed: the owner's big jobs need them together). Cached until a
        placement on its nodes changes."""
        st = self.state
        rows = {n: st.index[n] for n in r.nodes if n in st.index}
        key = (r.id, tuple(int(st.version[i]) for i in rows.values()))
        cached = self._rooms.get(r.id)
        if cached is not None and cached[0] == key:
            return cached[1]
        taken: dict[str, set[int]] = {n: set() for n in rows}  # others' cards on each node
        for running in self.running.values():
            if owned(r, self.tree.chain[running.job.tenant]):
                continue
            for ng in running.placement.nodes:
                if ng.node in taken:
                    taken[ng.node].update(d.device for d in ng.devices)
        capacity = {node: int(st.usable[row].sum()) for node, row in rows.items()}
        held = held_on(list(rows), r.cards or 0, capacity)
        room = {node: capacity[node] - len(taken[node]) - held[node] for node in rows}
        self._rooms[r.id] = (key, room)
        return room

    def try_place(self, job: Job, upcoming: Sequence[ResourceRequest] = ()) -> Placement | Reason:
        """Place ``job`` on the snapshot (not applied). Failures are remembered until the
        snapshot releases capacity, so identical asks behind a refused one cost nothing.
        ``upcoming``: the requests of the jobs queued next (for ``fgd-lookahead``). Online
        work that fits nowhere else goes to the nodes of a reservation ahead (it is moved
        when the window begins): a service is never left without a place that lower-priority
        work may take."""
        fenced = self.fence(job) if self.reservations else Fence()
        mask, reason = self.mask(job, fenced=fenced)
        key = (job.request, job.gang_size)
        if mask is None and self.failed.refused(key):
            return Reason(Wait.NO_ROOM, str(self.failed.detail(key)))
        result = self.plugins.place(self.state, job, mask, reason, True, upcoming)
        if isinstance(result, Unplaceable) and fenced.ahead:  # online work's last resort
            wider, why = self.mask(job, ahead=False, fenced=fenced)
            result = self.plugins.place(self.state, job, wider, why, True, upcoming)
        if isinstance(result, Unplaceable):
            if mask is None:
                self.failed.add(key, result.reason)
            return Reason(Wait.NO_ROOM, result.reason)
        return result

    def quota(self, job: Job, usage: Usage, borrowing: bool) -> tuple[bool, bool, Reason]:
        """The quota plugin's answer: (fits, would borrow, why not)."""
        ok, borrows, why = self.plugins.quota(job.tenant, usage, borrowing)
        if (
            not ok
            and job.request.whole_node
            and usage.get("gpu", 0) > self.estimate(job).get("gpu", 0)
        ):  # placed: a whole node counts all its cards, more than it asked
            why = f"{why}; node=whole counts every card of its nodes: {usage['gpu'] // 100}"
        return ok, borrows, Reason(Wait.QUOTA, why)

    def bind(
        self,
        job: Job,
        placement: Placement,
        borrowed: bool,
        action: str,
        after: tuple[str, ...] = (),
        note: str = "",
    ) -> None:
        ahead = self.ahead_of(job, placement) if self.reservations else ()
        if ahead:
            starts = min(r.start for r in self.reservations if r.id in ahead)
            said = (
                f"ahead of reservation {', '.join(ahead)} of {self._owners(ahead)} (from "
                f"{iso(starts)}) on its nodes: no other node had room; when the window begins "
                "a copy starts elsewhere, then this one stops"
            )
            note = f"{note}; {said}" if note else said
        self.state.apply(placement)
        self.tree.charge(job.tenant, self.usage(placement))
        self.running[job.id] = RunningJob(job, placement, self.now, borrowed)
        self.result.bindings.append(
            Binding(job.id, placement, borrowed, action, after, note, ahead)
        )
        self.result.pending.pop(job.id, None)

    def _owners(self, ids: tuple[str, ...]) -> str:
        return ", ".join(dict.fromkeys(r.tenant for r in self.reservations if r.id in ids))

    def replace(
        self,
        victim: RunningJob,
        placement: Placement,
        by: str,
        reason: str,
        cause: Cause = Cause.DEFRAGMENT,
        reservation: str = "",
    ) -> None:
        """Start a copy of ``victim`` at ``placement`` (make-before-break); ``victim`` keeps
        its room until the copy runs, so ``by`` (a job's id, or a reservation) does not get
        it in this cycle."""
        self.state.apply(replace(placement, job_id=f"{victim.job.id}+"))
        self.tree.charge(victim.job.tenant, self.usage(placement))
        self.result.replacements.append(
            Replacement(victim.job.id, placement, by, reason, cause, reservation)
        )

    def evict(self, victim: RunningJob, by: Job, reason: str, cause: Cause) -> None:
        protection = Protection.NONE
        if self.protected(victim):
            protection = Protection.WAIVED
            reason += (
                f" (within its minimum run time of {minutes(self.min_runtime_of(victim))}, "
                f"until {iso(self.protected_until(victim))}: nothing else frees the cards "
                f"for job {by.id}, which waited past the "
                f"{minutes(self.min_runtime.bound_s)} bound for a guarantee)"
            )
        self.stop(victim, by.id, reason, cause, protection=protection)

    def min_runtime_of(self, r: RunningJob) -> float:
        return self.min_runtime.of(r.job, self.tree.chain.get(r.job.tenant, ()))

    def protected_until(self, r: RunningJob) -> float:
        return r.start_time + self.min_runtime_of(r)

    def protected(self, r: RunningJob) -> bool:
        """Whether ``r`` is within its minimum run time now (``scheduler/min_runtime.py``)."""
        return self.min_runtime.active and self.now < self.protected_until(r)

    def stop(
        self,
        victim: RunningJob,
        by: str,
        reason: str,
        cause: Cause,
        reservation: str = "",
        protection: Protection = Protection.NONE,
    ) -> None:
        """Stop ``victim`` for ``by`` (a job's id, or what else stops it: a reservation)."""
        self.state.release(victim.job.id)
        self.tree.charge(victim.job.tenant, self.usage(victim.placement), -1)
        del self.running[victim.job.id]
        grace, action = self.config.grace_s, victim.job.on_preempt
        self.result.preemptions.append(
            Preemption(victim.job.id, by, reason, grace, action, cause, reservation, protection)
        )

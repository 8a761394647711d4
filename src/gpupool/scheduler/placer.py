"""The placement pipeline: compile -> filter -> score -> pick devices -> grant.

``Placer.place`` decides for one job against a snapshot without changing it;
``Placer.place_and_apply`` also records the grant. Same snapshot + same jobs give the same
decisions: nothing here is random and ties go to the lowest node row and device index.
"""

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from gpupool.model import NETWORK_LEVELS, Job, ResourceRequest, SliceKind, Topology
from gpupool.scheduler import topology
from gpupool.scheduler.ask import Ask, compile_ask, device_request, with_host
from gpupool.scheduler.filters import Feasibility, explain, feasibility
from gpupool.scheduler.fragmentation import ShapeMix
from gpupool.scheduler.host_memory import mem_at, mem_need
from gpupool.scheduler.lookahead import LookAhead
from gpupool.scheduler.policies import AUTO_BY_KIND, POLICIES, FragmentationGradientDescent, Policy
from gpupool.scheduler.state import ClusterState, any_true
from gpupool.scheduler.types import DeviceGrant, NodeGrant, Placement, PlacementResult, Unplaceable
from gpupool.sharing import choose_start

LOOKAHEAD = "fgd-lookahead"  # FGD or best-fit, judged by the next jobs of the queue
POLICY_NAMES = (*POLICIES, LOOKAHEAD, "auto")
Mask = np.ndarray | None
SPANNING = (Topology.ANY, *NETWORK_LEVELS)  # a whole-card request may span nodes
NAMED = "not the nodes it names (-w/--nodelist)"


def make_policy(name: str, mix: ShapeMix | None = None) -> Policy:
    if name not in POLICIES:
        from gpupool.model import SpecError

        raise SpecError(
            f"policy: {name!r} is not one of {', '.join(POLICY_NAMES)}", token=name, field="policy"
        )
    if name in ("fgd", "fgd-exact"):
        return FragmentationGradientDescent(mix, quantize=name == "fgd")
    return POLICIES[name]()


@dataclass
class Placer:
    """Places jobs with a named policy (or ``auto``: one policy per job kind)."""

    policy: str = "first-fit"
    mix: ShapeMix | None = None
    custom: Mapping[str, Policy] | None = None  # extra named policies (e.g. a simulator's)

    def __post_init__(self) -> None:
        self.mix = self.mix or ShapeMix()
        custom = dict(self.custom or {})
        self._lookahead: LookAhead | None = None
        if self.policy in custom:
            self._policies = {self.policy: custom[self.policy]}
        elif self.policy == LOOKAHEAD:  # plain placements and the look-ahead share one FGD
            fgd = make_policy("fgd", self.mix)
            self._policies = {LOOKAHEAD: fgd}
            primary = Placer("fgd", self.mix, {"fgd": fgd})
            self._lookahead = LookAhead(primary, [Placer("best-fit", self.mix)])
        else:
            names = set(AUTO_BY_KIND.values()) if self.policy == "auto" else {self.policy}
            self._policies = {n: make_policy(n, self.mix) for n in sorted(names)}
        self._asks: dict[tuple[int, ResourceRequest], tuple[object, Ask]] = {}

    def observe(self, jobs: Iterable[Job], state: ClusterState) -> None:
        """Teach the fragmentation model the workload mix (e.g. the pending queue)."""
        counts: Counter[ResourceRequest] = Counter()
        for j in jobs:
            counts[j.request] += j.gang_size
        self.observe_requests(counts, state)

    def observe_requests(self, counts: Counter[ResourceRequest], state: ClusterState) -> None:
        """The same for requests with their number of workers (a trace's pods): each distinct
        request is compiled once."""
        assert self.mix is not None
        for request, n in counts.items():
            self.mix.observe(self.ask(state, request), weight=n)

    def ask(self, state: ClusterState, request: ResourceRequest) -> Ask:
        key = (id(state.layout), request)
        entry = self._asks.get(key)
        if entry is None or entry[0] is not state.layout:  # ids are reused once freed
            if len(self._asks) > 4096:
                self._asks.clear()
            device = device_request(request)
            if device == request:
                compiled = compile_ask(state, request)
            else:  # the device part is compiled once for every cpu/mem it comes with
                compiled = with_host(self.ask(state, device), request)
            entry = self._asks[key] = (state.layout, compiled)
        return entry[1]

    def policy_for(self, job: Job) -> Policy:
        if self.policy == "auto":
            name = AUTO_BY_KIND[job.kind]
            if job.priority_class == "online-inference":
                name = "spread"
            if job.policy in self._policies:
                name = job.policy
            return self._policies[name]
        return self._policies[self.policy]

    # -- one job ---------------------------------------------------------------------------
    def place(
        self,
        state: ClusterState,
        job: Job,
        allowed: Mask = None,
        masked_reason: str = "not available to this job",
        *,
        explain: bool = True,
        upcoming: Sequence[ResourceRequest] = (),
    ) -> PlacementResult:
        """Decide for ``job``; the snapshot is left as it was. ``allowed`` (a node mask) keeps
        the job off nodes it may not use, e.g. reserved ones; refusals charge those nodes to
        ``masked_reason``. ``explain=False`` skips building the reason of a refusal.
        ``upcoming``: the next jobs' requests, read by ``fgd-lookahead`` only."""
        if (
            self._lookahead is not None
            and upcoming
            and allowed is None
            and job.gang_size == 1
            and not job.required_nodes
            and job.request.topology not in NETWORK_LEVELS
        ):
            result = self._lookahead.place(state, job, upcoming)
            if isinstance(result, Placement) or not explain:
                return result
        return self._place_workers(state, job, allowed, masked_reason, False, explain)

    @property
    def looks_ahead(self) -> bool:
        return self._lookahead is not None

    def place_and_apply(
        self,
        state: ClusterState,
        job: Job,
        allowed: Mask = None,
        masked_reason: str = "not available to this job",
    ) -> PlacementResult:
        return self._place_workers(state, job, allowed, masked_reason, True, True)

    def _place_workers(
        self,
        state: ClusterState,
        job: Job,
        allowed: Mask,
        masked_reason: str,
        apply: bool,
        explain: bool,
    ) -> PlacementResult:
        if job.request.topology not in NETWORK_LEVELS:
            return self._place_gang(state, job, allowed, masked_reason, apply, explain)
        ask = self.ask(state, job.request)
        need = ask.count * job.gang_size
        for rows in topology.attempts(state, ask, job.request, need, allowed):
            placed = self._place_gang(state, job, rows, masked_reason, apply, False)
            if isinstance(placed, Placement):
                return placed
        if job.request.topology_preferred:  # no domain could: anywhere
            return self._place_gang(state, job, allowed, masked_reason, apply, explain)
        reason = topology.refusal(state, ask, job.request.topology, need, allowed)
        return Unplaceable(job.id, reason)

    def _place_gang(
        self,
        state: ClusterState,
        job: Job,
        allowed: Mask,
        masked_reason: str,
        apply: bool,
        explain: bool,
    ) -> PlacementResult:
        policy = self.policy_for(job)
        ask = self.ask(state, job.request)
        pieces: list[NodeGrant] = []
        temp_ids: list[str] = []
        free = None  # sbatch -N: nodes no worker of this gang holds yet
        if job.one_per_node and job.gang_size > 1:
            free = np.ones(state.size, dtype=bool) if allowed is None else allowed.copy()
        missing = [n for n in job.required_nodes if n not in state.index]
        if missing:
            return Unplaceable(job.id, f"node {missing[0]} (-w/--nodelist) is not in the pool")
        try:
            for worker in range(job.gang_size):
                mask = allowed if free is None else free
                why = masked_reason
                if worker < len(job.required_nodes):  # sbatch -w: this worker on that node
                    named = np.zeros(state.size, dtype=bool)
                    named[state.index[job.required_nodes[worker]]] = True
                    mask, why = named if mask is None else named & mask, NAMED
                result = self._place_one(state, ask, policy, mask, why, explain)
                if isinstance(result, str):
                    prefix = f"gang {worker}/{job.gang_size} placed; " if job.gang_size > 1 else ""
                    return Unplaceable(job.id, prefix + result)
                if free is not None:
                    free[[state.index[piece.node] for piece in result]] = False
                if job.gang_size > 1:  # hold the worker's share while placing the next one
                    temp = f"{job.id}#worker{worker}"
                    state.apply(Placement(temp, tuple(result), policy.name))
                    temp_ids.append(temp)
                pieces.extend(result)
        finally:
            for temp in temp_ids:
                state.release(temp)
        placement = Placement(job.id, tuple(pieces), policy.name)
        if apply:
            state.apply(placement)
        return placement

    def _place_one(
        self,
        state: ClusterState,
        ask: Ask,
        policy: Policy,
        allowed: Mask,
        masked_reason: str,
        explain_: bool,
    ) -> list[NodeGrant] | str:
        fe = feasibility(state, ask, allowed)
        if any_true(fe.node_ok) and ask.request.whole_node:
            return [_whole_grant(state, ask, fe)]
        if any_true(fe.node_ok):
            row, cols = policy.choose(state, ask, fe)
            return [_grant(state, ask, fe, row, cols, ask.cpu, mem_at(mem_need(state, ask), row))]
        if ask.kind is SliceKind.WHOLE and ask.topology in SPANNING and ask.count > 1:
            spanned = _span_nodes(state, ask, fe)
            if spanned is not None:
                return spanned
        if not explain_:
            return "does not fit"
        reason, _ = explain(state, ask, allowed, masked_reason)
        return reason


def _grant(
    state: ClusterState, ask: Ask, fe: Feasibility, row: int, cols: list[int], cpu: int, mem: int
) -> NodeGrant:
    node = state.nodes[row].name
    grants: list[DeviceGrant] = []
    masks: dict[int, int] = {}
    for col in cols:
        device = int(state.device_index[row, col])
        if ask.kind is SliceKind.WHOLE:
            grants.append(
                DeviceGrant(node, device, 100, int(state.grantable_mem[row, col]), exclusive=True)
            )
        elif ask.kind is SliceKind.SHARE:
            assert fe.need_mem is not None
            grants.append(DeviceGrant(node, device, ask.compute_pct, int(fe.need_mem[row, col])))
        else:
            code = int(state.model[row, col])
            profile, table = ask.mig[code], state.mig_tables[code]
            assert profile is not None and table is not None
            occupied = masks.get(col, int(state.mig_used[row, col]))
            start = choose_start(table, occupied, profile)
            assert start is not None, "MIG pick without a free start"
            masks[col] = profile.take(occupied, start)
            grants.append(
                DeviceGrant(
                    node, device, 0, profile.memory_mib, mig_profile=profile.name, mig_start=start
                )
            )
    return NodeGrant(node, cpu, mem, tuple(grants))


def _whole_grant(state: ClusterState, ask: Ask, fe: Feasibility) -> NodeGrant:
    """A whole node (``node=whole``): the smallest that fits — fewest cards, then CPUs, then
    memory, then the first — so big nodes stay whole for big asks; every card of it, every
    CPU, and the memory asked (all of it without a size)."""
    rows = np.flatnonzero(fe.node_ok)
    cards = state.exists[rows].sum(axis=1)
    order = np.lexsort((rows, state.mem_cap[rows], state.cpu_cap[rows], cards))
    row = int(rows[order[0]])
    node = state.nodes[row].name
    grants = tuple(
        DeviceGrant(
            node,
            int(state.device_index[row, col]),
            100,
            int(state.grantable_mem[row, col]),
            exclusive=True,
        )
        for col in np.flatnonzero(state.exists[row]).tolist()
    )
    mem = mem_at(mem_need(state, ask), row)
    return NodeGrant(node, int(state.cpu_cap[row]), mem, grants, whole=True)


def _span_nodes(state: ClusterState, ask: Ask, fe: Feasibility) -> list[NodeGrant] | None:
    """Whole cards over the fewest nodes: the largest nodes first, then the tightest node that
    holds the rest (so a whole node is not broken for a remainder).
    CPU and memory are split across nodes in proportion to the cards each one takes."""
    assert fe.dev_ok is not None and fe.units is not None
    need = mem_need(state, ask)
    units = np.where((state.cpu_free >= ask.cpu) & (state.mem_free >= need), fe.units, 0).astype(
        np.int64
    )
    if units.sum() < ask.count:
        return None
    pieces: list[NodeGrant] = []
    left = ask.count
    while left:
        # finish on the tightest node that holds the rest, else take the largest node
        holds = np.flatnonzero(units >= left)
        row = int(holds[np.argmin(units[holds])]) if holds.size else int(np.argmax(units))
        take = min(left, int(units[row]))
        cols = np.flatnonzero(fe.dev_ok[row])[:take].tolist()
        cpu = -(-ask.cpu * take // ask.count)
        mem = -(-mem_at(need, row) * take // ask.count)
        pieces.append(_grant(state, ask, fe, row, cols, cpu, mem))
        units[row] = 0
        left -= take
    return pieces


def schedule(state: ClusterState, jobs: Iterable[Job], placer: Placer) -> list[PlacementResult]:
    """Place jobs in order, applying each placement before the next decision."""
    return [placer.place_and_apply(state, j) for j in jobs]

"""Replay of the FGD paper's evaluation protocol (Weng et al., USENIX ATC 2023).

The pod list is a bag of specs, shuffled with a seed and tuned to ``tune`` x the cluster's
GPU capacity as the paper's simulator does (``TunePodsByNodeTotalResource``): a list that asks
more has random pods removed until it asks at most that; one that asks less has pods sampled
with replacement appended while the next one still fits under it. Each pod is
scheduled once, in order; a pod that fits nowhere fails and is not retried; pods never leave.
After every pod the curve records arrived workload (cumulative GPU request / capacity),
GPU allocation ratio and fragmentation amount (fragmented GPU / capacity), where the
fragmentation measure uses the trace's typical shapes (95% of its pods) by popularity.

Every policy here is online (``gpupool policies``): the protocol has no queue, so
``fgd-lookahead`` judges its candidates over ``FUTURES`` futures of ``DEPTH`` requests sampled
from the pods already arrived, never over the bag's next pods (both chosen on seeds 0–9,
outside the reported 42–51). ``fgd-lookahead-clairvoyant`` does read those (research only).
"""

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from gpupool.model import Job, Node
from gpupool.scheduler import ClusterState, Placement, Placer
from gpupool.scheduler.fragmentation import FragmentationModel, ShapeMix
from gpupool.scheduler.lookahead import DEPTH
from gpupool.scheduler.memo import RefusedAsks
from gpupool.scheduler.placer import LOOKAHEAD
from gpupool.sharing import SharePolicy
from gpupool.sim.paper_policies import PAPER_POLICIES, PaperGpuClustering, PaperRandom
from gpupool.sim.traces.openb import Pod

# the protocol has no per-card limits but compute: memory follows compute, any number share
PROTOCOL_SHARING = SharePolicy(headroom_pct=0, max_sharers=1000)
CLAIRVOYANT = "fgd-lookahead-clairvoyant"  # reads the bag's next pods: not online
FUTURES = 3  # sampled futures of DEPTH requests each that fgd-lookahead judges candidates by


@dataclass
class ReplayResult:
    policy: str
    seed: int
    pods: int
    failed: int
    unallocated_gpus_at_100: float
    unallocated_gpus_at_130: float  # at the end of the bag (tune x capacity arrived)
    arrived_at_end: float  # what the bag asked in all, in capacities (at most tune)
    alloc_ratio_at_100: float
    alloc_ratio_at_130: float
    frag_amount_at_100: float
    curve: list[tuple[float, float, float]] = field(default_factory=list)


def workload_bag(pods: Sequence[Pod], capacity_milli: int, seed: int, tune: float) -> list[Pod]:
    """Shuffle, then trim or top up the GPU request to at most ``tune`` x capacity."""
    rng = random.Random(seed)
    bag = list(pods)
    rng.shuffle(bag)
    target = tune * capacity_milli
    total = sum(p.gpu_milli_total for p in bag)
    while total > target and bag:  # tune down: random pods out
        total -= bag.pop(rng.randrange(len(bag))).gpu_milli_total
    while pods:  # tune up: random copies in, while the next one fits under the target
        extra = pods[rng.randrange(len(pods))]
        if total + extra.gpu_milli_total > target:
            break
        bag.append(extra)
        total += extra.gpu_milli_total
    return bag


def arrived_ratio(bag: Sequence[Pod], capacity_milli: int) -> float:
    """What the whole bag asks, in cluster GPU capacities (the protocol's x-axis end)."""
    return sum(p.gpu_milli_total for p in bag) / capacity_milli


def protocol_state(nodes: Sequence[Node], seed: int) -> ClusterState:
    """The empty pool as the protocol sees it. The paper's simulator renames nodes
    "<random index>-<name>" with a seeded permutation, so its "smallest name" tie-break is a
    random but fixed node order: do the same."""
    order = list(range(len(nodes)))
    random.Random(seed).shuffle(order)
    ranked = [nodes[i] for i in sorted(range(len(nodes)), key=lambda i: order[i])]
    return ClusterState(ranked, PROTOCOL_SHARING)


def replay(
    nodes: Sequence[Node],
    pods: Sequence[Pod],
    policy: str,
    seed: int,
    tune: float = 1.3,
    curve_every: int = 50,
    depth: int = DEPTH,
    futures: int = FUTURES,
    bag: Sequence[Pod] | None = None,
    decisions: list | None = None,
) -> ReplayResult:
    """Replay ``pods`` (or a ``bag`` made already) under ``policy``; each pod's decision —
    its placement's (node, devices) or None — is appended to ``decisions`` when given."""
    state = protocol_state(nodes, seed)
    capacity = state.gpu_count() * 1000
    typical = ShapeMix(coverage=0.95)
    custom = {name: cls() for name, cls in PAPER_POLICIES.items()}
    custom["paper-random"] = PaperRandom(seed)
    clairvoyant = policy == CLAIRVOYANT
    placer = Placer(LOOKAHEAD if clairvoyant else policy, typical, custom)
    sampler = random.Random(f"look-ahead {seed}")  # what may come next, from what came
    recorder = custom.get(policy)
    # the typical shapes come from the original trace, not the sampled bag
    placer.observe_requests(Counter(pod.request for pod in pods), state)
    shapes, weights = typical.typical()
    measure = FragmentationModel(state, shapes, weights)
    bag = list(bag) if bag is not None else workload_bag(pods, capacity, seed, tune)
    arrived = allocated = 0
    failed = 0
    at_100: tuple[float, float] | None = None
    curve: list[tuple[float, float, float]] = []
    # pods never leave, so free capacity only shrinks: a request that fitted nowhere once
    # fits nowhere later, and is refused without running the filters again
    refused = RefusedAsks(state)
    for i, pod in enumerate(bag):
        arrived += pod.gpu_milli_total
        if refused.refused(pod.request):
            result = None
        else:
            job = Job(id=f"{i}", request=pod.request)
            upcoming: list = []
            if placer.looks_ahead and clairvoyant:
                upcoming = [p.request for p in bag[i + 1 : i + 1 + depth]]
            elif placer.looks_ahead:
                draws = depth * futures
                upcoming = [bag[sampler.randrange(i + 1)].request for _ in range(draws)]
            # a refusal's reason is not used
            result = placer.place(state, job, explain=False, upcoming=upcoming)
        if decisions is not None:
            decisions.append(_decision(result))
        if isinstance(result, Placement):
            state.apply(result)
            allocated += pod.gpu_milli_total
            if isinstance(recorder, PaperGpuClustering):
                recorder.record(
                    state, state.index[result.nodes[0].node], placer.ask(state, pod.request)
                )
        else:
            failed += 1
            refused.add(pod.request)
        if at_100 is None and arrived >= capacity:
            frag = measure.cluster_fragmentation() * 10  # percent-of-a-GPU -> milli
            at_100 = (allocated, frag)
        if i % curve_every == 0 or i == len(bag) - 1:
            frag = measure.cluster_fragmentation() * 10
            curve.append((arrived / capacity, allocated / capacity, frag / capacity))
    if at_100 is None:
        at_100 = (allocated, measure.cluster_fragmentation() * 10)
    return ReplayResult(
        policy=policy,
        seed=seed,
        pods=len(bag),
        failed=failed,
        unallocated_gpus_at_100=(capacity - at_100[0]) / 1000,
        unallocated_gpus_at_130=(capacity - allocated) / 1000,
        arrived_at_end=arrived / capacity,
        alloc_ratio_at_100=at_100[0] / capacity,
        alloc_ratio_at_130=allocated / capacity,
        frag_amount_at_100=at_100[1] / capacity,
        curve=curve,
    )


def _decision(result: object) -> tuple | None:
    """Where a pod went, comparable across replays: (node, devices) per node, or None."""
    if not isinstance(result, Placement):
        return None
    return tuple((n.node, tuple(d.device for d in n.devices)) for n in result.nodes)

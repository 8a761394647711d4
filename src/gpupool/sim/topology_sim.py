"""Gangs on a two-level fat tree, placed topology-aware (``topology=prefer-leaf``) or blind (the
same gangs, no level): how long gangs wait to be placed and how much of their traffic crosses
a spine.

The cluster: ``leaves`` leaf switches of ``nodes_per_leaf`` servers with ``cards`` GPUs each,
all leaves under one spine layer. Jobs arrive in time (Poisson), each a gang of whole servers'
worth of cards (``size`` GPUs = size / cards workers of ``gpu=cards``), run for their duration
once placed and wait in arrival order meanwhile (a later job may start first when it fits:
backfill, the same for both modes). Optionally a background of single-node pods (an openb pod
list's GPU pods, at their own arrival times and durations) shares the cluster.

*Cross-spine share* of a gang: the share of its GPU pairs under different leaves — what an
all-to-all (or a tree all-reduce over all members) sends through the spine; summed over gangs
weighted by their pairs. Pure: the same ``Placer`` as the server, no clock, no I/O.
"""

import heapq
import itertools
import random
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from gpupool.model import Job, Node, ResourceRequest, SliceKind, SpecError, Topology, make_devices
from gpupool.scheduler import ClusterState, Placement, Placer
from gpupool.scheduler.topology import LABELS
from gpupool.sim.stats import percentile
from gpupool.sim.traces.openb import Pod

MODES = ("blind", "prefer-leaf", "leaf")  # leaf: required for gangs a leaf can hold
GANG_MIX = {8: 0.35, 16: 0.2, 32: 0.2, 64: 0.15, 128: 0.1}  # GPUs -> share of gangs


@dataclass(frozen=True)
class Arrival:
    id: str
    at: float
    duration: float
    gpus: int  # a gang of gpus // cards workers; below cards: one worker of that many
    gang: bool = True


@dataclass(frozen=True)
class Tree:
    leaves: int = 4
    nodes_per_leaf: int = 16
    cards: int = 8

    def nodes(self) -> list[Node]:
        out = []
        for leaf, n in itertools.product(range(self.leaves), range(self.nodes_per_leaf)):
            name = f"l{leaf:02d}-n{n:02d}"
            labels = {LABELS[Topology.LEAF]: f"l{leaf:02d}", LABELS[Topology.BLOCK]: "spine"}
            devices = make_devices("A100-80G", self.cards, node=name)
            out.append(Node(name, 256000, 2048 * 1024, devices, labels))
        return out

    @property
    def capacity(self) -> int:
        return self.leaves * self.nodes_per_leaf * self.cards


def gang_mix(
    tree: Tree, jobs: int, load: float, seed: int, mix: dict[int, float] = GANG_MIX
) -> list[Arrival]:
    """``jobs`` gangs whose offered load (GPU-hours asked / GPU-hours of the cluster over the
    arrival span) is about ``load``; sizes from ``mix`` (those the cluster can hold),
    durations log-normal (median 2 h)."""
    rng = random.Random(seed)
    fitting = {size: w for size, w in mix.items() if size <= tree.capacity}
    if not fitting:
        raise SpecError(f"gang mix: no gang size fits {tree.capacity} GPUs")
    sizes, weights = zip(*sorted(fitting.items()), strict=True)
    mean_size = sum(s * w for s, w in fitting.items()) / sum(weights)
    median_s, sigma = 7200.0, 0.8
    mean_duration = median_s * pow(2.718281828, sigma * sigma / 2)
    rate = load * tree.capacity / (mean_size * mean_duration)  # arrivals a second
    t, out = 0.0, []
    for i in range(jobs):
        t += rng.expovariate(rate)
        size = rng.choices(sizes, weights)[0]
        out.append(Arrival(f"g{i:04d}", t, rng.lognormvariate(0, sigma) * median_s, size))
    return out


def background_from_pods(
    pods: Sequence[Pod], tree: Tree, load: float, span_s: float
) -> list[Arrival]:
    """A trace's whole-card GPU pods of at most a server's cards, at their own arrival times
    compressed so that they offer about ``load`` of the cluster, and their own run times;
    those arriving within ``span_s``. Pods without times (the openb variant lists) give none."""
    timed = [
        p
        for p in pods
        if p.request.kind is SliceKind.WHOLE
        and 0 < p.request.gpu <= tree.cards
        and p.created_s is not None
        and p.run_s
    ]
    if not timed or load <= 0:
        return []
    # openb's first pods came months before the rest (long-lived services): the window
    # starts at the first percentile of arrivals
    starts = sorted(p.created_s or 0 for p in timed)
    first = starts[len(starts) // 100]
    timed = [p for p in timed if (p.created_s or 0) >= first]
    span = max(p.created_s or 0 for p in timed) - first or 1
    offered = sum(p.request.gpu * (p.run_s or 0) for p in timed) / span  # GPUs busy on average
    scale = load * tree.capacity / offered  # > 1: arrivals compressed
    out = []
    for p in timed:
        at = ((p.created_s or 0) - first) / scale
        if at <= span_s:
            out.append(Arrival(f"bg-{p.name}", at, float(p.run_s or 0), p.request.gpu, False))
    return out


def _job(a: Arrival, tree: Tree, mode: str) -> Job:
    workers, per = (a.gpus // tree.cards, tree.cards) if a.gpus >= tree.cards else (1, a.gpus)
    aware = mode != "blind" and a.gang
    fits_a_leaf = a.gpus <= tree.nodes_per_leaf * tree.cards
    request = ResourceRequest(
        gpu=per,
        topology=Topology.LEAF if aware else Topology.NODE,
        topology_preferred=aware and (mode == "prefer-leaf" or not fits_a_leaf),
    )
    return Job(a.id, request, gang_size=workers, submit_time=a.at)


def cross_spine_pairs(p: Placement) -> tuple[int, int]:
    """(GPU pairs under different leaves, all GPU pairs) of a placement."""
    per_leaf = Counter(g.node.split("-")[0] for ng in p.nodes for g in ng.devices)
    total = sum(per_leaf.values())
    pairs = total * (total - 1) // 2
    return pairs - sum(n * (n - 1) // 2 for n in per_leaf.values()), pairs


def replay(
    tree: Tree,
    arrivals: Sequence[Arrival],
    mode: str,
    policy: str = "best-fit",
    background: Sequence[Arrival] = (),
) -> dict:
    """Run ``arrivals`` (and ``background`` pods) through the placer in time."""
    state = ClusterState(tree.nodes())
    placer = Placer(policy)
    everything = sorted([*arrivals, *background], key=lambda a: a.at)
    events: list[tuple[float, int, str]] = []  # (time, order, job id ending)
    queue: list[Arrival] = []
    waits: dict[str, float] = {}
    cross = pairs = spanned = 0
    order = itertools.count()
    i = 0
    now = 0.0
    while i < len(everything) or events or queue:
        next_arrival = everything[i].at if i < len(everything) else float("inf")
        next_end = events[0][0] if events else float("inf")
        if next_arrival == next_end == float("inf"):
            break  # what waits can never be placed
        if next_end <= next_arrival:
            now, _, ended = heapq.heappop(events)
            state.release(ended)
        else:
            now = next_arrival
            queue.append(everything[i])
            i += 1
        waiting: list[Arrival] = []
        for a in queue:
            placed = placer.place_and_apply(state, _job(a, tree, mode))
            if not isinstance(placed, Placement):
                waiting.append(a)
                continue
            heapq.heappush(events, (now + a.duration, next(order), a.id))
            if a.gang:
                waits[a.id] = now - a.at
                c, p = cross_spine_pairs(placed)
                cross, pairs = cross + c, pairs + p
                spanned += len({n.split("-")[0] for n in placed.node_names}) > 1
        queue = waiting
    by_size = {a.id: a.gpus for a in arrivals}
    big = [w for k, w in waits.items() if by_size[k] >= 64]
    return {
        "mode": mode,
        "gangs": len(arrivals),
        "placed": len(waits),
        "wait_p50_min": _minutes(percentile(list(waits.values()), 50)),
        "wait_p95_min": _minutes(percentile(list(waits.values()), 95)),
        "big_wait_p50_min": _minutes(percentile(big, 50)),
        "big_wait_p95_min": _minutes(percentile(big, 95)),
        "cross_spine_share": round(cross / pairs, 4) if pairs else 0.0,
        "gangs_over_leaves": spanned,
    }


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 4) if values else None


def _minutes(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds / 60, 1)


def compare(
    tree: Tree,
    seeds: Sequence[int],
    jobs: int,
    load: float,
    pods: Sequence[Pod] = (),
    background_load: float = 0.0,
) -> dict:
    """Every mode on the same arrivals per seed (gangs, and the background pods of ``pods``
    when given); medians over seeds."""
    runs: dict[str, list[dict]] = {m: [] for m in MODES}
    for seed in seeds:
        arrivals = gang_mix(tree, jobs, load, seed)
        span = arrivals[-1].at if arrivals else 0.0
        background = background_from_pods(pods, tree, background_load, span)
        for mode in MODES:
            runs[mode].append(replay(tree, arrivals, mode, background=background))
    keys = [k for k in runs[MODES[0]][0] if k != "mode"]
    return {
        "tree": {
            "leaves": tree.leaves,
            "nodes_per_leaf": tree.nodes_per_leaf,
            "cards": tree.cards,
            "gpus": tree.capacity,
        },
        "seeds": list(seeds),
        "jobs": jobs,
        "load": load,
        "background_load": background_load if pods else 0.0,
        "median": {
            m: {k: _median([r[k] for r in rs if r[k] is not None]) for k in keys}
            for m, rs in runs.items()
        },
        "runs": runs,
    }

"""The openb trace replayed in time: pods arrive at their ``creation_time``, run as long as
they ran in production (``deletion_time - scheduled_time``) once placed, and wait in a FIFO
queue (with backfill) while nothing fits.

Two ways to give a GPU-sharing pod its GPU are compared on the same pods: ``fractional`` (it
gets its share of one card, as gpupool does) and ``whole-cards`` (it holds a whole card, as
passthrough without virtualisation does). Two figures follow the cluster over time:

- *allocation ratio*: GPU compute held by running pods / capacity (a whole card counts 1);
- *useful utilisation*: GPU compute the running pods asked for / capacity — a sharing pod asking
  0.3 GPU that holds a whole card adds 1 to the first and 0.3 to the second.

Pure: the same ``Placer`` as the server, no clock, no I/O.
"""

import heapq
import random
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gpupool.model import Job, Node, ResourceRequest, SliceKind, SpecError
from gpupool.scheduler import ClusterState, Placement, Placer
from gpupool.scheduler.fragmentation import ShapeMix
from gpupool.scheduler.memo import RefusedAsks
from gpupool.sim.fgd_protocol import PROTOCOL_SHARING
from gpupool.sim.stats import percentile
from gpupool.sim.traces.openb import Pod

MODES = ("fractional", "whole-cards")
HOUR = 3600.0
SAMPLES = 200  # points of a series by default


@dataclass
class TimeReplayResult:
    policy: str
    mode: str
    pods: int
    started: int
    never_started: int
    horizon_s: float
    alloc_ratio_mean: float
    useful_util_mean: float
    cpu_alloc_ratio_mean: float
    queued_s: float  # time during which at least one pod waited
    alloc_ratio_while_queued: float | None
    useful_util_while_queued: float | None
    queue_delay_p50_s: float | None
    queue_delay_p95_s: float | None
    # (hour, allocation ratio, useful utilisation, pods waiting), sampled
    series: list[tuple[float, float, float, int]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {
            "pods": self.pods,
            "started": self.started,
            "never_started": self.never_started,
            "alloc_ratio_mean": round(self.alloc_ratio_mean, 4),
            "useful_util_mean": round(self.useful_util_mean, 4),
            "cpu_alloc_ratio_mean": round(self.cpu_alloc_ratio_mean, 4),
            "queued_s": round(self.queued_s, 1),
            "alloc_ratio_while_queued": _round(self.alloc_ratio_while_queued),
            "useful_util_while_queued": _round(self.useful_util_while_queued),
            "queue_delay_p50_s": self.queue_delay_p50_s,
            "queue_delay_p95_s": self.queue_delay_p95_s,
            "series": [[h, round(a, 4), round(u, 4), w] for h, a, u, w in self.series],
        }


def whole_card(request: ResourceRequest) -> ResourceRequest:
    """A GPU-sharing request as passthrough serves it: one whole card of the same model."""
    if request.kind is not SliceKind.SHARE:
        return request
    return ResourceRequest(
        gpu=1,
        gpu_model=request.gpu_model,
        cpu_millis=request.cpu_millis,
        mem_mib=request.mem_mib,
    )


def timed_pods(pods: Sequence[Pod], time_scale: float = 1.0) -> list[Pod]:
    """Pods with both times, in arrival order (stable for equal times). ``time_scale`` > 1
    compresses the arrivals (not the run times): the same mix, a busier cluster."""
    with_times = [p for p in pods if p.created_s is not None and p.run_s is not None]
    if time_scale != 1.0:
        with_times = [
            replace(p, created_s=int((p.created_s or 0) / time_scale)) for p in with_times
        ]
    return sorted(with_times, key=lambda p: p.created_s or 0)


def sample_nodes(nodes: Sequence[Node], fraction: float, seed: int = 0) -> list[Node]:
    """About ``fraction`` of the nodes, the same share of every (GPU model, cards per node)
    group (at least one per group), seeded: a smaller cluster with the same mix."""
    if not 0 < fraction <= 1:
        raise SpecError("node fraction must be in (0, 1]", field="node_fraction")
    if fraction == 1:
        return list(nodes)
    groups: dict[tuple[str, int], list[Node]] = {}
    for n in nodes:
        model = n.devices[0].model if n.devices else ""
        groups.setdefault((model, len(n.devices)), []).append(n)
    rng = random.Random(seed)
    out: list[Node] = []
    for key in sorted(groups):
        members = groups[key]
        out += rng.sample(members, max(1, round(len(members) * fraction)))
    return out


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def replay_in_time(
    nodes: Sequence[Node],
    pods: Sequence[Pod],
    policy: str = "fgd",
    mode: str = "fractional",
    horizon_s: float | None = None,
    sample_s: float | None = None,
) -> TimeReplayResult:
    """Replay ``pods`` (those with times) on ``nodes`` until ``horizon_s`` (default: the last
    arrival), sampling the series every ``sample_s`` (default: 200 points)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}")
    arrivals = timed_pods(pods)
    state = ClusterState(nodes, PROTOCOL_SHARING)
    capacity = state.gpu_count() * 100  # percent of a card
    horizon = horizon_s if horizon_s is not None else float(arrivals[-1].created_s or 0)
    step = sample_s if sample_s is not None else max(horizon / SAMPLES, 1e-3)
    requests = [whole_card(p.request) if mode == "whole-cards" else p.request for p in arrivals]
    keys = [r.to_spec() for r in requests]
    typical = ShapeMix(coverage=0.95)
    placer = Placer(policy, typical)
    placer.observe_requests(Counter(requests), state)
    useful_of = [p.gpu_milli_total // 10 for p in arrivals]
    held_of: dict[int, int] = {}
    departures: list[tuple[float, int]] = []
    queue: dict[str, deque[int]] = {}  # shape -> waiting pods in arrival order
    waiting = 0
    blocked = RefusedAsks(state)  # shapes that did not fit since the last departure
    delays: list[float] = []
    allocated = useful = cpu = 0
    alloc_area = useful_area = cpu_area = 0.0
    queued = [0.0, 0.0, 0.0]  # seconds with a queue, allocation and useful area meanwhile
    cpu_capacity = sum(n.cpu_millis for n in nodes) or 1
    series: list[tuple[float, float, float, int]] = []
    next_sample = 0.0
    now = 0.0
    i = 0

    def sample() -> None:
        nonlocal next_sample
        point = (round(next_sample / HOUR, 4), allocated / capacity, useful / capacity, waiting)
        series.append(point)
        next_sample += step

    def advance(to: float) -> None:
        """Integrate the figures over [now, to); they hold there, so the samples too."""
        nonlocal alloc_area, useful_area, cpu_area, now, next_sample
        while next_sample < to:
            sample()
        alloc_area += allocated * (to - now)
        useful_area += useful * (to - now)
        cpu_area += cpu * (to - now)
        if waiting:
            queued[0] += to - now
            queued[1] += allocated * (to - now)
            queued[2] += useful * (to - now)
        now = to

    while True:
        t_arrive = float(arrivals[i].created_s or 0) if i < len(arrivals) else float("inf")
        t_depart = departures[0][0] if departures else float("inf")
        t = min(t_arrive, t_depart)
        if t > horizon:
            break
        advance(t)
        while departures and departures[0][0] <= t:
            _, k = heapq.heappop(departures)
            state.release(str(k))
            allocated -= held_of.pop(k)
            useful -= useful_of[k]
            cpu -= requests[k].cpu_millis
        while i < len(arrivals) and (arrivals[i].created_s or 0) <= t:
            queue.setdefault(keys[i], deque()).append(i)
            waiting += 1
            i += 1
        # FIFO with backfill: pods in arrival order, skipping a shape once one of it did not
        # fit in this pass; kept per shape so a pass costs O(placements + shapes)
        heads = [(dq[0], key) for key, dq in queue.items() if not blocked.refused(key)]
        heapq.heapify(heads)
        while heads:
            k, key = heapq.heappop(heads)
            placed = placer.place(state, Job(id=str(k), request=requests[k]), explain=False)
            if not isinstance(placed, Placement):
                blocked.add(key)  # and stays refused until something departs
                continue
            state.apply(placed)
            held = placed.card_percent
            held_of[k] = held
            allocated += held
            useful += useful_of[k]
            cpu += requests[k].cpu_millis
            delays.append(t - float(arrivals[k].created_s or 0))
            heapq.heappush(departures, (t + float(arrivals[k].run_s or 0), k))
            dq = queue[key]
            dq.popleft()
            waiting -= 1
            if dq:
                heapq.heappush(heads, (dq[0], key))
            else:
                del queue[key]
    advance(horizon)
    while next_sample <= horizon:
        sample()
    unstarted = [horizon - float(arrivals[k].created_s or 0) for dq in queue.values() for k in dq]
    span = horizon if horizon > 0 else 1.0
    return TimeReplayResult(
        policy=policy,
        mode=mode,
        pods=i,
        started=len(delays),
        never_started=waiting,
        horizon_s=horizon,
        alloc_ratio_mean=alloc_area / (capacity * span),
        useful_util_mean=useful_area / (capacity * span),
        cpu_alloc_ratio_mean=cpu_area / (cpu_capacity * span),
        queued_s=queued[0],
        alloc_ratio_while_queued=queued[1] / (capacity * queued[0]) if queued[0] else None,
        useful_util_while_queued=queued[2] / (capacity * queued[0]) if queued[0] else None,
        queue_delay_p50_s=percentile(delays + unstarted, 50),
        queue_delay_p95_s=percentile(delays + unstarted, 95),
        series=series,
    )


def compare_in_time(
    nodes: Sequence[Node],
    pods: Sequence[Pod],
    policies: Sequence[str],
    horizon_s: float | None = None,
    time_scale: float = 1.0,
) -> dict[str, Any]:
    """Every policy in both modes, on the same pods."""
    timed = timed_pods(pods, time_scale)
    if not timed:
        raise SpecError("openb time replay: no pod has creation and deletion times")
    out: dict[str, dict[str, Any]] = {}
    for policy in policies:
        out[policy] = {
            mode: replay_in_time(nodes, timed, policy, mode, horizon_s).summary() for mode in MODES
        }
    gpus = sum(len(n.devices) for n in nodes)
    return {
        "nodes": len(nodes),
        "gpus": gpus,
        "pods": len(timed),
        "pods_without_times": len(pods) - len(timed),
        "time_scale": time_scale,
        "horizon_s": horizon_s if horizon_s is not None else float(timed[-1].created_s or 0),
        "policies": out,
    }

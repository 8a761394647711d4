"""How much defragmentation helps on the openb trace: the FGD protocol's shuffled bag of pods
is placed online (each pod once, in order) until ``arrived`` x the cluster's GPU capacity has
arrived; then, from that state, k-GPU probe jobs (whole cards, nothing else) are placed one by
one until one no longer fits — first as the pool is, then letting the scheduler's own planner
(``gpupool.scheduler.defrag``, the server's limits) move pods to make room for each probe.

Every pod counts as movable (the trace does not say which could be suspended; a real pool
moves only jobs with ``on_preempt: suspend`` and no inference replica), so the "after" figures
are an upper bound of what the server would do with the same limits; ``moves`` and
``jobs_interrupted`` say what they cost.
"""

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from gpupool.model import Job, Node, parse_request
from gpupool.scheduler import ClusterState, Placement, Placer
from gpupool.scheduler.defrag import Movable, plan_defrag
from gpupool.scheduler.fragmentation import ShapeMix
from gpupool.scheduler.memo import RefusedAsks
from gpupool.sim.fgd_protocol import protocol_state, workload_bag
from gpupool.sim.traces.openb import Pod

PROBES = (8, 4)


def fill(
    nodes: Sequence[Node], pods: Sequence[Pod], seed: int, arrived: float, policy: str
) -> tuple[ClusterState, Placer, dict[str, Movable]]:
    """The pool once ``arrived`` x capacity has arrived (as ``fgd_protocol.replay`` orders
    nodes and pods), with the placed pods."""
    state = protocol_state(nodes, seed)
    capacity = state.gpu_count() * 1000
    placer = Placer(policy, ShapeMix(coverage=0.95))
    placer.observe_requests(Counter(p.request for p in pods), state)
    placed: dict[str, Movable] = {}
    total = 0
    refused = RefusedAsks(state)
    for i, pod in enumerate(workload_bag(pods, capacity, seed, max(arrived, 0.01))):
        if total >= arrived * capacity:
            break
        total += pod.gpu_milli_total
        if refused.refused(pod.request):
            continue
        job = Job(id=f"p{i}", request=pod.request)
        result = placer.place(state, job, explain=False)
        if isinstance(result, Placement):
            state.apply(result)
            placed[job.id] = Movable(job, result, float(i))
        else:
            refused.add(pod.request)
    return state, placer, placed


def probe_count(
    state: ClusterState,
    placer: Placer,
    placed: dict[str, Movable],
    cards: int,
    *,
    defrag: bool,
    max_moves: int,
    max_nodes: int,
    limit: int = 10_000,
) -> dict[str, int]:
    """k-GPU probes placed one after another on a copy of ``state`` (with moves if
    ``defrag``): how many fit, the moves made and the distinct pods they interrupted."""
    trial = state.clone()
    live = dict(placed)
    request = parse_request(f"gpu={cards}")
    now = float(len(placed) + 1)

    def place(s: ClusterState, job: Job, allowed: np.ndarray) -> Placement | None:
        result = placer.place(s, job, allowed, explain=False)
        return result if isinstance(result, Placement) else None

    fitted = moves = 0
    interrupted: set[str] = set()
    for n in range(limit):
        job = Job(id=f"probe{cards}-{n}", request=request)
        result = placer.place(trial, job, explain=False)
        if isinstance(result, Placement):
            trial.apply(result)
            fitted += 1
            continue
        if not defrag:
            break
        plan = plan_defrag(
            trial, job, list(live.values()), place, now, max_moves=max_moves, max_nodes=max_nodes
        )
        if plan is None:
            break
        for m in plan.moves:
            trial.release(m.job_id)
        for m in plan.moves:
            trial.apply(m.target)
            live[m.job_id] = Movable(live[m.job_id].job, m.target, now)
            interrupted.add(m.job_id)
        trial.apply(plan.placement)
        fitted += 1
        moves += len(plan.moves)
    return {"placeable": fitted, "moves": moves, "jobs_interrupted": len(interrupted)}


def defrag_report(
    nodes: Sequence[Node],
    pods: Sequence[Pod],
    *,
    seed: int = 42,
    arrived: float = 0.9,
    policy: str = "fgd",
    max_moves: int = 4,
    max_nodes: int = 8,
) -> dict[str, Any]:
    """``{"before": {"placeable_8gpu", "placeable_4gpu"}, "after": {...}, "moves",
    "jobs_interrupted", ...}`` for one seed (each probe size from the same filled pool)."""
    state, placer, placed = fill(nodes, pods, seed, arrived, policy)
    before: dict[str, int] = {}
    after: dict[str, int] = {}
    cost: dict[str, dict[str, int]] = {}
    for k in PROBES:
        plain = probe_count(state, placer, placed, k, defrag=False, max_moves=0, max_nodes=0)
        moved = probe_count(
            state, placer, placed, k, defrag=True, max_moves=max_moves, max_nodes=max_nodes
        )
        before[f"placeable_{k}gpu"] = plain["placeable"]
        after[f"placeable_{k}gpu"] = moved["placeable"]
        cost[f"{k}gpu"] = {"moves": moved["moves"], "jobs_interrupted": moved["jobs_interrupted"]}
    gpus = state.gpu_count()
    held = sum(len(m.placement.devices) > 0 for m in placed.values())
    return {
        "seed": seed,
        "arrived": arrived,
        "policy": policy,
        "max_moves_per_job": max_moves,
        "gpus": gpus,
        "pods_placed": len(placed),
        "pods_on_gpus": held,
        "before": before,
        "after": after,
        "moves": sum(c["moves"] for c in cost.values()),
        "jobs_interrupted": sum(c["jobs_interrupted"] for c in cost.values()),
        "by_probe": cost,
    }

"""``gpupool bench placement``: placement throughput and latency on a synthetic cluster."""

import resource
import time
from typing import Any

import numpy as np

from gpupool.bench.synthetic import job_mix, synthetic_cluster
from gpupool.scheduler import ClusterState, Placement, Placer


def peak_rss_mb(children: bool = False) -> float:
    """Peak resident set of this process, or (``children``) of the largest child process
    that has ended and been waited for (Linux reports KiB)."""
    who = resource.RUSAGE_CHILDREN if children else resource.RUSAGE_SELF
    return round(resource.getrusage(who).ru_maxrss / 1024, 1)


def run_placement_bench(
    nodes: int,
    gpus_per_node: int,
    jobs: int,
    policy: str,
    seed: int = 0,
    requests: str = "synthetic",
) -> dict[str, Any]:
    """Place ``jobs`` one by one into a filling cluster, timing each decision + commit."""
    cluster = synthetic_cluster(nodes, gpus_per_node, seed)
    queue = job_mix(requests, jobs, seed)
    state = ClusterState(cluster)
    placer = Placer(policy)
    placer.observe(queue, state)
    latencies = np.zeros(len(queue), dtype=np.float64)
    placed = 0
    start = time.perf_counter()
    for i, job in enumerate(queue):
        t0 = time.perf_counter_ns()
        result = placer.place_and_apply(state, job)
        latencies[i] = (time.perf_counter_ns() - t0) / 1e6
        placed += isinstance(result, Placement)
    elapsed = time.perf_counter() - start
    state.check_invariants()
    return {
        "policy": policy,
        "requests": requests,
        "distinct_requests": len({j.request for j in queue}),
        "nodes": nodes,
        "gpus": state.gpu_count(),
        "jobs": len(queue),
        "placed": placed,
        "placements_per_s": round(len(queue) / elapsed, 1) if elapsed else None,
        "p50_ms": round(float(np.percentile(latencies, 50)), 3) if len(queue) else None,
        "p99_ms": round(float(np.percentile(latencies, 99)), 3) if len(queue) else None,
        "peak_rss_mb": peak_rss_mb(),
    }

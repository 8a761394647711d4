"""``gpupool bench simulate``: the FGD protocol's six policies x seeds, on both cores."""

import os
import resource
import time
from pathlib import Path
from typing import Any

from gpupool.bench.placement import peak_rss_mb


def run_simulate_bench(
    nodes: Path, pods: Path, policies: list[str], seeds: list[int], tune: float, workers: int
) -> dict[str, Any]:
    from gpupool.sim.replays import replay_files

    tasks = [(str(pods), p, s) for p in policies for s in seeds]
    start = time.perf_counter()
    results = list(replay_files(nodes, tasks, tune, workers).values())
    seconds = time.perf_counter() - start
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    decisions = sum(r.pods for r in results)  # every pod of every bag is decided once
    refusals = sum(r.failed for r in results)
    return {
        "seconds": round(seconds, 1),
        "runs": len(results),
        "decisions": decisions,
        "placements": decisions - refusals,
        "refusals": refusals,
        "decisions_per_s": round(decisions / seconds, 1) if seconds else None,
        "workers": workers,
        # CPU time of the replay processes: seconds x workers when both cores stay busy
        "cpu_seconds_workers": round(used.ru_utime + used.ru_stime, 2),
        "peak_rss_mb_main": peak_rss_mb(),
        "peak_rss_mb_worker": peak_rss_mb(children=True),  # the largest replay process
    }


def default_workers() -> int:
    return max(1, min(2, os.cpu_count() or 1))

"""``gpupool bench simulate``: the FGD protocol's six policies x seeds, on both cores."""

import os
import resource
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from gpupool.bench.placement import peak_rss_mb

_TRACE: dict[str, object] = {}


def _load(nodes: str, pods: str) -> None:
    from gpupool.sim.traces.openb import load_nodes, load_pods

    _TRACE["nodes"] = load_nodes(nodes)[0]
    _TRACE["pods"] = load_pods(pods)[0]


def _one(task: tuple[str, int, float]) -> tuple[str, int, float, int, int]:
    from gpupool.sim.fgd_protocol import replay
    from gpupool.sim.fgd_report import PROTOCOL_POLICIES

    name, seed, tune = task
    result = replay(_TRACE["nodes"], _TRACE["pods"], PROTOCOL_POLICIES[name], seed, tune)  # type: ignore[arg-type]
    return name, seed, result.unallocated_gpus_at_100, result.pods, result.failed


def run_simulate_bench(
    nodes: Path, pods: Path, policies: list[str], seeds: list[int], tune: float, workers: int
) -> dict[str, object]:
    # FGD replays take ~3x a baseline's: start them first, so that the last task a process
    # runs (while the other may already be idle) is a short one
    tasks = sorted(
        ((p, s, tune) for p in policies for s in seeds), key=lambda t: not t[0].startswith("fgd")
    )
    start = time.perf_counter()
    with ProcessPoolExecutor(
        max_workers=workers, initializer=_load, initargs=(str(nodes), str(pods))
    ) as pool:
        results = list(pool.map(_one, tasks))
    seconds = time.perf_counter() - start
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    decisions = sum(r[3] for r in results)  # every pod of every bag is decided once
    refusals = sum(r[4] for r in results)
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

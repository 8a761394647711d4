"""FGD-protocol replays of trace files in worker processes (both cores), each worker loading
a file once; ``gpupool bench simulate`` and ``gpupool simulate family`` both run on it. Bad
rows are skipped here: the caller has already reported or refused them."""

from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from functools import cache
from pathlib import Path

from gpupool.scheduler.lookahead import DEPTH
from gpupool.sim.fgd_protocol import FUTURES, ReplayResult, replay
from gpupool.sim.fgd_report import PROTOCOL_POLICIES

Task = tuple[str, str, int]  # pod list path, policy, seed


@cache
def _nodes(path: str) -> list:
    from gpupool.sim.traces.openb import load_nodes

    return load_nodes(path)[0]


@cache
def _pods(path: str) -> list:
    from gpupool.sim.traces.openb import load_pods

    return load_pods(path)[0]


def _one(args: tuple[str, Task, float, int, int]) -> tuple[Task, ReplayResult]:
    nodes, task, tune, depth, futures = args
    pods, policy, seed = task
    name = PROTOCOL_POLICIES[policy]
    result = replay(_nodes(nodes), _pods(pods), name, seed, tune, depth=depth, futures=futures)
    return task, result


def replay_files(
    nodes: Path,
    tasks: Sequence[Task],
    tune: float,
    workers: int = 1,
    progress: Callable[[], None] | None = None,
    depth: int = DEPTH,
    futures: int = FUTURES,
) -> dict[Task, ReplayResult]:
    # FGD replays take ~3x a baseline's: start them first, so that the last task a process
    # runs (while the other may already be idle) is a short one
    ordered = sorted(tasks, key=lambda t: not t[1].startswith("fgd"))
    jobs = [(str(nodes), t, tune, depth, futures) for t in ordered]
    out: dict[Task, ReplayResult] = {}
    # always in worker processes (even one): the caller can read their CPU time and memory
    with ProcessPoolExecutor(max_workers=max(1, workers)) as pool:
        for task, result in pool.map(_one, jobs):
            out[task] = result
            if progress:
                progress()
    return out

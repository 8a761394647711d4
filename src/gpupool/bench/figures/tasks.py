"""The computations behind the figures, one call each, run in worker processes: every one
calls the code its ``gpupool simulate`` command calls (the FGD protocol's ``replay``, the
team replay's ``compare``, the defragmentation probe, the autoscale comparison's
Harvest@99), so a figure here is the figure the docs quote."""

import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

SCENARIO = Path(__file__).resolve().parents[4] / "examples" / "seed-scenario.yaml"
NODE_FILE = "openb_node_list_gpu_node.csv"


@dataclass(frozen=True)
class Task:
    key: str  # unique: tasks of several groups with one key run once
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    cost_s: float  # rough seconds on one core: the longest start first


def timed(task: Task) -> tuple[str, Any, float]:
    """(key, result, seconds) of one task; the top-level function a worker runs."""
    start = time.perf_counter()
    result = task.fn(*task.args)
    return task.key, result, round(time.perf_counter() - start, 2)


@cache
def _nodes(folder: str) -> list[Any]:
    from gpupool.sim.traces.openb import load_nodes

    return load_nodes(Path(folder) / NODE_FILE)[0]


@cache
def _pods(folder: str, mix: str) -> list[Any]:
    from gpupool.sim.traces.openb import load_pods

    return load_pods(Path(folder) / f"openb_pod_list_{mix}.csv")[0]


def protocol(folder: str, mix: str, policy: str, seed: int) -> Any:
    """One FGD-protocol replay (tune 1.3, the default look-ahead), as ``simulate fgd`` and
    ``simulate family`` run it."""
    from gpupool.sim.fgd_protocol import replay
    from gpupool.sim.fgd_report import PROTOCOL_POLICIES

    return replay(_nodes(folder), _pods(folder, mix), PROTOCOL_POLICIES[policy], seed, 1.3)


def defrag(folder: str, seed: int) -> dict[str, Any]:
    """``gpupool simulate defrag --seed SEED --json`` (90% arrived, fgd, 4 moves a job)."""
    from gpupool.sim.defrag_sim import defrag_report

    return defrag_report(_nodes(folder), _pods(folder, "default"), seed=seed)


def scenario(path: str) -> dict[str, Any]:
    """``gpupool simulate scenario PATH --json``."""
    from gpupool.sim.scenario import load_scenario
    from gpupool.sim.team_replay import compare

    return compare(load_scenario(path))


def harvest(folder: str) -> dict[str, Any]:
    """``.harvest`` of ``gpupool simulate autoscale --trace FOLDER --json`` (smooth arrivals,
    the default scenario): the comparison's own Harvest@99, without its other sweeps."""
    from gpupool.autoscale.compare import Comparison
    from gpupool.autoscale.scenario import AutoscaleScenario
    from gpupool.sim.traces.servegen import load_rates

    rates, _ = load_rates(Path(folder))
    return Comparison(rates.total, rates.window_s, AutoscaleScenario(), rates.burst_cv2).harvest()


# docs/simulation.md's ROI example: 50 A100-80G at 30% -> 70%, a ¥150k platform (and the
# seed's advised 15% headroom)
ROI_CASES = {"q3": 0.0, "q3-headroom15": 0.15}


def roi() -> dict[str, dict[str, Any]]:
    """``gpupool simulate roi --cards 50 --model A100-80G --util-before 0.30 --util-after
    0.70 --platform-cost 150000 [--headroom 0.15] --json``."""
    from gpupool.billing.catalog import FEN_PER_CNY, monthly_price_fen
    from gpupool.sim.roi import roi as compute

    price = monthly_price_fen("A100-80G")
    return {
        name: compute(50, 0.30, 0.70, price, 150_000 * FEN_PER_CNY, headroom).as_dict()
        for name, headroom in ROI_CASES.items()
    }

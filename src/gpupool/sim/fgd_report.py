"""Medians over seeds of FGD-protocol replays, in the JSON other tools read."""

import statistics
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from gpupool.model import Node, SpecError
from gpupool.scheduler.lookahead import DEPTH
from gpupool.sim.fgd_protocol import FUTURES, ReplayResult, replay
from gpupool.sim.traces.openb import Pod

# Names as the paper's figures use them -> the policy that replays it. The paper's baselines
# are the simulator's own scorers (gpupool.sim.paper_policies); the paper's BestFit is
# "paper-best-fit", and "best-fit" is gpupool's own (node fractions), as everywhere else.
PROTOCOL_POLICIES = {
    "random": "paper-random",
    "dot-product": "paper-dot-product",
    "gpu-clustering": "paper-gpu-clustering",
    "gpu-packing": "paper-gpu-packing",
    "paper-best-fit": "paper-best-fit",
    "fgd": "fgd",
    "fgd-exact": "fgd-exact",
    "fgd-lookahead": "fgd-lookahead",
    "fgd-lookahead-clairvoyant": "fgd-lookahead-clairvoyant",
    "best-fit": "best-fit",
    "first-fit": "first-fit",
    "spread": "spread",
    "topology": "topology",
}
GRID = np.round(np.arange(0.0, 1.3001, 0.05), 2)


def parse_seeds(text: str) -> list[int]:
    """``42-51`` or ``42,43,50``."""
    try:
        if "-" in text:
            low, high = (int(x) for x in text.split("-", 1))
            if high < low:
                raise ValueError
            return list(range(low, high + 1))
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise SpecError(f"seeds: {text!r} is not N-M or a comma list of integers") from None


def check_policies(names: Sequence[str]) -> None:
    for name in names:
        if name not in PROTOCOL_POLICIES:
            known = ", ".join(PROTOCOL_POLICIES)
            raise SpecError(f"policy: {name!r} is not one of {known}")


def run_fgd_protocol(
    nodes: Sequence[Node],
    pods: Sequence[Pod],
    policies: Sequence[str],
    seeds: Sequence[int],
    tune: float,
    progress: Callable[[], None] | None = None,
    depth: int = DEPTH,
    futures: int = FUTURES,
) -> dict[str, Any]:
    check_policies(policies)
    out: dict[str, Any] = {
        "nodes": len(nodes),
        "gpus": sum(len(n.devices) for n in nodes),
        "pods": len(pods),
        "seeds": list(seeds),
        "tune": tune,
        "lookahead": {"depth": depth, "futures": futures},
        "policies": {},
    }
    for name in policies:
        runs = []
        for seed in seeds:
            name_ = PROTOCOL_POLICIES[name]
            runs.append(replay(nodes, pods, name_, seed, tune, depth=depth, futures=futures))
            if progress:
                progress()
        out["policies"][name] = medians(runs)
    return out


def medians(runs: list[ReplayResult]) -> dict[str, Any]:
    def med(values: list[float]) -> float:
        return round(float(statistics.median(values)), 4)

    curves = []
    for r in runs:
        arrived = np.array([c[0] for c in r.curve])
        alloc = np.interp(GRID, arrived, [c[1] for c in r.curve])
        frag = np.interp(GRID, arrived, [c[2] for c in r.curve])
        curves.append((alloc, frag))
    alloc_med = np.median([c[0] for c in curves], axis=0)
    frag_med = np.median([c[1] for c in curves], axis=0)
    return {
        "unallocated_gpus_at_100": med([r.unallocated_gpus_at_100 for r in runs]),
        "unallocated_gpus_at_130": med([r.unallocated_gpus_at_130 for r in runs]),
        "alloc_ratio_at_100": med([r.alloc_ratio_at_100 for r in runs]),
        "alloc_ratio_at_130": med([r.alloc_ratio_at_130 for r in runs]),
        "arrived_at_end": med([r.arrived_at_end for r in runs]),
        "frag_amount_at_100": med([r.frag_amount_at_100 for r in runs]),
        "failed_pods": int(statistics.median([r.failed for r in runs])),
        "per_seed_unallocated": [round(r.unallocated_gpus_at_100, 1) for r in runs],
        "curve": [
            [float(g), round(float(a), 4), round(float(f), 4)]
            for g, a, f in zip(GRID, alloc_med, frag_med, strict=True)
        ],
    }

"""Baselines as the FGD paper's simulator (hkust-adsl/kubernetes-scheduler-simulator) scores
them, so protocol replays compare with its published figures. They plug into the engine's
``Placer`` as custom policies; the engine's own policies stay as they are.
"""

import numpy as np

from gpupool.model import SliceKind
from gpupool.scheduler.policies import BestFit, Policy, masked
from gpupool.scheduler.state import row_count

MAX_SPEC_CPU = 128_000  # millicores: the simulator's normalisation constants
MAX_SPEC_GPU = 800  # percent of a GPU: the simulator's 8,000 milli-GPU (8 GPUs)


class PaperBestFit(BestFit):
    """``int((1 - 0.5 (cpu_free - cpu) / 128 cores - 0.5 (gpu_free - gpu) / 8 GPUs) * 100)``,
    higher wins, first node on ties (the simulator's min-max normalisation keeps the order).
    Absolute amounts, not fractions of the node, are what it compares."""

    name = "paper-best-fit"

    def score(self, state, ask, fe) -> np.ndarray:
        used = ask.pooled_pct
        cpu_left = (state.cpu_free - ask.cpu) / MAX_SPEC_CPU
        gpu_left = (state.node_compute_free - used) / MAX_SPEC_GPU
        raw = np.floor((1.0 - 0.5 * cpu_left - 0.5 * gpu_left) * 100.0)
        return masked(-raw, fe.node_ok)  # the engine takes the lowest score


def _fit_left(state, ask, fe) -> np.ndarray:
    """Per node, the free compute of the tightest device that can take one unit (inf: none)."""
    assert fe.dev_ok is not None
    free = np.where(fe.dev_ok, state.compute_free, 10_000).astype(np.int64)
    return free.min(axis=1)


class PaperRandom(BestFit):
    """A uniformly random feasible node; for shares a random fitting card (seeded)."""

    name = "paper-random"

    def __init__(self, seed: int = 0):
        import random

        self.rng = random.Random(seed)

    def choose(self, state, ask, fe):
        rows = np.flatnonzero(fe.node_ok)
        row = int(rows[self.rng.randrange(rows.size)])
        if ask.kind is SliceKind.SHARE and ask.count == 1:
            assert fe.dev_ok is not None
            cols = np.flatnonzero(fe.dev_ok[row]).tolist()
            return row, [cols[self.rng.randrange(len(cols))]]
        return row, self.devices(state, ask, fe, row)


class PaperGpuPacking(BestFit):
    """Shared cards first (fuller is better), then free cards of used nodes, then free nodes:
    the simulator's GpuPacking score, first node on ties; tightest card for shares."""

    name = "paper-gpu-packing"

    def score(self, state, ask, fe) -> np.ndarray:
        if ask.kind not in (SliceKind.WHOLE, SliceKind.SHARE):
            return Policy.score(self, state, ask, fe)  # no GPU asked: every node scores 0
        pooled = state.pooled
        fully_free = row_count((state.compute_free == 100) & pooled)
        cards = row_count(pooled)
        if ask.kind is SliceKind.WHOLE:
            score = np.full(state.size, float(max(50 - ask.count, 33)))  # free cards of a used node
        else:
            left = _fit_left(state, ask, fe)
            score = np.where(left >= 100, 49.0, np.maximum(100 - left // 10, 50))
        idle = fully_free == cards
        score = np.where(idle, np.maximum(33 - fully_free, fully_free), score)
        return masked(-score, fe.node_ok)


def affinity_tag(ask) -> str | None:
    """The GPU affinity the simulator's GpuClustering groups pods by."""
    if ask.kind is SliceKind.SHARE:
        return "share-gpu"
    if ask.kind is SliceKind.WHOLE:
        return f"{ask.count}-gpu"
    return None


class PaperGpuClustering(BestFit):
    """Nodes already holding pods of the same GPU affinity first (only that affinity best),
    then idle nodes, then others; within a band fuller nodes win. Needs ``record`` after
    every placement (the replay calls it)."""

    name = "paper-gpu-clustering"

    def __init__(self) -> None:
        self.tags: dict[str, np.ndarray] = {}
        self.distinct: np.ndarray | None = None

    def record(self, state, row: int, ask) -> None:
        tag = affinity_tag(ask)
        if tag is None:
            return
        if self.distinct is None:
            self.distinct = np.zeros(state.size, dtype=np.int64)
        counts = self.tags.setdefault(tag, np.zeros(state.size, dtype=np.int64))
        if counts[row] == 0:
            self.distinct[row] += 1
        counts[row] += 1

    def score(self, state, ask, fe) -> np.ndarray:
        tag = affinity_tag(ask)
        if tag is None:
            return Policy.score(self, state, ask, fe)
        distinct = self.distinct if self.distinct is not None else np.zeros(state.size, np.int64)
        same = self.tags.get(tag, np.zeros(state.size, dtype=np.int64)) > 0
        left_milli = state.node_compute_free * 10
        base = 25 * (8000 - left_milli) // 8000
        band = np.where(same, np.where(distinct == 1, 75, 50), np.where(distinct == 0, 25, 0))
        return masked(-(base + band).astype(np.float64), fe.node_ok)


class PaperDotProduct(BestFit):
    """Tetris' dot product as the simulator configures it for the paper (``merge`` GPU
    dimension, ``max`` normalisation): node free [CPU, GPU total] . pod request, each over
    [128 cores, 8 GPUs], halved; score ``int(100 (1 - dot))``, higher wins (so the smaller
    product wins), first node on ties; tightest card for shares."""

    name = "paper-dot-product"

    def score(self, state, ask, fe) -> np.ndarray:
        gpu = ask.pooled_pct
        dot = (state.cpu_free / MAX_SPEC_CPU) * (ask.cpu / MAX_SPEC_CPU) + (
            state.node_compute_free / MAX_SPEC_GPU
        ) * (gpu / MAX_SPEC_GPU)
        raw = np.floor(100.0 * (1.0 - dot / 2.0))
        return masked(-raw, fe.node_ok)


PAPER_POLICIES = {
    "paper-dot-product": PaperDotProduct,
    "paper-best-fit": PaperBestFit,
    "paper-gpu-packing": PaperGpuPacking,
    "paper-gpu-clustering": PaperGpuClustering,
}

"""Baselines as the FGD paper's simulator (hkust-adsl/kubernetes-scheduler-simulator) scores
them, so protocol replays compare with its published figures. They plug into the engine's
``Placer`` as custom policies; the engine's own policies stay as they are.
"""

import numpy as np

from gpupool.model import SliceKind
from gpupool.scheduler.policies import BestFit, Policy, masked

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
    return np.where(fe.dev_ok, state.compute_free, 10_000).min(axis=1)


class PaperRandom(BestFit):
    """A uniformly random feasible node; for shares a random fitting card (seeded)."""

    name = "paper-random"

    def __init__(self, seed: int = 0):
        import random

        self.rng = random.Random(seed)

    def choose(self, state, ask, fe):
        rows = fe.node_ok.nonzero()[0]
        row = int(rows[self.rng.randrange(rows.size)])
        if ask.kind is SliceKind.SHARE and ask.count == 1:
            assert fe.dev_ok is not None
            cols = fe.dev_ok[row].nonzero()[0].tolist()
            return row, [cols[self.rng.randrange(len(cols))]]
        return row, self.devices(state, ask, fe, row)


class PaperGpuPacking(BestFit):
    """Shared cards first (fuller is better), then free cards of used nodes, then free nodes:
    the simulator's GpuPacking score, first node on ties; tightest card for shares."""

    name = "paper-gpu-packing"

    def score(self, state, ask, fe) -> np.ndarray:
        if ask.kind not in (SliceKind.WHOLE, SliceKind.SHARE):
            return Policy.score(self, state, ask, fe)  # no GPU asked: every node scores 0
        # a node is idle when all its pooled cards are fully free, i.e. when its free compute
        # is all of its compute; then the number of fully free cards is its number of cards
        cards = state.node_compute_cap // 100
        if ask.kind is SliceKind.WHOLE:
            score = np.full(state.size, float(max(50 - ask.count, 33)))  # free cards of a used node
        else:
            left = _fit_left(state, ask, fe)
            score = np.where(left >= 100, 49.0, np.maximum(100 - left // 10, 50))
        idle = state.node_compute_free == state.node_compute_cap
        score = np.where(idle, np.maximum(33 - cards, cards), score)
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
        self.tags: dict[str, np.ndarray] = {}  # per affinity: its pods on each node
        self.distinct: np.ndarray | None = None  # affinities present on each node
        # each affinity's band per node, kept by ``record`` (only the placed node changes);
        # under None the band of an affinity no node holds yet
        self.bands: dict[str | None, np.ndarray] = {}

    def record(self, state, row: int, ask) -> None:
        tag = affinity_tag(ask)
        if tag is None:
            return
        if self.distinct is None:
            self.distinct = np.zeros(state.size, dtype=np.int64)
            self.bands[None] = np.full(state.size, _band(False, 0), dtype=np.int64)
        counts = self.tags.get(tag)
        if counts is None:
            counts = self.tags[tag] = np.zeros(state.size, dtype=np.int64)
            self.bands[tag] = self.bands[None].copy()
        if counts[row] == 0:
            self.distinct[row] += 1
        counts[row] += 1
        distinct = int(self.distinct[row])
        for other, band in self.bands.items():
            band[row] = _band(other is not None and self.tags[other][row] > 0, distinct)

    def score(self, state, ask, fe) -> np.ndarray:
        tag = affinity_tag(ask)
        if tag is None:
            return Policy.score(self, state, ask, fe)
        band = self.bands.get(tag, self.bands.get(None))
        if band is None:  # nothing recorded yet
            band = np.full(state.size, _band(False, 0), dtype=np.int64)
        left_milli = state.node_compute_free * 10
        base = 25 * (8000 - left_milli) // 8000
        return masked(-(base + band).astype(np.float64), fe.node_ok)


def _band(same: bool, distinct: int) -> int:
    """75: only pods of the same affinity on the node; 50: that affinity among others;
    25: an idle node (no GPU affinity yet); 0: other affinities only."""
    if same:
        return 75 if distinct == 1 else 50
    return 25 if distinct == 0 else 0


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

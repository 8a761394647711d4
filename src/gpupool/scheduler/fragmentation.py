"""Fragmentation of GPU capacity against a workload (Weng et al., "Beware of Fragmentation",
USENIX ATC 2023), kept per node and refreshed only for the nodes that changed.

For a task shape m (cpu, device count k, per-device compute r, allowed GPU types), the idle GPU
of a node that m cannot use is *fragmented*:
- m cannot run on the node at all (too little CPU, wrong GPU type, fewer than k devices with
  r free): all the node's idle GPU is fragmented for m;
- otherwise the free compute of the devices that cannot hold r is fragmented;
- for a CPU-only shape (k = 0) all idle GPU is fragmented.
A node's fragmentation F_n is the popularity-weighted sum over the workload's typical shapes.
Units are percent of a device (the paper uses milli-GPU: divide by 100 for GPUs).
MIG-mode and unhealthy devices are outside this measure; GPU type is the node's first device's.
"""

from collections import Counter
from dataclasses import dataclass

import numpy as np

from gpupool.scheduler.ask import Ask
from gpupool.scheduler.state import NO_DEVICE, ClusterState


@dataclass(frozen=True, slots=True)
class Shape:
    cpu: int
    count: int
    compute_pct: int
    models: tuple[bool, ...]  # allowed per model code of the snapshot (+ padding False)


class ShapeMix:
    """Task shapes with popularity; ``typical()`` keeps the most popular covering ``coverage``."""

    def __init__(self, coverage: float = 0.95):
        self.coverage = coverage
        self.counts: Counter[Shape] = Counter()
        self.version = 0

    @staticmethod
    def shape_of(ask: Ask) -> Shape:
        pct = ask.compute_pct if ask.count else 0
        if ask.count and pct == 0:
            pct = 1  # memory-only shares: the smallest compute unit
        return Shape(ask.cpu, ask.count, pct, tuple(bool(x) for x in ask.model_ok))

    def observe(self, ask: Ask, weight: int = 1) -> None:
        self.counts[self.shape_of(ask)] += weight
        self.version += 1  # FGD rebuilds its fragmentation terms for the new mix

    def typical(self) -> tuple[list[Shape], np.ndarray]:
        total = sum(self.counts.values())
        if not total:
            return [], np.zeros(0)
        ranked = sorted(self.counts.items(), key=lambda kv: (-kv[1], repr(kv[0])))
        chosen: list[tuple[Shape, int]] = []
        covered = 0
        for shape, n in ranked:
            chosen.append((shape, n))
            covered += n
            if covered >= self.coverage * total:
                break
        weights = np.array([n for _, n in chosen], dtype=np.float64)
        return [s for s, _ in chosen], weights / weights.sum()


class FragmentationModel:
    """Per-node fragmentation terms for a fixed set of shapes, refreshed for changed nodes."""

    def __init__(
        self,
        state: ClusterState,
        shapes: list[Shape],
        weights: np.ndarray,
        foreign_types: bool = True,
    ):
        """``foreign_types=False`` leaves out, per node, the shapes that may not use its GPU
        type (the paper counts all of the node's idle GPU as fragmented for them)."""
        self.state = state
        self.m = len(shapes)
        self.r = np.array([s.compute_pct for s in shapes], dtype=np.int64)
        self.k = np.array([s.count for s in shapes], dtype=np.int64)
        self.c = np.array([s.cpu for s in shapes], dtype=np.int64)
        self.cpu_only = self.k == 0
        self.p = weights.astype(np.float64)
        type_ok = np.array([s.models for s in shapes], dtype=bool).reshape(self.m, -1)
        # One lookup table per node GPU type (code, +1 for padding) and device free compute
        # v = 0..100: for each shape, the free compute the device leaves fragmented (all of it
        # when the shape may not use this GPU type) in the first M columns, and whether the
        # device holds the shape in the last M. Per node the same columns summed over its
        # devices are its terms: sum_unfit | fit_count.
        codes = len(state.models) + 1
        code_ok = type_ok.T.reshape(codes, 1, self.m) if self.m else np.zeros((codes, 1, 0), bool)
        v = np.arange(101)[None, :, None]
        fit = ((v >= self.r) & code_ok).astype(np.float64)  # (codes, 101, M)
        self.tab = np.concatenate([v * (1.0 - fit), fit], axis=2)  # (codes, 101, 2M)
        # a shape is satisfied with >= k fitting devices; never for CPU-only or wrong-type
        never = np.float64(1 << 30)
        self.k_eff = np.where(code_ok[:, 0, :] & ~self.cpu_only, self.k, never)  # (codes, M)
        # shape weights per node GPU type (codes, M)
        usable = code_ok[:, 0, :] | self.cpu_only
        self.p_of = self.p * (np.ones_like(usable) if foreign_types else usable)
        n = state.size
        self.total = np.zeros(n, dtype=np.int64)
        self.terms = np.zeros((n, 2 * self.m), dtype=np.float64)
        self.frag = np.zeros(n, dtype=np.float64)
        self.seen = np.full(n, -1, dtype=np.int64)
        self.refresh()

    def device_free(self, rows: np.ndarray | slice) -> np.ndarray:
        s = self.state
        return np.where(s.pooled[rows], s.compute_free[rows], 0)

    def refresh(self) -> None:
        """Recompute the terms of every node whose snapshot version moved."""
        s = self.state
        rows = (self.seen != s.version).nonzero()[0]
        if rows.size == 0:
            return
        free = self.device_free(rows)  # (R, G)
        codes = s.primary_model[rows]
        total = free.sum(axis=1)
        terms = self.tab[codes[:, None], free].sum(axis=1)
        self.total[rows] = total
        self.terms[rows] = terms
        self.frag[rows] = self._frag(s.cpu_free[rows], total, terms, codes)
        self.seen[rows] = s.version[rows]

    def _frag(
        self, cpu: np.ndarray, total: np.ndarray, terms: np.ndarray, codes: np.ndarray
    ) -> np.ndarray:
        m = self.m
        sat = (cpu[:, None] >= self.c) & (terms[:, m:] >= self.k_eff[codes])
        # a row-wise sum, not a matrix product: BLAS rounds a row differently depending on how
        # many rows come with it, and FGD compares nodes scored at different times
        out: np.ndarray = (np.where(sat, terms[:, :m], total[:, None]) * self.p_of[codes]).sum(
            axis=1
        )
        return out

    def cluster_fragmentation(self) -> float:
        """Sum of F_n over the cluster, in percent-of-a-device units."""
        self.refresh()
        return float(self.frag.sum())

    def delta(
        self, rows: np.ndarray, old: int | np.ndarray, take: int, cpu: int, taken: int
    ) -> np.ndarray:
        """ΔF for candidates: on node ``rows[i]``, ``taken`` devices with ``old`` free compute
        (one value, or one per candidate) each give ``take`` of it, and ``cpu`` millicores go.
        A share: one device, old = its free compute, take = the share; whole cards: ``count``
        idle devices, 100 each; a CPU-only ask: no device."""
        codes = self.state.primary_model[rows]
        terms = self.terms[rows]
        if take and taken:
            d = self.tab[codes, old - take] - self.tab[codes, old]
            if taken != 1:
                d *= taken
            terms += d
        after = self._frag(
            self.state.cpu_free[rows] - cpu,
            self.total[rows] - taken * take,
            terms,
            codes,
        )
        out: np.ndarray = after - self.frag[rows]
        return out


__all__ = ["NO_DEVICE", "FragmentationModel", "Shape", "ShapeMix"]

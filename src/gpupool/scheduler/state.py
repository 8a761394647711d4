"""The scheduler's cluster snapshot as NumPy arrays, and how grants change it.

Nodes are rows, devices are columns padded to the widest node, so every filter and scorer is a
vector operation over all devices at once. The snapshot is rebuilt from the state of record
(nodes + live allocations) and updated in place as a cycle places jobs.
"""

import copy
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from gpupool.model import Node, SharingMode, SpecError
from gpupool.model.devices import AGENT_BEHIND
from gpupool.scheduler.types import DeviceGrant, Placement
from gpupool.sharing import SharePolicy, table_for

MODE_CODES = {SharingMode.WHOLE: 0, SharingMode.MIG: 1, SharingMode.SHARE: 2}
NO_DEVICE = -1
_MIG = MODE_CODES[SharingMode.MIG]
_SHARE = MODE_CODES[SharingMode.SHARE]


def row_count(mask: np.ndarray) -> np.ndarray:
    """True entries per row of a C-contiguous (N, 8k) bool array, via byte popcount."""
    words = (mask if mask.flags.c_contiguous else np.ascontiguousarray(mask)).view(np.uint64)
    counts = np.bitwise_count(words)
    return counts.sum(axis=1) if counts.shape[1] > 1 else counts[:, 0]


def row_any(mask: np.ndarray) -> np.ndarray:
    """Whether each row of a C-contiguous (N, 8k) bool array has a True entry."""
    words = (mask if mask.flags.c_contiguous else np.ascontiguousarray(mask)).view(np.uint64)
    out: np.ndarray = (words != 0).any(axis=1) if words.shape[1] > 1 else words[:, 0] != 0
    return out


def any_true(mask: np.ndarray) -> bool:
    """``mask.any()`` for a 1-D bool array, ~4x faster at a few thousand entries: argmax stops
    at the first True, while ``ndarray.any`` goes through a Python-level wrapper."""
    return bool(mask.size) and bool(mask[mask.argmax()])


class ClusterState:
    """Free and used capacity of every node and device; mutable, owned by one cycle."""

    def __init__(self, nodes: Sequence[Node], share: SharePolicy | None = None):
        self.share = share or SharePolicy()
        self.nodes: list[Node] = list(nodes)
        names = [n.name for n in self.nodes]
        if len(set(names)) != len(names):
            raise SpecError("cluster: duplicate node names", field="nodes")
        self.index: dict[str, int] = {name: i for i, name in enumerate(names)}
        n = len(self.nodes)
        widest = max((len(node.devices) for node in self.nodes), default=0) or 1
        g = -(-widest // 8) * 8  # a multiple of 8, so row_any/row_count can use uint64 views
        self.width = g
        self.models: list[str] = sorted({d.model for node in nodes for d in node.devices})
        model_code = {m: i for i, m in enumerate(self.models)}
        self.vendors: list[str] = sorted({str(d.vendor) for node in nodes for d in node.devices})
        vendor_code = {v: i for i, v in enumerate(self.vendors)}

        vendor_of = {d.model: vendor_code[str(d.vendor)] for node in nodes for d in node.devices}
        self.model_vendor = np.array([vendor_of[m] for m in self.models] + [NO_DEVICE])

        self.cpu_cap = np.array([x.cpu_millis for x in self.nodes], dtype=np.int64)
        self.mem_cap = np.array([x.memory_mib for x in self.nodes], dtype=np.int64)
        self.cpu_free = self.cpu_cap.copy()
        self.mem_free = self.mem_cap.copy()
        # closed nodes hold their live work and take none (the snapshot also sizes them to
        # what they hold); kept apart so reasons can say "drained" rather than "unhealthy"
        self.closed = np.array([bool(x.closed) for x in self.nodes], dtype=bool)
        self.behind = np.array([x.closed == AGENT_BEHIND for x in self.nodes], dtype=bool)
        # nodes a whole-node job holds (node=whole): nothing else is placed there meanwhile
        self.whole_held = np.zeros(n, dtype=bool)
        self.whole_count = 0

        self.exists = np.zeros((n, g), dtype=bool)
        self.model = np.full((n, g), NO_DEVICE, dtype=np.int16)
        self.vendor = np.full((n, g), NO_DEVICE, dtype=np.int16)
        self.mode = np.full((n, g), NO_DEVICE, dtype=np.int8)
        self.healthy = np.zeros((n, g), dtype=bool)
        self.island = np.full((n, g), NO_DEVICE, dtype=np.int16)
        self.dev_mem = np.zeros((n, g), dtype=np.int64)
        self.grantable_mem = np.zeros((n, g), dtype=np.int64)  # share mode: minus headroom
        self.mem_used = np.zeros((n, g), dtype=np.int64)
        self.compute_free = np.zeros((n, g), dtype=np.int16)
        self.sharers = np.zeros((n, g), dtype=np.int16)
        self.exclusive = np.zeros((n, g), dtype=bool)
        self.mig_used = np.zeros((n, g), dtype=np.int16)
        self.column: dict[tuple[int, int], int] = {}  # (node row, device index) -> column
        # (node name, device index) -> model, and quota usage per placement: both depend only
        # on the nodes, so clones share them and a cycle does not recompute them
        self.device_model: dict[tuple[str, int], str] = {
            (node.name, d.index): d.model for node in self.nodes for d in node.devices
        }
        self.usage_cache: dict[str, tuple[object, dict[str, int]]] = {}
        self.device_index = np.full((n, g), NO_DEVICE, dtype=np.int32)

        # one pass over the devices into flat lists, then one scatter per array
        rows: list[int] = []
        cols: list[int] = []
        fields: list[tuple[int, int, int, int, bool, int, int]] = []
        for row, node in enumerate(self.nodes):
            for col, dev in enumerate(node.devices):
                self.column[(row, dev.index)] = col
                rows.append(row)
                cols.append(col)
                fields.append(
                    (
                        dev.index,
                        model_code[dev.model],
                        vendor_code[str(dev.vendor)],
                        MODE_CODES[dev.mode],
                        dev.healthy,
                        NO_DEVICE if dev.island is None else dev.island,
                        dev.memory_mib,
                    )
                )
        if fields:
            at = (np.array(rows), np.array(cols))
            index, model, vendor, mode, healthy, island, memory = (
                np.array(column) for column in zip(*fields, strict=True)
            )
            self.device_index[at] = index
            self.exists[at] = True
            self.model[at] = model
            self.vendor[at] = vendor
            self.mode[at] = mode
            self.healthy[at] = healthy
            self.island[at] = island
            self.dev_mem[at] = memory
            shared = mode == MODE_CODES[SharingMode.SHARE]
            self.grantable_mem[at] = np.where(
                shared, [self.share.usable_mib(m) for m in memory.tolist()], memory
            )
            self.compute_free[at] = 100
        self.usable = self.exists & self.healthy
        self.usable_node = np.ones(n, dtype=bool)  # read-only "all nodes" mask
        self.usable_node.flags.writeable = False
        self.idle = self.usable & (self.mode != MODE_CODES[SharingMode.MIG])
        self.pooled = self.usable & (self.mode != MODE_CODES[SharingMode.MIG])  # FGD/bin-pack
        self.node_compute_cap = (self.pooled * 100).sum(axis=1).astype(np.int64)
        self.node_compute_free = self.node_compute_cap.copy()
        self.primary_model = np.where(self.exists[:, 0], self.model[:, 0], NO_DEVICE)
        self.free_mem = self.grantable_mem.astype(np.int32)  # grantable memory not yet granted
        self.open_share = self.usable & (self.mode == MODE_CODES[SharingMode.SHARE])
        self.inv_compute_cap = 1.0 / np.maximum(self.node_compute_cap, 1)
        self.inv_cpu_cap = 1.0 / np.maximum(self.cpu_cap, 1)
        self.room = np.zeros(n, dtype=np.float64)  # free GPU fraction + free CPU fraction
        self._update_room(slice(None))
        self.max_islands = int(self.island.max(initial=-1)) + 1
        self.version = np.zeros(n, dtype=np.int64)
        self.mig_tables = [table_for(m) for m in self.models]
        self.placements: dict[str, Placement] = {}
        self.releases = 0  # bumps on every release: capacity may have grown
        # identifies the static layout (models, modes, health); clones share it, so asks
        # compiled for a snapshot serve its trial copies too
        self.layout = object()
        # per ask, see filters.feasibility: (the ask, its feasibility, the versions it saw)
        self.feasibility_cache: dict[int, tuple[Any, Any, np.ndarray]] = {}
        # jobs without mem= reserve a default (scheduler.host_memory); None: they reserve none
        self.default_mem_per_card: np.ndarray | None = None
        self.default_mem_per_cpu: np.ndarray | None = None  # MiB per millicore

    def use_default_memory(self) -> "ClusterState":
        """Jobs without ``mem=`` reserve their share of a node's memory where they land (the
        server's rule: their workload gets that limit); returns the state itself."""
        cards = self.exists.sum(axis=1)
        self.default_mem_per_card = self.mem_cap / np.maximum(cards, 1)
        self.default_mem_per_cpu = self.mem_cap / np.maximum(self.cpu_cap, 1)
        return self

    # -- queries -------------------------------------------------------------------------
    @property
    def size(self) -> int:
        return len(self.nodes)

    def gpu_count(self) -> int:
        return int(self.exists.sum())

    # -- mutation ------------------------------------------------------------------------
    def _grant_device(self, row: int, grant: DeviceGrant, sign: int) -> None:
        col = self.column[(row, grant.device)]
        self.mem_used[row, col] += sign * grant.mem_mib
        self.free_mem[row, col] -= sign * grant.mem_mib
        if grant.mig_profile is not None:
            table = self.mig_tables[self.model[row, col]]
            if table is None or grant.mig_start is None:
                raise SpecError(f"grant: device {grant.device} of {grant.node} has no MIG")
            profile = table.profile(grant.mig_profile)
            used = int(self.mig_used[row, col])
            if sign > 0 and not profile.fits(used, grant.mig_start):
                raise SpecError(f"grant: MIG position overlap on {grant.node}/{grant.device}")
            self.mig_used[row, col] = (
                profile.take(used, grant.mig_start)
                if sign > 0
                else profile.release(used, grant.mig_start)
            )
        else:
            self.compute_free[row, col] -= sign * grant.compute_pct
            if self.pooled[row, col]:
                self.node_compute_free[row] -= sign * grant.compute_pct
            self.sharers[row, col] += sign * (0 if grant.exclusive else 1)
            if grant.exclusive:
                self.exclusive[row, col] = sign > 0
        usable = bool(self.usable[row, col])
        mode = int(self.mode[row, col])
        exclusive = bool(self.exclusive[row, col])
        sharers = int(self.sharers[row, col])
        self.open_share[row, col] = (
            usable and mode == _SHARE and not exclusive and sharers < self.share.max_sharers
        )
        self.idle[row, col] = (
            usable
            and mode != _MIG
            and not exclusive
            and sharers == 0
            and self.mem_used[row, col] == 0
        )

    def apply(self, placement: Placement) -> None:
        """Record a placement; the caller has checked that it fits."""
        if placement.job_id in self.placements:
            raise SpecError(f"job {placement.job_id}: already placed")
        self._change(placement, +1)
        self.placements[placement.job_id] = placement

    def release(self, job_id: str) -> Placement:
        """Give back everything a placed job holds (it finished, or was preempted)."""
        placement = self.placements.pop(job_id, None)
        if placement is None:
            raise SpecError(f"job {job_id}: not placed")
        self._change(placement, -1)
        self.releases += 1
        self.usage_cache.pop(job_id, None)
        return placement

    def _change(self, placement: Placement, sign: int) -> None:
        for ng in placement.nodes:
            row = self.index[ng.node]
            if ng.whole:
                self.whole_held[row] = sign > 0
                self.whole_count += sign
            self.cpu_free[row] -= sign * ng.cpu_millis
            self.mem_free[row] -= sign * ng.mem_mib
            for grant in ng.devices:
                self._grant_device(row, grant, sign)
            self._update_room(row)
            self.version[row] += 1

    def _update_room(self, rows: slice | int) -> None:
        self.room[rows] = (
            self.node_compute_free[rows] * self.inv_compute_cap[rows]
            + self.cpu_free[rows] * self.inv_cpu_cap[rows]
        )

    def clone(self) -> "ClusterState":
        """An independent copy for trial decisions (preemption, backfill look-ahead)."""
        other = copy.copy(self)
        for name, value in vars(self).items():
            if isinstance(value, np.ndarray):
                setattr(other, name, value.copy())
        other.placements = dict(self.placements)
        other.feasibility_cache = {}
        return other

    def load(self, placements: Iterable[Placement]) -> None:
        """Rebuild from live allocations (server start, simulator checkpoint)."""
        for p in placements:
            self.apply(p)

    def check_invariants(self) -> None:
        """Raise AssertionError if anything is over-committed (used by tests)."""
        assert (self.cpu_free >= 0).all(), "cpu over-committed"
        assert (self.mem_free >= 0).all(), "memory over-committed"
        assert (self.compute_free >= 0).all(), "compute over-committed"
        assert (self.mem_used <= self.grantable_mem).all(), "device memory over-committed"
        assert (self.sharers <= self.share.max_sharers).all(), "too many sharers"
        assert not (self.exclusive & (self.sharers > 0)).any(), "exclusive card also shared"

"""A request compiled against one snapshot: lookups turned into arrays over model codes."""

from dataclasses import dataclass, replace

import numpy as np

from gpupool.model import ResourceRequest, SliceKind, SpecError, Topology, model_matches
from gpupool.model.units import format_mib
from gpupool.scheduler.state import MODE_CODES, ClusterState
from gpupool.sharing import Profile, SharingMode, models_with_profile
from gpupool.sharing.mig import OCCUPANCY_STATES


@dataclass(frozen=True, slots=True)
class Ask:
    request: ResourceRequest
    kind: SliceKind
    count: int  # devices or MIG instances
    cpu: int
    mem: int
    compute_pct: int  # per device: 100 for whole cards, 0 for memory-only shares
    mem_mib: int | None  # per device for shares; None = proportional to compute share
    min_device_mib: int  # whole cards: smallest acceptable card memory
    model_ok: np.ndarray  # bool per model code of the snapshot
    mig: tuple[Profile | None, ...]  # per model code
    static_dev: np.ndarray  # (N, G) devices of the right model, size, mode and health
    need_mem: np.ndarray | None  # (N, G) shares: memory the ask takes on each device
    mig_slot_table: np.ndarray | None  # (model code, occupancy mask) -> free legal starts
    what: str  # how the devices are described in reasons, e.g. "A100-80G"
    card_units: float = 0.0  # cards it counts as for a default memory (scheduler.host_memory)
    # the same ask without host CPU and memory (its device part): requests that differ only
    # in cpu/mem share it, and with it the cached device feasibility and FGD's kept scores
    core: "Ask | None" = None

    @property
    def device_part(self) -> "Ask":
        return self.core or self

    @property
    def topology(self) -> Topology:
        return self.request.topology

    @property
    def pooled_pct(self) -> int:
        """Compute percent the ask takes from whole/shared cards (0 for MIG and CPU-only)."""
        if self.kind in (SliceKind.WHOLE, SliceKind.SHARE):
            return self.compute_pct * self.count
        return 0


def _card_units(kind: SliceKind, count: int, compute_pct: int, mem_mib: int | None) -> float:
    """How many cards a request counts as for a default host memory: a whole card one, a
    share its compute (memory only: its memory of an 80 GiB card), a MIG / vNPU instance a
    seventh."""
    if kind is SliceKind.WHOLE:
        return float(count)
    if kind is SliceKind.SHARE:
        part = compute_pct / 100 if compute_pct else min(1.0, (mem_mib or 0) / 81920)
        return count * part
    if kind is SliceKind.NONE:
        return 0.0
    return count / 7


def with_host(core: Ask, request: ResourceRequest) -> Ask:
    """``core`` (compiled for ``request`` without cpu and mem) for ``request`` itself."""
    if request.cpu_millis == 0 and request.mem_mib == 0:
        return core
    return replace(core, request=request, cpu=request.cpu_millis, mem=request.mem_mib, core=core)


def device_request(request: ResourceRequest) -> ResourceRequest:
    return request.with_host(0, 0)


def compile_ask(state: ClusterState, request: ResourceRequest) -> Ask:
    """Turn a request into arrays for ``state``; unknown MIG profiles raise SpecError."""
    kind = request.kind
    model_ok = np.ones(len(state.models) + 1, dtype=bool)  # +1: index -1 (padding) is False
    model_ok[-1] = False
    words: list[str] = []
    if request.vendor is not None:
        wanted = str(request.vendor)
        code = state.vendors.index(wanted) if wanted in state.vendors else -2
        model_ok &= state.model_vendor == code
        words.append(str(request.vendor))
    if request.gpu_model:
        for code, name in enumerate(state.models):
            model_ok[code] &= model_matches(request.gpu_model, name)
        words.append(request.gpu_model)
    mig: list[Profile | None] = [None] * (len(state.models) + 1)
    if kind is SliceKind.MIG:
        profile = request.mig_profile or ""
        offered = models_with_profile(profile)  # raises SpecError for unknown profiles
        for code, table in enumerate(state.mig_tables):
            if table is not None and table.has(profile):
                mig[code] = table.profile(profile)
            else:
                model_ok[code] = False
        words.append(f"{profile} ({'/'.join(offered)})")
    min_dev = request.gpu_mem_mib or 0 if kind is SliceKind.WHOLE else 0
    if kind is SliceKind.WHOLE and min_dev:
        words.append(f"gpu with >= {format_mib(min_dev)}")
    if kind is SliceKind.SHARE:
        compute = request.gpu_share_pct or 0
        mem = request.gpu_mem_mib
        if compute == 0 and mem is None:
            raise SpecError("gpu share: neither compute nor memory given")
    else:
        compute, mem = (100, None) if kind is SliceKind.WHOLE else (0, None)
    static = model_ok[state.model] & state.healthy
    if min_dev:
        static &= state.dev_mem >= min_dev
    if kind is SliceKind.MIG:
        static &= state.mode == MODE_CODES[SharingMode.MIG]
    elif kind is SliceKind.SHARE:
        static &= state.mode == MODE_CODES[SharingMode.SHARE]
    else:
        static &= state.mode != MODE_CODES[SharingMode.MIG]
    need_mem = None
    if kind is SliceKind.SHARE:
        need = (
            state.grantable_mem * compute // 100
            if mem is None
            else np.full(state.grantable_mem.shape, mem, dtype=np.int64)
        )
        # compared with free_mem per placement: the same dtype compares ~3x faster (an ask
        # larger than that dtype fits no device anyway, so clipping changes no decision)
        need_mem = np.minimum(need, np.iinfo(state.free_mem.dtype).max).astype(state.free_mem.dtype)
    slot_table = None
    if kind is SliceKind.MIG:
        slot_table = np.zeros((len(mig), OCCUPANCY_STATES), dtype=np.int16)
        for code, placed in enumerate(mig):
            if placed is not None:
                for occupied in range(OCCUPANCY_STATES):
                    slot_table[code, occupied] = placed.room(occupied)
    return Ask(
        card_units=_card_units(kind, request.gpu_count, compute, mem),
        request=request,
        kind=kind,
        count=request.gpu_count,
        cpu=request.cpu_millis,
        mem=request.mem_mib,
        compute_pct=compute,
        mem_mib=mem,
        min_device_mib=min_dev,
        model_ok=model_ok,
        mig=tuple(mig),
        what=" ".join(words) or "gpu",
        static_dev=static,
        need_mem=need_mem,
        mig_slot_table=slot_table,
    )

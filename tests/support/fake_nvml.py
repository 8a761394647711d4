"""A stand-in for ``pynvml`` whose answers come from a recorded ``nvidia-smi -q -x`` dump
(NVML and nvidia-smi read the same driver state). Only what the XML lacks is filled in, and
named here: MIG placements (first legal start of each instance's profile, in order) and
NVML's GPU-instance profile ids (from our MIG table)."""

from dataclasses import dataclass, field
from types import SimpleNamespace

from gpupool.devices.base import ToolReport
from gpupool.sharing.mig import free_starts, table_for

MIB = 1024 * 1024


class NVMLError(Exception):
    pass


class NVMLError_NotSupported(NVMLError):
    pass


class NVMLError_LibraryNotFound(NVMLError):
    pass


@dataclass
class _Mig:
    uuid: str
    gi: int
    profile_id: int
    start: int
    memory_mib: int
    processes: list = field(default_factory=list)


@dataclass
class _Gpu:
    name: str
    uuid: str
    bus: str
    total_mib: int
    used_mib: int
    mig_on: bool
    util: float | None
    temp: float | None
    power_w: float | None
    ecc: int | None
    migs: list[_Mig]
    processes: list = field(default_factory=list)
    links: dict[int, str] = field(default_factory=dict)
    pending: list[_Mig] = field(default_factory=list)  # GPU instances without compute


class NVMLError_Timeout(NVMLError):
    pass


def model_of(h: _Gpu) -> str:
    from gpupool.devices.naming import model_name
    from gpupool.model import Vendor

    return model_name(Vendor.NVIDIA, h.name, h.total_mib)


class NVMLError_InsufficientResources(NVMLError):
    pass


class NVMLError_InvalidArgument(NVMLError):
    pass


class _Placement:  # c_nvmlGpuInstancePlacement_t
    start = 0
    size = 0


class FakeNvml:
    NVMLError = NVMLError
    NVML_DEVICE_MIG_ENABLE = 1
    NVML_DEVICE_MIG_DISABLE = 0
    c_nvmlGpuInstancePlacement_t = _Placement
    NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED = 0
    # pynvml's compute-instance profile indexes, by compute slices
    NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE = 0
    NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE = 1
    NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE = 2
    NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE = 3
    NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE = 4
    NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE = 5
    NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE = 6
    NVML_NVLINK_MAX_LINKS = 4
    nvmlEventTypeXidCriticalError = 8

    def __init__(self, report: ToolReport | None = None, *, missing: bool = False):
        self.missing = missing
        self.needs_reset = False  # a driver that applies MIG mode changes at the next reset
        self.pending_xids: list[tuple[int, int]] = []  # (gpu index, xid) to deliver
        self.registered: set[int] = set()
        self.calls: list[tuple] = []  # MIG control calls, in order
        self.gpus: list[_Gpu] = []
        for d, t in zip(report.devices, report.telemetry, strict=True) if report else ():
            table = table_for(d.model)
            migs, occupied = [], 0
            for n, inst in enumerate(d.mig):
                profile = table.profile(inst.profile)
                start = free_starts(occupied, profile)[0]
                occupied |= profile.mask(start)
                uuid = inst.uuid or f"MIG-{d.uuid[4:]}-{n}"
                migs.append(_Mig(uuid, 3 + n, profile.profile_id, start, inst.memory_mib))
            self.gpus.append(
                _Gpu(d.product, d.uuid, d.bus_id, d.memory_mib, t.mem_used_mib or 0,
                     bool(d.mig), t.util_pct, t.temp_c, t.power_w, t.ecc_errors, migs)
            )  # fmt: skip

    def nvmlInit(self) -> None:
        if self.missing:
            raise NVMLError_LibraryNotFound("NVML Shared Library Not Found")

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> _Gpu:
        return self.gpus[i]

    def nvmlDeviceGetName(self, h: _Gpu) -> str:
        return h.name

    def nvmlDeviceGetUUID(self, h: _Gpu | _Mig) -> str:
        return h.uuid

    def nvmlDeviceGetMemoryInfo(self, h: _Gpu | _Mig) -> SimpleNamespace:
        if isinstance(h, _Mig):
            return SimpleNamespace(total=h.memory_mib * MIB, used=0)
        return SimpleNamespace(total=h.total_mib * MIB, used=h.used_mib * MIB)

    def nvmlDeviceGetPciInfo(self, h: _Gpu) -> SimpleNamespace:
        return SimpleNamespace(busId=h.bus.encode())

    def nvmlDeviceGetMigMode(self, h: _Gpu) -> tuple[int, int]:
        current = int(h.mig_on)
        return current, getattr(h, "pending_mode", current)

    def nvmlDeviceSetMigMode(self, h: _Gpu, mode: int) -> int:
        """NVML refuses while instances exist; ``needs_reset`` plays a driver that holds the
        change until a GPU reset (the mode reads as before, the pending one as asked)."""
        if h.migs or h.pending:
            raise NVMLError("In use by another client")
        self.calls.append(("set-mig-mode", mode))
        if self.needs_reset:
            h.pending_mode = mode
            return 0
        h.mig_on = bool(mode)
        return 0

    def nvmlDeviceGetMaxMigDeviceCount(self, h: _Gpu) -> int:
        return 7

    def nvmlDeviceGetMigDeviceHandleByIndex(self, h: _Gpu, j: int) -> _Mig:
        if j >= len(h.migs):
            raise NVMLError_NotSupported("Not Found")
        return h.migs[j]

    def nvmlDeviceGetGpuInstanceId(self, m: _Mig) -> int:
        return m.gi

    def nvmlDeviceGetGpuInstanceById(self, h: _Gpu, gi: int) -> _Mig:
        return next(m for m in h.migs if m.gi == gi)

    def nvmlGpuInstanceGetInfo(self, m: _Mig) -> SimpleNamespace:
        placement = SimpleNamespace(start=m.start)
        return SimpleNamespace(id=m.gi, profileId=m.profile_id, placement=placement)

    # -- MIG control, as NVML documents it: a legal free placement of the profile, or an
    # error; a compute instance must exist before the MIG device shows; destroy in order
    def nvmlDeviceCreateGpuInstanceWithPlacement(self, h: _Gpu, profile_id, placement) -> _Mig:
        table = table_for(model_of(h))
        profile = next((p for p in table.profiles if p.profile_id == profile_id), None)
        if profile is None or placement.start not in profile.starts:
            raise NVMLError_InvalidArgument("Invalid Argument")
        if placement.size != profile.size:
            raise NVMLError_InvalidArgument("Invalid Argument")
        occupied = 0
        for m in h.migs + h.pending:
            p = next(p for p in table.profiles if p.profile_id == m.profile_id)
            occupied |= p.mask(m.start)
        if occupied & profile.mask(placement.start):
            raise NVMLError_InsufficientResources("Insufficient Resources")
        gi = max((m.gi for m in h.migs + h.pending), default=0) + 1
        made = _Mig(f"MIG-{h.uuid[4:]}-gi{gi}", gi, profile_id, placement.start,
                    profile.memory_mib)  # fmt: skip
        h.pending.append(made)  # no MIG device until it has a compute instance
        self.calls.append(("create-gi", profile.name, placement.start))
        return made

    def nvmlGpuInstanceGetComputeInstanceProfileInfo(self, gi: _Mig, index, engine):
        return SimpleNamespace(id=100 + index)

    def nvmlGpuInstanceCreateComputeInstance(self, gi: _Mig, ci_profile_id) -> object:
        h = next(g for g in self.gpus if gi in g.pending)
        h.pending.remove(gi)
        h.migs.append(gi)
        self.calls.append(("create-ci", gi.gi))
        return object()

    def nvmlDeviceGetComputeInstanceId(self, m: _Mig) -> int:
        return 0

    def nvmlGpuInstanceGetComputeInstanceById(self, gi: _Mig, ci: int) -> tuple:
        return ("ci", gi)

    def nvmlComputeInstanceDestroy(self, ci: tuple) -> None:
        if ci[1].processes:
            raise NVMLError("In use by another client")
        self.calls.append(("destroy-ci", ci[1].gi))
        ci[1].ci_gone = True

    def nvmlGpuInstanceDestroy(self, gi: _Mig) -> None:
        if not getattr(gi, "ci_gone", False):
            raise NVMLError("In use by another client")  # compute instances first
        h = next(g for g in self.gpus if gi in g.migs)
        h.migs.remove(gi)
        self.calls.append(("destroy-gi", gi.gi))

    def nvmlDeviceGetUtilizationRates(self, h: _Gpu) -> SimpleNamespace:
        if h.util is None:
            raise NVMLError_NotSupported("Not Supported")  # e.g. MIG mode
        return SimpleNamespace(gpu=h.util)

    def nvmlDeviceGetTemperature(self, h: _Gpu, sensor: int) -> float:
        return h.temp

    def nvmlDeviceGetPowerUsage(self, h: _Gpu) -> int:
        return int(h.power_w * 1000)

    def nvmlDeviceGetTotalEccErrors(self, h: _Gpu, kind: int, counter: int) -> int:
        return h.ecc or 0

    def nvmlDeviceGetComputeRunningProcesses(self, h: _Gpu | _Mig) -> list:
        return [SimpleNamespace(pid=pid, usedGpuMemory=mib * MIB) for pid, mib in h.processes]

    def nvmlDeviceGetNvLinkState(self, h: _Gpu, link: int) -> int:
        if not h.links:
            raise NVMLError_NotSupported("Not Supported")
        return 1 if link in h.links else 0

    def nvmlDeviceGetNvLinkRemotePciInfo(self, h: _Gpu, link: int) -> SimpleNamespace:
        return SimpleNamespace(busId=h.links[link])

    def nvmlEventSetCreate(self) -> object:
        return object()

    def nvmlDeviceRegisterEvents(self, h: _Gpu, types: int, events: object) -> None:
        self.registered.add(self.gpus.index(h))

    def nvmlEventSetWait_v2(self, events: object, timeout_ms: int) -> SimpleNamespace:
        while self.pending_xids:
            index, xid = self.pending_xids.pop(0)
            if index in self.registered:
                return SimpleNamespace(device=self.gpus[index], eventData=xid, eventType=8)
        raise NVMLError_Timeout("Timeout")

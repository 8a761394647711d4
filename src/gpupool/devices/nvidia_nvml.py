"""NVIDIA through NVML (``nvidia-ml-py``): devices, UUIDs, memory, MIG instances with their
placements, NVLink islands, telemetry and per-process memory.

The ``nvml`` module is injected so the tests can drive this code with a stand-in built from a
recorded ``nvidia-smi -q -x`` dump; production passes the real ``pynvml``.
"""

from dataclasses import replace
from types import ModuleType
from typing import Any

from gpupool.devices import nvidia_mig
from gpupool.devices.base import (
    BackendUnavailable,
    DeviceInfo,
    DeviceTelemetry,
    DiscoveryError,
    GpuProcess,
    MigInstance,
)
from gpupool.devices.naming import model_name
from gpupool.devices.nvidia_mig import MigError
from gpupool.model import SharingMode, Vendor
from gpupool.sharing.mig import MigTable, table_for

MIB = 1024 * 1024
APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68, 109})


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def load_pynvml() -> ModuleType:
    try:
        import pynvml
    except ImportError:
        raise BackendUnavailable("nvidia: nvidia-ml-py is not installed") from None
    return pynvml


class NvmlBackend:
    name = "nvidia"

    def __init__(self, nvml: ModuleType | None = None):
        self._nvml = nvml
        self._ready = False
        self._events: Any = None  # NVML event set for XID errors (None: not set up yet)
        self._xid: dict[str, int] = {}  # device UUID -> last critical XID seen (sticky)

    @property
    def nvml(self) -> Any:
        if self._nvml is None:
            self._nvml = load_pynvml()
        if not self._ready:
            try:
                self._nvml.nvmlInit()
            except self._nvml.NVMLError as exc:  # no driver / library on this machine
                raise BackendUnavailable(f"nvidia: NVML cannot start ({exc})") from None
            self._ready = True
        return self._nvml

    def _handles(self) -> list[Any]:
        nv = self.nvml
        return [nv.nvmlDeviceGetHandleByIndex(i) for i in range(nv.nvmlDeviceGetCount())]

    def discover(self) -> list[DeviceInfo]:
        nv = self.nvml
        try:
            handles = self._handles()
            devices = [self._device(i, h) for i, h in enumerate(handles)]
        except nv.NVMLError as exc:
            raise DiscoveryError(f"nvidia: NVML failed during discovery: {exc}") from None
        return _islands(nv, handles, devices)

    def _device(self, index: int, h: Any) -> DeviceInfo:
        nv = self.nvml
        product = _text(nv.nvmlDeviceGetName(h))
        memory = nv.nvmlDeviceGetMemoryInfo(h).total // MIB
        model = model_name(Vendor.NVIDIA, product, memory)
        mig: tuple[MigInstance, ...] = ()
        mode = SharingMode.WHOLE
        if self._mig_on(h):
            mode = SharingMode.MIG
            mig = self._mig_instances(h, model)
        return DeviceInfo(
            vendor=Vendor.NVIDIA,
            local_index=index,
            model=model,
            memory_mib=memory,
            uuid=_text(nv.nvmlDeviceGetUUID(h)),
            product=product,
            mode=mode,
            mig=mig,
            bus_id=_text(nv.nvmlDeviceGetPciInfo(h).busId),
        )

    def _mig_on(self, h: Any) -> bool:
        nv = self.nvml
        try:
            return nv.nvmlDeviceGetMigMode(h)[0] == nv.NVML_DEVICE_MIG_ENABLE
        except nv.NVMLError:  # not a MIG-capable card
            return False

    def _mig_handles(self, h: Any) -> list[Any]:
        """The card's MIG devices (empty slots skipped)."""
        nv = self.nvml
        out = []
        for j in range(nv.nvmlDeviceGetMaxMigDeviceCount(h)):
            try:
                out.append(nv.nvmlDeviceGetMigDeviceHandleByIndex(h, j))
            except nv.NVMLError:  # an empty slot
                continue
        return out

    def _mig_instances(self, h: Any, model: str) -> tuple[MigInstance, ...]:
        nv = self.nvml
        table = table_for(model)
        names = {p.profile_id: p.name for p in table.profiles} if table else {}
        out = []
        for mig in self._mig_handles(h):
            gi = nv.nvmlDeviceGetGpuInstanceById(h, nv.nvmlDeviceGetGpuInstanceId(mig))
            info = nv.nvmlGpuInstanceGetInfo(gi)
            memory = nv.nvmlDeviceGetMemoryInfo(mig).total // MIB
            profile = names.get(info.profileId, f"profile-{info.profileId}")
            out.append(
                MigInstance(profile, info.placement.start, _text(nv.nvmlDeviceGetUUID(mig)), memory)
            )
        return tuple(out)

    # -- dynamic MIG (MigControl) ---------------------------------------------------------
    def create_mig(self, local_index: int, profile: str, start: int) -> MigInstance:
        h = self.nvml.nvmlDeviceGetHandleByIndex(local_index)
        card = self._device(local_index, h)
        table = table_for(card.model)
        if not isinstance(table, MigTable) or card.mode is not SharingMode.MIG:
            raise MigError(f"nvidia: card {local_index} ({card.model}) is not in MIG mode")
        return nvidia_mig.create(self.nvml, h, local_index, table, profile, start)

    def destroy_mig(self, local_index: int, uuid: str) -> None:
        h = self.nvml.nvmlDeviceGetHandleByIndex(local_index)
        nvidia_mig.destroy(self.nvml, h, local_index, uuid)

    def set_mig_mode(self, local_index: int, on: bool) -> None:
        """``nvmlDeviceSetMigMode``; where the driver applies it only after a GPU reset, the
        card keeps its mode and this says so (the agent does not reset cards)."""
        nv = self.nvml
        h = nv.nvmlDeviceGetHandleByIndex(local_index)
        want = nv.NVML_DEVICE_MIG_ENABLE if on else nv.NVML_DEVICE_MIG_DISABLE
        state = "on" if on else "off"
        try:
            nv.nvmlDeviceSetMigMode(h, want)
            current, _pending = nv.nvmlDeviceGetMigMode(h)
        except nv.NVMLError as exc:
            raise MigError(f"nvidia: card {local_index}: cannot turn MIG {state}: {exc}") from None
        if current != want:
            raise MigError(
                f"nvidia: card {local_index}: MIG {state} is pending a GPU reset "
                f"(nvidia-smi -i {local_index} -r with nothing on the card)"
            )

    def telemetry(self) -> list[DeviceTelemetry]:
        nv = self.nvml
        out = []
        for i, h in enumerate(self._handles()):
            out.append(
                DeviceTelemetry(
                    local_index=i,
                    util_pct=_maybe(nv, lambda h=h: nv.nvmlDeviceGetUtilizationRates(h).gpu),
                    mem_used_mib=_maybe(nv, lambda h=h: nv.nvmlDeviceGetMemoryInfo(h).used // MIB),
                    temp_c=_maybe(nv, lambda h=h: nv.nvmlDeviceGetTemperature(h, 0)),
                    power_w=_maybe(nv, lambda h=h: nv.nvmlDeviceGetPowerUsage(h) / 1000),
                    ecc_errors=_maybe(
                        nv,
                        lambda h=h: nv.nvmlDeviceGetTotalEccErrors(
                            h, 1, 0
                        ),  # uncorrected, volatile
                    ),
                )
            )
        xids = self._read_xids()
        uuids = [_text(nv.nvmlDeviceGetUUID(h)) for h in self._handles()]
        marked = []
        for t, uuid in zip(out, uuids, strict=True):
            xid = xids.get(uuid)
            if xid is not None:
                t = replace(t, xid=xid)
            if t.ecc_errors or xid is not None:
                t = replace(t, healthy=False)
            marked.append(t)
        return marked

    def _read_xids(self) -> dict[str, int]:
        """Drain NVML's critical-XID events (without waiting). A device that reported one
        stays unhealthy until the agent restarts, as the Kubernetes device plugins do;
        application XIDs (13, 31, 43, 45, 68, 109: a job's own fault) are ignored."""
        nv = self.nvml
        if self._events is None:
            try:
                self._events = nv.nvmlEventSetCreate()
                for h in self._handles():
                    try:
                        nv.nvmlDeviceRegisterEvents(
                            h, nv.nvmlEventTypeXidCriticalError, self._events
                        )
                    except nv.NVMLError:  # e.g. not supported on this board
                        continue
            except nv.NVMLError:
                self._events = False
        if not self._events:
            return self._xid
        for _ in range(1000):  # bounded: a storm of events waits for the next heartbeat
            try:
                event = nv.nvmlEventSetWait_v2(self._events, 0)
            except nv.NVMLError:  # NVML_ERROR_TIMEOUT: nothing more now
                break
            xid = int(event.eventData)
            if xid not in APPLICATION_XIDS:
                self._xid[_text(nv.nvmlDeviceGetUUID(event.device))] = xid
        return self._xid

    def processes(self) -> list[GpuProcess]:
        """Compute processes per GPU and per MIG instance (a MIG process is reported on its
        instance, whose UUID is what the workload was granted)."""
        nv = self.nvml
        out: list[GpuProcess] = []
        for h in self._handles():
            for t in self._mig_handles(h) if self._mig_on(h) else [h]:
                uuid = _text(nv.nvmlDeviceGetUUID(t))
                for p in nv.nvmlDeviceGetComputeRunningProcesses(t):
                    used = p.usedGpuMemory or 0
                    out.append(GpuProcess(uuid, int(p.pid), int(used) // MIB))
        return out


def _maybe(nv: Any, read: Any) -> Any:
    try:
        return read()
    except nv.NVMLError:
        return None


def _islands(nv: Any, handles: list[Any], devices: list[DeviceInfo]) -> list[DeviceInfo]:
    """Cards joined by NVLink form an island (connected components over active links)."""
    parent = list(range(len(devices)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    by_bus = {d.bus_id.upper(): i for i, d in enumerate(devices)}
    linked = False
    for i, h in enumerate(handles):
        for link in range(getattr(nv, "NVML_NVLINK_MAX_LINKS", 18)):
            try:
                if nv.nvmlDeviceGetNvLinkState(h, link) != 1:
                    continue
                peer = _text(nv.nvmlDeviceGetNvLinkRemotePciInfo(h, link).busId).upper()
            except nv.NVMLError:
                break
            j = by_bus.get(peer)
            if j is not None:
                parent[root(i)] = root(j)
                linked = True
    if not linked:
        return devices
    return [replace(d, island=root(i)) for i, d in enumerate(devices)]

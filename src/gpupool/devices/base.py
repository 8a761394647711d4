"""What every device backend reports, whatever the vendor: an inventory of devices (with MIG
instances where the hardware has them), telemetry per device, and the processes using each
device's memory (for the agent's memory watchdog)."""

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from gpupool.model import SharingMode, Vendor


class DiscoveryError(Exception):
    """A backend found its tool or library but could not make sense of what it said."""


class BackendUnavailable(Exception):
    """The vendor's library or tool is not on this machine (not an error: try the next)."""


@dataclass(frozen=True, slots=True)
class MigInstance:
    """One MIG GPU instance: its profile, first memory slice and the UUID CUDA wants."""

    profile: str
    start: int | None
    uuid: str
    memory_mib: int = 0


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """One accelerator as a backend sees it. ``local_index`` is the vendor tool's own index
    (what ``CUDA_VISIBLE_DEVICES`` / ``ASCEND_RT_VISIBLE_DEVICES`` count in)."""

    vendor: Vendor
    local_index: int
    model: str
    memory_mib: int
    uuid: str = ""
    product: str = ""  # the name the vendor tool printed
    healthy: bool = True
    mode: SharingMode = SharingMode.WHOLE
    mig: tuple[MigInstance, ...] = ()
    island: int | None = None  # devices joined by NVLink / HCCS / MLU-Link share an island
    pcie_switch: int | None = None
    bus_id: str = ""


@dataclass(frozen=True, slots=True)
class DeviceTelemetry:
    local_index: int
    util_pct: float | None = None
    mem_used_mib: int | None = None
    temp_c: float | None = None
    power_w: float | None = None
    healthy: bool = True
    ecc_errors: int | None = None
    xid: int | None = None


@dataclass(frozen=True, slots=True)
class GpuProcess:
    """A process holding device memory (NVML's running compute processes)."""

    device_uuid: str
    pid: int
    used_mib: int


@dataclass
class Inventory:
    """What discovery found on a node, and what it could not read (the node still registers
    the devices it did find)."""

    devices: list[DeviceInfo] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    backends: list[str] = field(default_factory=list)


@dataclass
class ToolReport:
    """Everything one run of a vendor tool says: devices, telemetry, and the processes holding
    device memory where the tool lists them."""

    devices: list[DeviceInfo] = field(default_factory=list)
    telemetry: list[DeviceTelemetry] = field(default_factory=list)
    processes: list[GpuProcess] = field(default_factory=list)


class ToolBackend:
    """A backend whose command-line tool answers discovery and telemetry in one report."""

    name = "tool"

    def report(self) -> ToolReport:
        raise NotImplementedError

    def discover(self) -> list[DeviceInfo]:
        return self.report().devices

    def telemetry(self) -> list[DeviceTelemetry]:
        return self.report().telemetry

    def processes(self) -> list[GpuProcess]:
        return self.report().processes


class Backend(Protocol):
    """One vendor. ``discover`` raises ``BackendUnavailable`` when the vendor is absent and
    ``DiscoveryError`` when its tool answered garbage."""

    name: str

    def discover(self) -> list[DeviceInfo]: ...

    def telemetry(self) -> list[DeviceTelemetry]: ...

    def processes(self) -> list[GpuProcess]: ...


def number(text: str | None, what: str) -> float:
    """A float from a vendor tool's field (``"67.03 W"``, ``"81920 MiB"``), or a clear error."""
    if text is None:
        raise DiscoveryError(f"{what}: missing")
    head = text.strip().split(" ")[0].rstrip("%")
    try:
        return float(head)
    except ValueError:
        raise DiscoveryError(f"{what}: {text.strip()!r} is not a number") from None


def optional_number(text: str | None) -> float | None:
    """Like ``number`` but ``N/A``, ``-``, ``NA`` or a missing field is ``None``."""
    if text is None or text.strip() in ("", "N/A", "NA", "-", "[N/A]", "[Not Supported]"):
        return None
    try:
        return number(text, "")
    except DiscoveryError:
        return None


@runtime_checkable
class MigControl(Protocol):
    """A backend that can cut its cards on order (dynamic MIG): instances are created where
    the scheduler granted them and destroyed when idle and in the way."""

    def create_mig(self, local_index: int, profile: str, start: int) -> MigInstance:
        """Create a GPU instance (with one compute instance over all of it) at ``start``."""
        ...

    def destroy_mig(self, local_index: int, uuid: str) -> None:
        """Destroy the instance with this MIG UUID (its compute instances first)."""
        ...


@runtime_checkable
class MigModeControl(MigControl, Protocol):
    """A backend that can also turn a card's MIG mode on and off."""

    def set_mig_mode(self, local_index: int, on: bool) -> None: ...


@runtime_checkable
class VnpuMaker(Protocol):
    """A backend that cuts its chips into vNPUs on order."""

    def create_vnpu(self, local_index: int, template: str) -> MigInstance: ...

    def destroy_vnpu(self, local_index: int, uuid: str) -> None: ...

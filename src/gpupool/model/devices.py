"""Accelerators and nodes: the hardware vocabulary every layer shares."""

from dataclasses import dataclass, field
from enum import StrEnum

from gpupool.model.errors import SpecError

# a Node's ``closed`` when its agent's loop is behind: it cannot start new work soon
AGENT_BEHIND = "agent behind"


class Vendor(StrEnum):
    NVIDIA = "nvidia"
    ASCEND = "ascend"
    CAMBRICON = "cambricon"
    HYGON = "hygon"


class SharingMode(StrEnum):
    """How one device is cut. A pool in ``hybrid`` mode mixes ``mig`` and ``share`` devices."""

    WHOLE = "whole"  # passthrough: one job owns the card
    MIG = "mig"  # hardware partitions (NVIDIA MIG) created on demand
    SHARE = "share"  # fractional: memory MiB + compute % per sharer (MPS / HAMi-core / vNPU)


@dataclass(frozen=True, slots=True)
class DeviceModel:
    """Catalog facts about one accelerator model."""

    name: str
    vendor: Vendor
    memory_mib: int
    interconnect: str  # nvlink, hccs, mlu-link, xgmi or pcie
    mig_capable: bool = False


_CATALOG: tuple[DeviceModel, ...] = (
    DeviceModel("A100-80G", Vendor.NVIDIA, 81920, "nvlink", mig_capable=True),
    DeviceModel("A100-40G", Vendor.NVIDIA, 40960, "nvlink", mig_capable=True),
    DeviceModel("A30-24G", Vendor.NVIDIA, 24576, "nvlink", mig_capable=True),
    DeviceModel("H100-80G", Vendor.NVIDIA, 81920, "nvlink", mig_capable=True),
    DeviceModel("H200-141G", Vendor.NVIDIA, 144384, "nvlink", mig_capable=True),
    DeviceModel("L40S", Vendor.NVIDIA, 49152, "pcie"),
    DeviceModel("A10", Vendor.NVIDIA, 24576, "pcie"),
    DeviceModel("RTX4090", Vendor.NVIDIA, 24576, "pcie"),
    DeviceModel("RTX3090", Vendor.NVIDIA, 24576, "pcie"),
    DeviceModel("T4", Vendor.NVIDIA, 16384, "pcie"),
    DeviceModel("V100S", Vendor.NVIDIA, 32768, "nvlink"),
    DeviceModel("V100-32G", Vendor.NVIDIA, 32768, "nvlink"),
    DeviceModel("V100-16G", Vendor.NVIDIA, 16384, "nvlink"),
    DeviceModel("P100", Vendor.NVIDIA, 16384, "pcie"),
    DeviceModel("Ascend910B", Vendor.ASCEND, 65536, "hccs"),
    # the 910B chips by name (npu-smi's 910B2 / 910B3 / 910B4): their vNPU templates differ;
    # gpu=Ascend910B asks for any of them
    DeviceModel("Ascend910B-B2", Vendor.ASCEND, 65536, "hccs", mig_capable=True),
    DeviceModel("Ascend910B-B3", Vendor.ASCEND, 65536, "hccs", mig_capable=True),
    DeviceModel("Ascend910B-B4", Vendor.ASCEND, 32768, "hccs", mig_capable=True),
    DeviceModel("Ascend310P", Vendor.ASCEND, 24576, "pcie", mig_capable=True),
    DeviceModel("MLU370", Vendor.CAMBRICON, 49152, "mlu-link"),
    DeviceModel("K100", Vendor.HYGON, 65536, "xgmi"),
)
CATALOG: dict[str, DeviceModel] = {m.name.upper(): m for m in _CATALOG}


def canonical_model(name: str) -> str:
    """Normalise a model name: ``a100_80gb`` -> ``A100-80G``; unknown names keep their text."""
    text = name.strip().replace("_", "-").replace(" ", "")
    if not text:
        raise SpecError("gpu model: empty model name", token=name)
    upper = text.upper()
    if upper.endswith("GB") and upper[-3:-2].isdigit():
        upper = upper[:-1]
    known = CATALOG.get(upper)
    return known.name if known else upper


def model_matches(wanted: str, actual: str) -> bool:
    """A wanted model matches itself and, as a family, its variants (``A100`` ~ ``A100-80G``);
    ``V100M16|V100M32`` lists alternatives (a trace's ``gpu_spec``)."""
    a = actual.upper()
    return any(a == w or a.startswith(w + "-") for w in wanted.upper().split("|"))


def catalog_entry(model: str) -> DeviceModel | None:
    return CATALOG.get(model.upper())


@dataclass(frozen=True, slots=True)
class Device:
    """One accelerator of a node, as discovered by the agent (or simulated)."""

    index: int
    model: str
    vendor: Vendor
    memory_mib: int
    uuid: str = ""
    healthy: bool = True
    mode: SharingMode = SharingMode.WHOLE
    island: int | None = None  # NVLink / HCCS island id within the node
    pcie_switch: int | None = None

    def __post_init__(self) -> None:
        if self.memory_mib <= 0:
            raise SpecError(f"device {self.index}: memory must be positive", field="memory_mib")
        if self.mode is SharingMode.MIG:
            from_catalog = catalog_entry(self.model)
            if from_catalog is None or not from_catalog.mig_capable:
                raise SpecError(
                    f"device {self.index}: {self.model} does not support MIG", field="mode"
                )


@dataclass(frozen=True, slots=True)
class Node:
    """A server of the pool: CPU in millicores, memory in MiB, its devices and labels."""

    name: str
    cpu_millis: int
    memory_mib: int
    devices: tuple[Device, ...] = ()
    labels: dict[str, str] = field(default_factory=dict)
    pool: str = "default"
    closed: str = ""  # why it takes no new work now (drained, lost, fenced); "" when it does

    def __post_init__(self) -> None:
        if not self.name:
            raise SpecError("node: name must not be empty", field="name")
        if self.cpu_millis < 0 or self.memory_mib < 0:
            raise SpecError(f"node {self.name}: negative CPU or memory", field="cpu_millis")
        indexes = [d.index for d in self.devices]
        if len(set(indexes)) != len(indexes):
            raise SpecError(f"node {self.name}: duplicate device index", field="devices")


def make_devices(
    model: str,
    count: int,
    *,
    mode: SharingMode = SharingMode.WHOLE,
    island_size: int | None = None,
    node: str = "node",
) -> tuple[Device, ...]:
    """Build ``count`` devices of a catalog model; ``island_size`` groups them into NVLink islands.

    Without ``island_size``, NVLink/HCCS models form one island per node and PCIe models none.
    """
    name = canonical_model(model)
    entry = catalog_entry(name)
    if entry is None:
        raise SpecError(f"gpu model: {model!r} is not in the catalog", token=model)
    if island_size is None and entry.interconnect != "pcie":
        island_size = count
    return tuple(
        Device(
            index=i,
            model=entry.name,
            vendor=entry.vendor,
            memory_mib=entry.memory_mib,
            uuid=f"{'GPU' if entry.vendor is Vendor.NVIDIA else entry.vendor.upper()}-{node}-{i}",
            mode=mode,
            island=(i // island_size) if island_size else None,
            pcie_switch=i // 2,
        )
        for i in range(count)
    )

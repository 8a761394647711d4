"""Per-pool sharing configuration: which devices are whole, MIG-partitioned or shared."""

from dataclasses import dataclass, replace

from gpupool.model import Device, Node, SharingMode, SpecError
from gpupool.sharing.mig import table_for


@dataclass(frozen=True, slots=True)
class PoolSharing:
    """How a pool cuts its cards.

    ``mode`` is ``whole``, ``mig``, ``share`` or ``hybrid``. In ``hybrid`` the first
    ``mig_per_node`` MIG-capable cards of every node are MIG-partitioned (isolated inference)
    and the others are shared (dev/test) — the layout the seed says most enterprises choose.
    Cards that cannot do MIG are shared instead.
    """

    mode: str = "whole"
    mig_per_node: int = 0

    def __post_init__(self) -> None:
        if self.mode not in {"whole", "mig", "share", "hybrid"}:
            raise SpecError(
                f"pool sharing: mode {self.mode!r} is not one of whole|mig|share|hybrid",
                field="mode",
            )
        if self.mig_per_node < 0:
            raise SpecError("pool sharing: mig_per_node must not be negative", field="mig_per_node")

    def device_mode(self, device: Device, mig_rank: int) -> SharingMode:
        """The mode for ``device``; ``mig_rank`` counts MIG-capable cards before it on its node."""
        mig_ok = table_for(device.model) is not None
        if self.mode == "whole":
            return SharingMode.WHOLE
        if self.mode == "share":
            return SharingMode.SHARE
        if self.mode == "mig":
            return SharingMode.MIG if mig_ok else SharingMode.WHOLE
        return SharingMode.MIG if mig_ok and mig_rank < self.mig_per_node else SharingMode.SHARE

    def apply(self, node: Node) -> Node:
        """A copy of ``node`` with each device's mode set by this configuration."""
        devices: list[Device] = []
        rank = 0
        for device in node.devices:
            devices.append(replace(device, mode=self.device_mode(device, rank)))
            if table_for(device.model) is not None:
                rank += 1
        return replace(node, devices=tuple(devices))

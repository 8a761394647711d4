"""Hardware layer: discover a node's accelerators (NVIDIA, Ascend, Cambricon, Hygon, or a
simulated set) behind one interface, with telemetry and per-process memory."""

from gpupool.devices.base import (
    Backend,
    BackendUnavailable,
    DeviceInfo,
    DeviceTelemetry,
    DiscoveryError,
    GpuProcess,
    Inventory,
    MigInstance,
)
from gpupool.devices.detect import Located, discover

__all__ = [
    "Backend",
    "BackendUnavailable",
    "DeviceInfo",
    "DeviceTelemetry",
    "DiscoveryError",
    "GpuProcess",
    "Inventory",
    "Located",
    "MigInstance",
    "discover",
]

"""Find every accelerator on this machine: try each vendor's backend, never crash when a
library or tool is missing, and keep the devices of the vendors that answered when another
one printed garbage."""

import logging
from dataclasses import dataclass

from gpupool.devices.ascend import AscendBackend
from gpupool.devices.base import Backend, BackendUnavailable, DeviceInfo, DiscoveryError, Inventory
from gpupool.devices.cambricon import CambriconBackend
from gpupool.devices.hygon import HygonBackend
from gpupool.devices.nvidia_nvml import NvmlBackend
from gpupool.devices.nvidia_smi import NvidiaSmiBackend
from gpupool.devices.simulated import simulated_backend

log = logging.getLogger("gpupool.devices")


@dataclass(frozen=True, slots=True)
class Located:
    """A device with its node-wide index and the backend that reports it."""

    index: int
    device: DeviceInfo
    backend: Backend


def by_backend(located: list[Located]) -> list[tuple[Backend, list[Located]]]:
    """The devices grouped by the backend that reports them, so each backend is read once."""
    groups: dict[int, tuple[Backend, list[Located]]] = {}
    for loc in located:
        groups.setdefault(id(loc.backend), (loc.backend, []))[1].append(loc)
    return list(groups.values())


def vendor_backends() -> list[list[Backend]]:
    """Per vendor, the backends to try in order (the first that is available wins)."""
    return [
        [NvmlBackend(), NvidiaSmiBackend()],
        [AscendBackend()],
        [CambriconBackend()],
        [HygonBackend()],
    ]


def discover(
    spec: str, node: str, candidates: list[list[Backend]] | None = None
) -> tuple[list[Located], Inventory]:
    """``auto`` tries every vendor; ``simulated:...`` or a YAML path simulates."""
    if spec != "auto":
        simulated = simulated_backend(spec, node)
        devices = simulated.discover()
        alone = [Located(i, d, simulated) for i, d in enumerate(devices)]
        return alone, Inventory(devices=devices, backends=[simulated.name])
    inventory = Inventory()
    located: list[Located] = []
    for chain in vendor_backends() if candidates is None else candidates:
        for backend in chain:
            try:
                found = backend.discover()
            except BackendUnavailable as exc:
                log.debug("%s", exc)
                continue
            except DiscoveryError as exc:
                inventory.errors.append(str(exc))
                log.warning("device discovery: %s", exc)
                break
            except Exception as exc:  # a vendor library misbehaving must not stop the node
                inventory.errors.append(f"{backend.name}: {type(exc).__name__}: {exc}")
                log.warning("device discovery: %s failed: %s", backend.name, exc)
                break
            inventory.backends.append(backend.name)
            for d in found:
                located.append(Located(len(located), d, backend))
                inventory.devices.append(d)
            break
    return located, inventory

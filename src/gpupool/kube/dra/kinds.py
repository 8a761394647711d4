"""The kinds of device a DeviceClass can give, as a claim's selectors see them (pure).

gpupool places a claim by model (or MIG profile), not by card, before it knows the node, so a
claim's selectors are evaluated once per kind of device of its class: every model of the
catalog, and for MIG every profile of every model's table, each as gpupool's slices publish
it (``kube.dra.slices``) — or, for a claim of NVIDIA's classes, as NVIDIA's DRA driver
publishes it. What differs from card to card or node to node (a UUID, an index, the driver
version) is not known when the model is chosen: a selector reading it is refused, naming it.

NVIDIA's names (k8s-dra-driver-gpu, ``cmd/gpu-kubelet-plugin/deviceinfo.go``
``GpuInfo.GetDevice`` / ``MigDeviceInfo.GetDevice``; its classes ``gpu.nvidia.com`` and
``mig.nvidia.com`` select ``type == "gpu"`` / ``"mig"``): ``type``, ``productName`` (NVML's
name), ``architecture`` (go-nvlib's ``GetArchitectureAsString``: ``Ampere``,
``Ada Lovelace``, ...), ``cudaComputeCapability`` (a version, ``8.0.0``), ``profile`` (MIG),
capacity ``memory``.
"""

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from gpupool.kube.dra.cel import Device, Names, Quantity, version
from gpupool.kube.dra.slices import DRIVER, mig_devices, whole_device
from gpupool.kube.quantity import quantity
from gpupool.model import CATALOG, SharingMode, Vendor
from gpupool.model.devices import Device as Card
from gpupool.sharing.mig import MigTable, table_for

NVIDIA_DRIVER = "gpu.nvidia.com"
# NVIDIA's classes -> the mode of gpupool's class they are read as
NVIDIA_CLASSES = {"gpu.nvidia.com": "whole", "mig.nvidia.com": "mig"}

# per model of the catalog: NVML's product name, go-nvlib's architecture, compute capability
NVIDIA_FACTS: dict[str, tuple[str, str, str]] = {
    "A100-80G": ("NVIDIA A100-SXM4-80GB", "Ampere", "8.0.0"),
    "A100-40G": ("NVIDIA A100-SXM4-40GB", "Ampere", "8.0.0"),
    "A30-24G": ("NVIDIA A30", "Ampere", "8.0.0"),
    "H100-80G": ("NVIDIA H100 80GB HBM3", "Hopper", "9.0.0"),
    "H200-141G": ("NVIDIA H200", "Hopper", "9.0.0"),
    "L40S": ("NVIDIA L40S", "Ada Lovelace", "8.9.0"),
    "A10": ("NVIDIA A10", "Ampere", "8.6.0"),
    "RTX4090": ("NVIDIA GeForce RTX 4090", "Ada Lovelace", "8.9.0"),
    "RTX3090": ("NVIDIA GeForce RTX 3090", "Ampere", "8.6.0"),
    "T4": ("Tesla T4", "Turing", "7.5.0"),
    "V100S": ("Tesla V100S-PCIE-32GB", "Volta", "7.0.0"),
    "V100-32G": ("Tesla V100-SXM2-32GB", "Volta", "7.0.0"),
    "V100-16G": ("Tesla V100-SXM2-16GB", "Volta", "7.0.0"),
    "P100": ("Tesla P100-PCIE-16GB", "Pascal", "6.0.0"),
}

_PER_CARD = "it differs from card to card; gpupool chooses a model, then the card"
_PER_NODE = "it differs from node to node; gpupool does not select by it"
OURS_HIDDEN = {"uuid": _PER_CARD, "index": _PER_CARD, "island": _PER_CARD, "migStart": _PER_CARD}
NVIDIA_HIDDEN = {
    **{n: _PER_CARD for n in ("uuid", "parentUUID", "pcieBusID", "pcieRoot", "index", "minor")},
    **{n: _PER_NODE for n in ("driverVersion", "cudaDriverVersion", "addressingMode")},
    "brand": "gpupool does not know each model's NVML brand",
}
NVIDIA_CAPACITY_HIDDEN = {
    n: "gpupool does not publish it"
    for n in ("multiprocessors", "copyEngines", "decoders", "encoders", "jpegEngines",
              "ofaEngines")
}  # fmt: skip
SHARE_CAPACITY_HIDDEN = {
    n: "a share's amount is asked with capacity.requests, not selected"
    for n in ("memory", "compute")
}


@dataclass(frozen=True, slots=True)
class Kind:
    """One kind of device: the model (and MIG profile) it is, and what a selector sees."""

    model: str
    profile: str | None
    device: Device
    memory_mib: int = 0  # a whole card's memory (kinds of one model differ by it)


def _values(published: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Attribute values as CEL sees them (``{"string": "x"}`` -> ``"x"``)."""
    out: dict[str, Any] = {}
    for name, typed in published.items():
        ((kind, value),) = typed.items()
        out[name] = version(value) if kind == "version" else value
    return out


def _capacity(published: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {n: Quantity(quantity(c["value"], n)) for n, c in published.items()}


def _ours(dev: dict[str, Any], mode: str) -> Device:
    hidden = SHARE_CAPACITY_HIDDEN if mode == "share" else {}
    return Device(
        DRIVER,
        {DRIVER: Names(_values(dev["attributes"]), OURS_HIDDEN)},
        {DRIVER: Names(_capacity(dev["capacity"]), hidden, "capacity")},
    )


def _nvidia(model: str, dev: dict[str, Any], profile: str | None) -> Device:
    product, arch, cc = NVIDIA_FACTS[model]
    attrs: dict[str, Any] = {
        "type": "mig" if profile else "gpu",
        "productName": product,
        "architecture": arch,
        "cudaComputeCapability": version(cc),
    }
    if profile:
        attrs["profile"] = profile
    memory = _capacity({"memory": dev["capacity"]["memory"]})
    return Device(
        NVIDIA_DRIVER,
        {NVIDIA_DRIVER: Names(attrs, NVIDIA_HIDDEN)},
        {NVIDIA_DRIVER: Names(memory, NVIDIA_CAPACITY_HIDDEN, "capacity")},
    )


Variants = tuple[tuple[str, int], ...]  # (model, memory MiB) of the cluster's cards


@lru_cache(maxsize=64)
def kinds(mode: str, nvidia: bool = False, variants: Variants = ()) -> tuple[Kind, ...]:
    """Every kind of device of gpupool's class of ``mode`` (whole, share, mig), as gpupool's
    slices publish it or (``nvidia``) as NVIDIA's driver would. A card's memory is what its
    node says (GPU feature discovery's ``nvidia.com/gpu.memory``: a T4 has 15360 MiB, not
    the catalog's 16 GiB), so each model of ``variants`` is one kind per memory size it has
    in the cluster; a model the cluster has not, its catalog size."""
    out: list[Kind] = []
    for entry in CATALOG.values():
        if nvidia and (entry.vendor is not Vendor.NVIDIA or entry.name not in NVIDIA_FACTS):
            continue
        table = table_for(entry.name)
        if mode == "mig" and not isinstance(table, MigTable):
            continue
        if mode != "mig":
            sizes = sorted({m for model, m in variants if model == entry.name})
            for size in sizes or [entry.memory_mib]:
                card = Card(0, entry.name, entry.vendor, size, mode=SharingMode(mode))
                dev = whole_device(card)  # a share's attributes are a whole card's; capacity hidden
                dev["attributes"]["mode"] = {"string": mode}
                view = _nvidia(entry.name, dev, None) if nvidia else _ours(dev, mode)
                out.append(Kind(entry.name, None, view, size))
            continue
        card = Card(0, entry.name, entry.vendor, entry.memory_mib, mode=SharingMode(mode))
        assert isinstance(table, MigTable)
        _, devices = mig_devices(card, table)
        seen: set[str] = set()
        for dev in devices:
            profile = dev["attributes"]["profile"]["string"]
            if profile in seen:
                continue  # placements of one profile differ only by migStart (per card)
            seen.add(profile)
            view = _nvidia(entry.name, dev, profile) if nvidia else _ours(dev, mode)
            out.append(Kind(entry.name, profile, view))
    return tuple(out)

"""A node's cards as the ResourceSlices of DRA driver ``gpu.gpupool.io`` (pure).

One pool per node (named after it), published as several slices:

- cards gpupool gives whole: one device each (``gpu-3``), attributes ``vendor``, ``model``,
  ``uuid``, ``index``, ``mode`` and ``island`` (its NVLink island), capacity ``memory``;
- cards it shares: one device each that many claims may hold at once
  (``allowMultipleAllocations``, the alpha gate DRAConsumableCapacity), whose capacities
  ``memory`` (what is grantable: the card less the sharing headroom) and ``compute`` (percent)
  are consumed per claim; a claim that says no amount takes the whole of it (the request
  policy's default) — a share is asked, never given by surprise;
- cards in MIG mode: one slice per card with a counter set of its memory-slice positions (and
  its media engines), and one device per legal placement of each profile
  (``gpu-0-mig-3g-40gb-4``) consuming the positions it covers (partitionable devices, the
  alpha gate DRAPartitionableDevices) — the API server's allocator then never hands out two
  overlapping instances, and neither does gpupool's. Each profile's placements are listed
  the one keeping the most room first (``starts_by_room``): kube-scheduler's allocator takes
  the first that fits, and with placements in start order it put a 3g at 0, where a 4g
  asked next could no longer go (seen against v1.34.4).

Only healthy cards are listed. Names and limits follow resource.k8s.io/v1 as v1.34 validates
it: device and counter-set names are DNS labels, attribute/capacity/counter names C
identifiers, at most 64 devices in a slice whose devices consume counters, 128 otherwise.
"""

import re
from collections.abc import Iterable
from typing import Any

from gpupool.model import Device, Node, SharingMode
from gpupool.sharing import SharePolicy
from gpupool.sharing.mig import MigTable, starts_by_room, table_for

DRIVER = "gpu.gpupool.io"
API_VERSION = "resource.k8s.io/v1"
MAX_DEVICES = 128
MEDIA = "media"


def quantity_mib(mib: int) -> str:
    """MiB as the API server writes the quantity back (its canonical form: the largest binary
    unit that divides it), so what gpupool wrote compares equal to what it reads."""
    for unit, factor in (("Ti", 1 << 20), ("Gi", 1 << 10)):
        if mib and mib % factor == 0:
            return f"{mib // factor}{unit}"
    return f"{mib}Mi"


def device_name(*parts: object) -> str:
    """A DNS label: lower case, ``.`` and ``+`` as ``-`` (``3g.40gb+me`` -> ``3g-40gb-me``)."""
    return re.sub(r"[^a-z0-9-]+", "-", "-".join(str(p) for p in parts).lower()).strip("-")


def _attributes(d: Device, mode: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {
        "vendor": {"string": str(d.vendor)},
        "model": {"string": d.model},
        "index": {"int": d.index},
        "mode": {"string": mode},
    }
    if d.uuid:
        out["uuid"] = {"string": d.uuid}
    if d.island is not None:
        out["island"] = {"int": d.island}
    return out


def whole_device(d: Device) -> dict[str, Any]:
    return {
        "name": device_name("gpu", d.index),
        "attributes": _attributes(d, "whole"),
        "capacity": {"memory": {"value": quantity_mib(d.memory_mib)}},
    }


def _shared(d: Device, share: SharePolicy) -> dict[str, Any]:
    grantable = share.usable_mib(d.memory_mib)
    return {
        "name": device_name("gpu", d.index),
        "attributes": _attributes(d, "share"),
        "allowMultipleAllocations": True,
        "capacity": {
            "memory": {
                "value": quantity_mib(grantable),
                "requestPolicy": {
                    "default": quantity_mib(grantable),
                    "validRange": {"min": "1Mi", "step": "1Mi"},
                },
            },
            "compute": {
                "value": "100",
                "requestPolicy": {"default": "100", "validRange": {"min": "1", "step": "1"}},
            },
        },
    }


def _counter_set(d: Device) -> str:
    return device_name("gpu", d.index, "slices")


def mig_devices(d: Device, table: MigTable) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The card's counter set and one device per legal placement of each profile."""
    counters = {f"memory-slice-{p}": {"value": "1"} for p in range(table.positions)}
    has_media = any(p.media for p in table.profiles)
    if has_media:
        counters[MEDIA] = {"value": "1"}
    devices = []
    for profile in table.profiles:
        for start in starts_by_room(table, profile):
            used = {f"memory-slice-{p}": {"value": "1"} for p in range(start, start + profile.size)}
            if profile.media or (has_media and profile.size == table.positions):
                used[MEDIA] = {"value": "1"}  # a +me instance, or the whole card, holds them
            attributes = _attributes(d, "mig")
            attributes["profile"] = {"string": profile.name}
            attributes["migStart"] = {"int": start}
            devices.append(
                {
                    "name": device_name("gpu", d.index, "mig", profile.name, start),
                    "attributes": attributes,
                    "capacity": {
                        "memory": {"value": quantity_mib(profile.memory_mib)},
                        "computeSlices": {"value": str(profile.compute_slices)},
                    },
                    "consumesCounters": [{"counterSet": _counter_set(d), "counters": used}],
                }
            )
    return {"name": _counter_set(d), "counters": counters}, devices


def slice_specs(node: Node, share: SharePolicy | None = None) -> list[dict[str, Any]]:
    """The ``spec`` of each ResourceSlice of the node's pool (without the pool's generation
    and slice count, which ``resource_slices`` fills in)."""
    share = share or SharePolicy()
    plain: list[dict[str, Any]] = []
    out: list[dict[str, Any]] = []
    for d in node.devices:
        if not d.healthy:
            continue
        table = table_for(d.model) if d.mode is SharingMode.MIG else None
        if isinstance(table, MigTable):
            counter_set, devices = mig_devices(d, table)
            out.append({"sharedCounters": [counter_set], "devices": devices})
        elif d.mode is SharingMode.SHARE:
            plain.append(_shared(d, share))
        elif d.mode is SharingMode.WHOLE:
            plain.append(whole_device(d))
    for i in range(0, len(plain), MAX_DEVICES):
        out.insert(i // MAX_DEVICES, {"devices": plain[i : i + MAX_DEVICES]})
    return out or [{"devices": []}]  # an empty pool says the node has nothing to give


def resource_slices(
    node: Node, generation: int, share: SharePolicy | None = None
) -> list[dict[str, Any]]:
    """The node's pool as whole ResourceSlice objects, named ``<node>-gpu.gpupool.io-<i>``."""
    specs = slice_specs(node, share)
    return [
        {
            "apiVersion": API_VERSION,
            "kind": "ResourceSlice",
            "metadata": {"name": slice_name(node.name, i)},
            "spec": {
                "driver": DRIVER,
                "nodeName": node.name,
                "pool": {
                    "name": node.name,
                    "generation": generation,
                    "resourceSliceCount": len(specs),
                },
                **spec,
            },
        }
        for i, spec in enumerate(specs)
    ]


def slice_name(node: str, i: int) -> str:
    return device_name(node, DRIVER.replace(".", "-"), i)


def devices_of(slices: Iterable[dict[str, Any]]) -> list[str]:
    """Every device name the slices list (for tests and the allocator's reading)."""
    return [d["name"] for s in slices for d in s["spec"].get("devices") or []]

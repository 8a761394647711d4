"""Conversions between database rows, API bodies and the engine's vocabulary."""

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Row

from gpupool.model import Device, Node, SharingMode, SpecError, Vendor, canonical_model
from gpupool.model.devices import catalog_entry
from gpupool.scheduler.tenants import CARD
from gpupool.server.db.tables import NodeRow


def device_fields(d: dict[str, Any]) -> dict[str, Any]:
    """Fill a registered device's vendor and memory from the catalog when not given."""
    model = canonical_model(d["model"])
    entry = catalog_entry(model)
    vendor = d.get("vendor") or (entry.vendor.value if entry else None)
    memory = d.get("memory_mib") or (entry.memory_mib if entry else None)
    if vendor is None or memory is None:
        raise SpecError(
            f"device {d['index']}: model {d['model']!r} is not in the catalog; "
            "give vendor and memory_mib",
            field="devices",
        )
    out = {**d, "model": model, "vendor": vendor, "memory_mib": memory}
    if out.get("mode") == "mig" and not (entry and entry.mig_capable):
        raise SpecError(f"device {d['index']}: {model} does not support MIG", field="devices")
    return out


def node_from_rows(node: NodeRow | Row, devices: Sequence[Any]) -> Node:
    """ORM rows, or Core rows of the same columns (the scheduler's snapshot reads those)."""
    return Node(
        name=node.name,
        cpu_millis=node.cpu_millis,
        memory_mib=node.memory_mib,
        devices=tuple(
            Device(
                index=d.index,
                model=d.model,
                vendor=Vendor(d.vendor),
                memory_mib=d.memory_mib,
                uuid=d.uuid,
                # a card the server ordered into another mode takes no new work meanwhile
                healthy=d.healthy and d.want_mode in (None, d.mode),
                mode=SharingMode(d.mode),
                island=d.island,
                pcie_switch=d.pcie_switch,
            )
            for d in sorted(devices, key=lambda d: d.index)
        ),
        labels=dict(node.labels or {}),
        pool=node.pool,
    )


def _is_card(resource: str) -> bool:
    return resource == "gpu" or resource.startswith("gpu:")


def check_resource(resource: str) -> str:
    if resource in ("gpu", "gpu_mem", "cpu"):
        return resource
    if resource.startswith("gpu:") and len(resource) > 4:
        return "gpu:" + canonical_model(resource[4:])
    raise SpecError(
        f"quota: resource {resource!r} is not gpu, gpu:MODEL, gpu_mem or cpu",
        field="resource",
        token=resource,
    )


def quota_to_engine(resource: str, value: float | None) -> int | None:
    """Natural units (cards, MiB, cores) to engine units (card-percent, MiB, millicores)."""
    if value is None:
        return None
    if _is_card(resource):
        return round(value * CARD)
    if resource == "cpu":
        return round(value * 1000)
    if value != int(value):
        raise SpecError(f"quota {resource}: MiB must be a whole number", field="nominal")
    return int(value)


def quota_from_engine(resource: str, value: int | None) -> float | None:
    if value is None:
        return None
    if _is_card(resource):
        return value / CARD
    if resource == "cpu":
        return value / 1000
    return float(value)

"""This machine as the server sees it: its registration body (CPU, memory, devices with
node-wide indexes, labels) and telemetry mapped from each backend's own indexes."""

import os
from pathlib import Path
from typing import Any

from gpupool.devices import Located
from gpupool.devices.base import DeviceTelemetry

NodeBody = dict[str, Any]


def host_memory_mib() -> int:
    try:
        text = Path("/proc/meminfo").read_text()
    except OSError:
        return 1024
    for line in text.splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024
    return 1024


def registration(
    name: str,
    located: list[Located],
    *,
    cpu_millis: int | None = None,
    memory_mib: int | None = None,
    labels: dict[str, str] | None = None,
    pool: str = "default",
    errors: list[str] | None = None,
    share: bool = False,
) -> NodeBody:
    """``share`` registers cards that are not MIG-partitioned as fractional-share devices (the
    operator's choice of how this node is cut; MIG cards stay MIG)."""
    labels = dict(labels or {})
    if errors:
        labels["gpupool.io/discovery-errors"] = "; ".join(errors)[:500]
    return {
        "name": name,
        "pool": pool,
        "cpu_millis": cpu_millis or (os.cpu_count() or 1) * 1000,
        "memory_mib": memory_mib or host_memory_mib(),
        "labels": labels,
        "devices": [
            {
                "index": loc.index,
                "model": loc.device.model,
                "vendor": loc.device.vendor.value,
                "memory_mib": loc.device.memory_mib,
                "uuid": loc.device.uuid,
                "healthy": loc.device.healthy,
                "mode": "share"
                if share and loc.device.mode.value == "whole"
                else loc.device.mode.value,
                "island": loc.device.island,
                "pcie_switch": loc.device.pcie_switch,
            }
            for loc in located
        ],
    }


def telemetry(located: list[Located]) -> list[dict[str, Any]]:
    """One telemetry entry per device, reading each backend once; a backend that fails now
    reports nothing this round (the heartbeat itself still goes out)."""
    out = []
    by_backend: dict[int, tuple[Any, list[Located]]] = {}
    for loc in located:
        by_backend.setdefault(id(loc.backend), (loc.backend, []))[1].append(loc)
    for backend, locs in by_backend.values():
        try:
            readings: dict[int, DeviceTelemetry] = {t.local_index: t for t in backend.telemetry()}
        except Exception:  # a vendor tool failing mid-run must not stop the heartbeat
            continue
        for loc in locs:
            t = readings.get(loc.device.local_index)
            if t is None:
                continue
            out.append(
                {
                    "index": loc.index,
                    "util_pct": t.util_pct,
                    "mem_used_mib": t.mem_used_mib,
                    "temp_c": t.temp_c,
                    "power_w": t.power_w,
                    "healthy": t.healthy,
                    "ecc_errors": t.ecc_errors,
                    "xid": t.xid,
                }
            )
    return out

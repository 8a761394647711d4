"""This machine as the server sees it: its registration body (CPU, memory, devices with
node-wide indexes, labels) and telemetry mapped from each backend's own indexes."""

import logging
import os
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from gpupool.devices import GpuProcess, Located
from gpupool.devices.base import DeviceTelemetry
from gpupool.devices.detect import by_backend

log = logging.getLogger("gpupool.agent")
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


def reserved_memory_mib(total_mib: int) -> int:
    """What a node keeps for its system, the agent and the page cache it needs: 5% of its
    memory, at least 1 GiB and at most 16 GiB (the pool is offered the rest)."""
    return min(max(1024, total_mib // 20), 16 * 1024)


def allocatable_memory_mib(reserve_mib: int | None = None) -> int:
    """The memory this host offers the pool: its RAM less the reserve."""
    total = host_memory_mib()
    reserve = reserved_memory_mib(total) if reserve_mib is None else reserve_mib
    return max(256, total - reserve)


def pid_budget() -> int:
    """Processes all workloads together may have: ``kernel.pid_max`` less a tenth (at least
    1,024) for the system and the agent."""
    try:
        pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    except (OSError, ValueError):
        pid_max = 32768
    return max(64, pid_max - max(1024, pid_max // 10))


def disk_budget_mib(folder: Path) -> int:
    """What workloads' folders may use together: nine tenths of the space free under
    ``folder`` when the agent starts."""
    try:
        st = os.statvfs(folder)
    except OSError:
        return 0
    return int(st.f_bavail * st.f_frsize * 0.9) // (1024 * 1024)


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
    instance: str | None = None,
) -> NodeBody:
    """``share`` registers cards that are not MIG-partitioned as fractional-share devices (the
    operator's choice of how this node is cut; MIG cards stay MIG)."""
    labels = dict(labels or {})
    if errors:
        labels["gpupool.io/discovery-errors"] = "; ".join(errors)[:500]
    return {
        "name": name,
        **({"instance": instance} if instance else {}),
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
    for backend, locs in by_backend(located):
        try:
            readings: dict[int, DeviceTelemetry] = {t.local_index: t for t in backend.telemetry()}
        except Exception:  # a vendor tool failing mid-run must not stop the heartbeat
            continue
        for loc in locs:
            t = readings.get(loc.device.local_index)
            if t is not None:
                fields = asdict(t)
                del fields["local_index"]
                out.append({"index": loc.index, **fields})
    return out


def gpu_processes(located: list[Located]) -> list[GpuProcess]:
    """Every backend's processes on its devices (the memory watchdog's input); a backend
    that fails now gives none this round."""
    out: list[GpuProcess] = []
    for backend, _ in by_backend(located):
        try:
            out.extend(backend.processes())
        except Exception as exc:  # no per-process data this round
            log.debug("processes: %s", exc)
    return out


def publish_load(loads: Iterable[dict[int, float]], located: list[Located]) -> None:
    """Simulated devices show telemetry that follows what runs on them (``loads``: each
    workload's share of each device it holds)."""
    load: dict[int, float] = {}
    for shares in loads:
        for index, share in shares.items():
            load[index] = load.get(index, 0.0) + share
    for loc in located:
        if hasattr(loc.backend, "load"):
            loc.backend.load[loc.device.local_index] = load.get(loc.index, 0.0)

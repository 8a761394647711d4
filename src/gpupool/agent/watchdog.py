"""The memory watchdog's decision: which workloads use more device memory than granted.

Pure. The agent feeds it the vendor's per-process memory list (NVML's running compute
processes) and, per workload, its process ids and its memory grant per device UUID; it answers
with the workloads to stop and why. A process on a device its workload was not granted counts
against a grant of zero: one tenant's overuse must not take a neighbour's memory.
"""

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from gpupool.devices.base import GpuProcess
from gpupool.sharing.runtime_env import Grant, LocalDevice, granted_uuid


def limits_mib(grants: Iterable[Grant], local: dict[int, LocalDevice]) -> dict[str, int]:
    """A workload's device-memory grant per device (or MIG) UUID, what it is watched by."""
    out: dict[str, int] = {}
    for g in grants:
        uuid = granted_uuid(g, local[g.device])
        out[uuid] = out.get(uuid, 0) + g.mem_mib
    return out


@dataclass(frozen=True, slots=True)
class Watched:
    key: int  # allocation id
    pids: frozenset[int]
    limits_mib: dict[str, int]  # device (or MIG) UUID -> granted MiB


@dataclass(frozen=True, slots=True)
class Violation:
    key: int
    device_uuid: str
    used_mib: int
    limit_mib: int

    @property
    def reason(self) -> str:
        return (
            f"device memory: used {self.used_mib} MiB on {self.device_uuid}, "
            f"granted {self.limit_mib} MiB"
        )


def over_limit(
    workloads: Iterable[Watched], processes: Iterable[GpuProcess], tolerance_mib: int = 0
) -> list[Violation]:
    """Every (workload, device) whose processes together hold more than the grant."""
    owner = {pid: w for w in workloads for pid in w.pids}
    used: dict[tuple[int, str], int] = defaultdict(int)
    for p in processes:
        w = owner.get(p.pid)
        if w is not None:
            used[(w.key, p.device_uuid)] += p.used_mib
    by_key = {w.key: w for w in owner.values()}
    out = []
    for (key, uuid), mib in sorted(used.items()):
        limit = by_key[key].limits_mib.get(uuid, 0)
        if mib > limit + tolerance_mib:
            out.append(Violation(key, uuid, mib, limit))
    return out

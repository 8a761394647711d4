"""One cgroup per workload with the CPU, host-memory and process-count limits of its grant,
the way Slurm's cgroup plugin confines a job step. Both hierarchies are supported and detected:

- **v2** (unified, most current nodes): ``/sys/fs/cgroup/<parent>/<agent>/alloc-N`` with
  ``cpu.max``, ``memory.max`` (and ``memory.swap.max`` 0), ``pids.max``; the controllers are
  enabled in ``cgroup.subtree_control`` of each ancestor.
- **v1** (one hierarchy per controller, a v2 mount beside them holding none): ``cpu``,
  ``memory`` and ``pids`` each get ``<own cgroup>/<parent>/<agent>/alloc-N`` under the agent's
  own cgroup of that controller (so a container's limits still cover its workloads), with
  ``cpu.cfs_quota_us``, ``memory.limit_in_bytes``, ``pids.max``.

The shim joins the cgroups before it starts the command, so every process the workload makes
is inside; stopping a workload signals every process of its cgroups too (a process that left
the process group with ``setsid`` does not escape). A grant without CPU or memory gets no CPU
quota or memory limit (the request grammar's default is 0: "no reservation"), only the process
limit. Without a writable hierarchy (no root, a read-only mount) workloads run without
cgroups and ``describe()`` says so.
"""

import contextlib
import errno
import hashlib
import os
import re
import signal
import time
from dataclasses import dataclass
from pathlib import Path

V1_CONTROLLERS = ("cpu", "memory", "pids")
V2_CONTROLLERS = ("cpu", "memory", "pids")
CFS_PERIOD_US = 100_000


@dataclass(frozen=True, slots=True)
class Hierarchy:
    version: int | None  # 2, 1, or None (no usable cgroups)
    bases: dict[str, Path]  # v1: controller -> where our cgroups go; v2: {"": base}
    note: str  # how it was found, or why there is none
    root: Path = Path("/sys/fs/cgroup")

    def describe(self) -> str:
        if self.version is None:
            return f"no cgroups ({self.note})"
        names = ", ".join(sorted(self.bases)) if self.version == 1 else "cpu, memory, pids"
        return f"cgroup v{self.version} ({names})"


def _own_cgroups(proc_self: Path) -> dict[str, str]:
    """``/proc/self/cgroup``: controller -> this process's cgroup path ("" for v2)."""
    out: dict[str, str] = {}
    try:
        text = proc_self.read_text()
    except OSError:
        return out
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            for controller in parts[1].split(",") if parts[1] else [""]:
                out[controller] = parts[2]
    return out


def detect(
    fs: Path = Path("/sys/fs/cgroup"),
    proc_self: Path = Path("/proc/self/cgroup"),
    parent: str = "gpupool",
) -> Hierarchy:
    """Which hierarchy this machine has and where workload cgroups go (``parent`` below the
    v2 root, or below the agent's own cgroup of each v1 controller)."""
    if (fs / "cgroup.controllers").is_file():
        if not os.access(fs, os.W_OK):
            return Hierarchy(None, {}, f"{fs} (cgroup v2) is not writable by this user")
        available = set((fs / "cgroup.controllers").read_text().split())
        missing = [c for c in V2_CONTROLLERS if c not in available]
        if missing:
            return Hierarchy(None, {}, f"cgroup v2 lacks the {', '.join(missing)} controller")
        return Hierarchy(2, {"": fs / parent.strip("/")}, "cgroup v2 at the root", fs)
    own = _own_cgroups(proc_self)
    bases: dict[str, Path] = {}
    for controller in V1_CONTROLLERS:
        mount = fs / controller
        if (mount / "cgroup.procs").is_file() and os.access(mount, os.W_OK):
            bases[controller] = mount / own.get(controller, "/").strip("/") / parent.strip("/")
    if "memory" in bases and "cpu" in bases:
        return Hierarchy(1, bases, "cgroup v1 controllers", fs)
    return Hierarchy(None, {}, f"no writable cgroup v2 root or v1 cpu+memory under {fs}")


def _write(path: Path, value: str) -> None:
    with path.open("w") as f:
        f.write(value)


def _enable_controllers(root: Path, leaf_parent: Path) -> None:
    """v2: enable cpu/memory/pids in ``subtree_control`` from the root down to the folder that
    will hold the workload cgroups (none of these holds processes: the no-internal-process
    rule)."""
    chain = [leaf_parent, *leaf_parent.parents]
    top = chain.index(root) if root in chain else len(chain) - 1
    for folder in reversed(chain[: top + 1]):
        folder.mkdir(exist_ok=True)
        have = set((folder / "cgroup.subtree_control").read_text().split())
        wanted = [f"+{c}" for c in V2_CONTROLLERS if c not in have]
        if wanted:
            _write(folder / "cgroup.subtree_control", " ".join(wanted))


class Cgroups:
    """Workload cgroups of one agent: ``group`` names this agent's folder (node + state dir),
    so two agents on one host (``gpupool up``) never share one."""

    def __init__(
        self,
        hierarchy: Hierarchy,
        group: str,
        pids_max: int = 4096,
        tenant_pids_max: int = 0,
        node_mem_mib: int = 0,
        node_pids_max: int = 0,
    ):
        self.hierarchy = hierarchy
        self.group = group
        self.pids_max = pids_max
        self.tenant_pids_max = tenant_pids_max  # all of a tenant's workloads (0: no ceiling)
        # all of this agent's workloads together (0: none): what the node offers the pool,
        # so the agent, the server and the system keep the rest
        self.node_mem_mib = node_mem_mib
        self.node_pids_max = node_pids_max

    @property
    def enabled(self) -> bool:
        return self.hierarchy.version is not None

    def tenant_folder(self, tenant: str) -> str:
        """``tenant-<name>`` (a hash where the name is not a safe folder name)."""
        if re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", tenant) and tenant not in (".", ".."):
            return f"tenant-{tenant}"
        return "tenant-" + hashlib.sha256(tenant.encode()).hexdigest()[:16]

    def paths(self, alloc_id: int, tenant: str | None = None) -> list[Path]:
        middle = (self.tenant_folder(tenant),) if tenant is not None else ()
        return [
            base.joinpath(self.group, *middle, f"alloc-{alloc_id}")
            for base in self.hierarchy.bases.values()
        ]

    def create(
        self,
        alloc_id: int,
        cpu_millis: int,
        mem_mib: int,
        tenant: str | None = None,
        pids_max: int | None = None,
    ) -> list[Path]:
        """Make the workload's cgroups with its limits, inside its tenant's folder whose
        ``pids.max`` bounds all of that tenant's processes on the node, inside the agent's
        folder that bounds all of its workloads; returns their paths."""
        if not self.enabled:
            return []
        paths = self.paths(alloc_id, tenant)
        if self.hierarchy.version == 2:
            _enable_controllers(self.hierarchy.root, paths[0].parent)
        out = []
        for controller, path in zip(self.hierarchy.bases, paths, strict=True):
            path.mkdir(parents=True, exist_ok=True)
            self._node_limits(controller, self.hierarchy.bases[controller] / self.group)
            if tenant is not None and controller in ("", "pids") and self.tenant_pids_max > 0:
                _write(path.parent / "pids.max", str(self.tenant_pids_max))
            self._limit(controller, path, cpu_millis, mem_mib, pids_max or self.pids_max)
            out.append(path)
        return out

    def remove_all(self) -> None:
        """The agent's folders, once none of its workloads runs (its stop, or ``gpupool up``'s):
        nothing of it is left in the hierarchy."""
        prune([base / self.group for base in self.hierarchy.bases.values()])

    def _node_limits(self, controller: str, folder: Path) -> None:
        memory, pids = self.node_mem_mib * 1024 * 1024, self.node_pids_max
        if self.hierarchy.version == 2:
            if memory > 0:
                _write(folder / "memory.max", str(memory))
            if pids > 0:
                _write(folder / "pids.max", str(pids))
        elif controller == "memory" and memory > 0:
            _write(folder / "memory.limit_in_bytes", str(memory))
        elif controller == "pids" and pids > 0:
            _write(folder / "pids.max", str(pids))

    def _limit(
        self, controller: str, path: Path, cpu_millis: int, mem_mib: int, pids_max: int
    ) -> None:
        quota = cpu_millis * CFS_PERIOD_US // 1000
        memory = mem_mib * 1024 * 1024
        if self.hierarchy.version == 2:
            if quota > 0:
                _write(path / "cpu.max", f"{quota} {CFS_PERIOD_US}")
            if memory > 0:
                _write(path / "memory.max", str(memory))
                if (path / "memory.swap.max").exists():
                    _write(path / "memory.swap.max", "0")
            _write(path / "pids.max", str(pids_max))
        elif controller == "cpu" and quota > 0:
            _write(path / "cpu.cfs_period_us", str(CFS_PERIOD_US))
            _write(path / "cpu.cfs_quota_us", str(quota))
        elif controller == "memory" and memory > 0:
            _write(path / "memory.limit_in_bytes", str(memory))
        elif controller == "pids":
            _write(path / "pids.max", str(pids_max))


def join(paths: list[str], pid: int) -> None:
    """Move ``pid`` into each cgroup (the shim does this for itself before the command)."""
    for path in paths:
        _write(Path(path) / "cgroup.procs", str(pid))


def members(paths: list[str] | list[Path]) -> set[int]:
    pids: set[int] = set()
    for path in paths:
        with contextlib.suppress(OSError, ValueError):
            pids |= {int(x) for x in (Path(path) / "cgroup.procs").read_text().split()}
    return pids


def kill(paths: list[str] | list[Path], sig: int = signal.SIGKILL, spare: int = 0) -> int:
    """Signal every process in the cgroups but ``spare``; returns how many were signalled."""
    count = 0
    for pid in members(paths) - {spare}:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
            count += 1
    return count


def remove(paths: list[str] | list[Path], wait_s: float = 2.0) -> None:
    """Remove the cgroups once their processes are gone (killed ones take a moment to exit);
    one still busy after ``wait_s`` stays behind, empty of our concern."""
    deadline = time.monotonic() + wait_s
    while members(paths) and time.monotonic() < deadline:
        time.sleep(0.02)
    for path in paths:
        try:
            Path(path).rmdir()
        except OSError as exc:
            if exc.errno not in (errno.ENOENT, errno.EBUSY):
                raise


def remove_parents(paths: list[str]) -> None:
    """Remove the folders these cgroups were in (a tenant's) once nothing else is in them;
    their other workloads' cgroups stay untouched, empty or not (one that ended and is not
    yet harvested still tells why it ended)."""
    for parent in {Path(path).parent for path in paths}:
        with contextlib.suppress(OSError):
            parent.rmdir()


def prune(folders: list[Path]) -> None:
    """Remove these folders and the empty cgroup folders below them, deepest first (one with
    a process in it, or a child still busy, stays)."""
    for top in folders:
        if not top.is_dir():
            continue
        for folder in sorted((p for p in top.rglob("*") if p.is_dir()), reverse=True):
            with contextlib.suppress(OSError):
                folder.rmdir()
        with contextlib.suppress(OSError):
            top.rmdir()


def _counters(path: Path, name: str) -> dict[str, int]:
    out: dict[str, int] = {}
    with contextlib.suppress(OSError, ValueError):
        for line in (path / name).read_text().splitlines():
            key, _, value = line.partition(" ")
            out[key] = int(value)
    return out


def oom_cause(paths: list[str] | list[Path]) -> str | None:
    """Why the kernel's OOM killer took a process of these cgroups, if it did: ``"limit"``
    when the workload reached its own memory limit, ``"node"`` when it was picked because
    the node (or all of the agent's workloads together) ran short while it stayed under it."""
    killed = limit = False
    for path in map(Path, paths):
        v2 = _counters(path, "memory.events")  # oom: this cgroup's own limit was hit
        v1 = _counters(path, "memory.oom_control")
        killed |= v2.get("oom_kill", 0) > 0 or v1.get("oom_kill", 0) > 0
        limit |= v2.get("oom", 0) > 0
        if v1:  # v1 counts limit hits in failcnt, charged to the cgroup whose limit it was
            with contextlib.suppress(OSError, ValueError):
                limit |= int((path / "memory.failcnt").read_text()) > 0
    if not killed:
        return None
    return "limit" if limit else "node"

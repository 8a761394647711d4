"""Small hand-made clusters, an independent loop-based fit oracle, and a CLI runner."""

import os
import subprocess
import sys
from pathlib import Path

from gpupool.model import (
    Node,
    ResourceRequest,
    SharingMode,
    SliceKind,
    Topology,
    make_devices,
    model_matches,
)
from gpupool.scheduler import ClusterState
from gpupool.scheduler.state import MODE_CODES
from gpupool.sharing import free_starts
from tests.support.cli import Ran, run_in_process


def node(
    name: str,
    model: str = "A100-80G",
    cards: int = 4,
    *,
    cpu: int = 64,
    mem_gib: int = 512,
    mode: SharingMode = SharingMode.WHOLE,
    island_size: int | None = None,
) -> Node:
    devices = make_devices(model, cards, mode=mode, node=name, island_size=island_size)
    return Node(name, cpu * 1000, mem_gib * 1024, devices)


def fits_somewhere(state: ClusterState, r: ResourceRequest) -> bool:
    """Brute force over every node and device with plain loops: could ``r`` be placed now?"""
    return any(fits_on(state, row, r) for row in range(state.size))


def fits_on(state: ClusterState, row: int, r: ResourceRequest) -> bool:
    if state.cpu_free[row] < r.cpu_millis or state.mem_free[row] < r.mem_mib:
        return False
    if r.kind is SliceKind.NONE:
        return True
    node_ = state.nodes[row]
    units = 0
    islands: dict[int, int] = {}
    for dev in node_.devices:
        col = state.column[(row, dev.index)]
        if not dev.healthy:
            continue
        if r.vendor is not None and dev.vendor != r.vendor:
            continue
        if r.gpu_model and not model_matches(r.gpu_model, dev.model):
            continue
        mode = int(state.mode[row, col])
        if r.kind is SliceKind.WHOLE:
            if mode == MODE_CODES[SharingMode.MIG] or (r.gpu_mem_mib or 0) > dev.memory_mib:
                continue
            idle = (
                not state.exclusive[row, col]
                and state.sharers[row, col] == 0
                and state.mem_used[row, col] == 0
            )
            if idle:
                units += 1
                if dev.island is not None:
                    islands[dev.island] = islands.get(dev.island, 0) + 1
        elif r.kind is SliceKind.SHARE:
            if mode != MODE_CODES[SharingMode.SHARE] or state.exclusive[row, col]:
                continue
            if state.sharers[row, col] >= state.share.max_sharers:
                continue
            grantable = state.share.usable_mib(dev.memory_mib)
            need = (
                r.gpu_mem_mib
                if r.gpu_mem_mib is not None
                else (grantable * (r.gpu_share_pct or 0) // 100)
            )
            if grantable - state.mem_used[row, col] < need:
                continue
            if state.compute_free[row, col] < (r.gpu_share_pct or 0):
                continue
            units += 1
        else:
            table = state.mig_tables[int(state.model[row, col])]
            if mode != MODE_CODES[SharingMode.MIG] or table is None or not table.has(r.mig_profile):
                continue
            units += len(free_starts(int(state.mig_used[row, col]), table.profile(r.mig_profile)))
    if r.kind is SliceKind.WHOLE and r.topology is Topology.NVLINK:
        return max(islands.values(), default=0) >= r.gpu
    return units >= r.gpu


def gpupool(
    *args: str,
    timeout: int = 180,
    env: dict[str, str] | None = None,
    stdin: str | None = None,
    cwd: Path | None = None,
    process: bool = False,
) -> "subprocess.CompletedProcess[str] | Ran":
    """Run the CLI as a user does: in this process (``tests.support.cli``), or with
    ``process`` a real one, output captured."""
    if not process:
        return run_in_process(list(args), env, stdin, cwd)
    return subprocess.run(
        [sys.executable, "-m", "gpupool.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=None if env is None else {**os.environ, **env},
        input=stdin,
        cwd=cwd,
    )

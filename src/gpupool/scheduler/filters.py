"""Feasibility filters: which nodes and devices can take an ask, and why the others cannot.

Each filter narrows a device mask (N x G). The fast path only keeps the final masks; when a
job fits nowhere, ``explain`` runs the same filters again and charges each rejected node to
the first filter that rejected it, as kube-scheduler does
("0/5000 nodes: 4210 insufficient gpu memory, 790 no A100-80G").
"""

from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpupool.model import SliceKind, Topology
from gpupool.scheduler.ask import Ask
from gpupool.scheduler.host_memory import mem_need, takes_memory
from gpupool.scheduler.state import MODE_CODES, ClusterState, row_any, row_count
from gpupool.sharing import SharingMode

CACHE_MIN_NODES = 2048
CACHE_ASKS = 256  # device parts whose feasibility a snapshot keeps
_MIG = MODE_CODES[SharingMode.MIG]
_SHARE = MODE_CODES[SharingMode.SHARE]


@dataclass(slots=True)
class Feasibility:
    node_ok: np.ndarray  # (N,) nodes that can take the whole ask alone
    dev_ok: np.ndarray | None  # (N, G) devices that can take one unit of it
    # (N,) units (devices / MIG instances) each node can take; None for one whole card or
    # one share (node_ok says it all)
    units: np.ndarray | None
    need_mem: np.ndarray | None = None  # (N, G) memory a share takes on each device (static)
    masked: bool = False  # some nodes were masked out beyond their own state
    # (N,) the nodes whose devices can take the ask before host CPU and memory are checked;
    # None: node_ok is that already (an ask without cpu/mem, or a small snapshot)
    device_nodes: np.ndarray | None = None


class _Steps:
    """Collects (reason, node mask) pairs in explain mode; does nothing on the fast path."""

    def __init__(self, explain: bool):
        self.explain = explain
        self.items: list[tuple[str, np.ndarray]] = []

    def node(self, reason: str, ok: np.ndarray) -> None:
        if self.explain:
            self.items.append((reason, ok))

    def dev(self, reason: str, dev: np.ndarray) -> None:
        if self.explain:
            self.items.append((reason, row_any(dev)))


HOST_REASONS = ("insufficient cpu", "insufficient memory")
HELD_WHOLE = "held whole by an exclusive job"
_FAST = _Steps(explain=False)  # records nothing, so one instance serves every call


def feasibility(state: ClusterState, ask: Ask, allowed: np.ndarray | None = None) -> Feasibility:
    """Nodes and devices that can take ``ask`` now; ``allowed`` masks nodes out (reservations).

    The device part of an ask (``Ask.device_part``: the ask without host CPU and memory) is
    cached on the snapshot and refreshed only for the nodes whose version moved since (one
    node per placement); host CPU and memory are then checked per call over all nodes (two
    vector comparisons). So asks that differ only in cpu/mem — every job of a real queue,
    nearly — share one cached entry. The cache keeps the ``CACHE_ASKS`` most recent device
    parts (bounded memory however many distinct requests pass). The returned object may be
    shared with the cache: callers must not modify it.
    """
    if state.size < CACHE_MIN_NODES:  # small snapshots: recomputing is cheaper
        fe = _run(state, ask, _FAST, host=True)
        return fe if allowed is None else _masked(fe, allowed)
    fe = _device_feasibility(state, ask.device_part)
    mem = mem_need(state, ask)
    if ask.cpu or takes_memory(mem):
        host = _host_ok(state, ask.cpu, mem)
        fe = Feasibility(
            fe.node_ok & host, fe.dev_ok, fe.units, fe.need_mem, device_nodes=fe.node_ok
        )
    return fe if allowed is None else _masked(fe, allowed)


def _host_ok(state: ClusterState, cpu: int, mem: int | np.ndarray) -> np.ndarray:
    if cpu and takes_memory(mem):
        return (state.cpu_free >= cpu) & (state.mem_free >= mem)
    if cpu:
        return state.cpu_free >= cpu
    return state.mem_free >= mem


def _device_feasibility(state: ClusterState, core: Ask) -> Feasibility:
    cache = state.feasibility_cache
    entry = cache.get(id(core))
    if entry is None or entry[0] is not core:
        fe = _run(state, core, _FAST)
        cache[id(core)] = (core, fe, state.version.copy())
        while len(cache) > CACHE_ASKS:
            cache.pop(next(iter(cache)))  # the oldest entry
        return fe
    cache[id(core)] = cache.pop(id(core))  # most recently used last
    _, fe, seen = entry
    changed = (seen != state.version).nonzero()[0]
    if changed.size * 4 > state.size:
        fe = _run(state, core, _FAST)
        cache[id(core)] = (core, fe, state.version.copy())
    elif changed.size:
        part = _run(_Rows(state, changed), core, _FAST, changed)
        fe.node_ok[changed] = part.node_ok
        if fe.dev_ok is not None and part.dev_ok is not None:
            fe.dev_ok[changed] = part.dev_ok
        if fe.units is not None and part.units is not None:
            fe.units[changed] = part.units
        seen[changed] = state.version[changed]
    return fe


def _masked(fe: Feasibility, allowed: np.ndarray) -> Feasibility:
    units = None if fe.units is None else np.where(allowed, fe.units, 0)
    return Feasibility(
        fe.node_ok & allowed, fe.dev_ok, units, fe.need_mem, masked=True, device_nodes=None
    )


class _Rows:
    """The snapshot restricted to some node rows, read through the same attribute names."""

    def __init__(self, state: ClusterState, rows: np.ndarray):
        self._state = state
        self._rows = rows
        self.size = int(rows.size)
        self.share = state.share
        self.max_islands = state.max_islands

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._state, name)
        if isinstance(value, np.ndarray):
            value = value[self._rows]
            setattr(self, name, value)
        return value


def explain(
    state: ClusterState, ask: Ask, allowed: np.ndarray | None = None, masked: str = ""
) -> tuple[str, Counter[str]]:
    """The aggregated reason why ``ask`` fits nowhere, and per-reason node counts.
    Nodes outside ``allowed`` are charged to ``masked`` first."""
    steps = _Steps(explain=True)
    if allowed is not None:
        steps.node(masked or "not available to this job", allowed)
    _run(state, ask, steps, host=True)
    # a node is charged to the devices it lacks before its host CPU or memory: the cards are
    # the blocker a user can act on (a default memory follows from them)
    host = [item for item in steps.items if item[0] in HOST_REASONS]
    steps.items = [item for item in steps.items if item[0] not in HOST_REASONS] + host
    counts: Counter[str] = Counter()
    remaining = np.ones(state.size, dtype=bool)
    for reason, ok in steps.items:
        rejected = int((remaining & ~ok).sum())
        if rejected:
            counts[reason] += rejected
        remaining &= ok
    fit = int(remaining.sum())
    ranked = sorted(counts.items(), key=lambda x: (-x[1], x[0]))
    parts = ", ".join(f"{n} {r}" for r, n in ranked) or "no nodes in the pool"
    return f"{fit}/{state.size} nodes: {parts}", counts


def _run(
    state: "ClusterState | _Rows",
    ask: Ask,
    steps: _Steps,
    rows: np.ndarray | None = None,
    host: bool = False,
) -> Feasibility:
    """The filters over ``state`` (a snapshot, or ``_Rows`` of one with ``rows`` given);
    ``host``: the ask is a whole one (not only its cached device part), so a default memory
    applies to it."""
    static = ask.static_dev if rows is None else ask.static_dev[rows]
    if steps.explain:
        steps.node("drained, lost or fenced", ~state.closed | state.behind)
        steps.node("its agent behind", ~state.behind)
    open_nodes = ~state.whole_held if state.whole_count else None
    if open_nodes is not None:
        steps.node(HELD_WHOLE, open_nodes)
    mem = mem_need(state, ask) if host else ask.mem
    if steps.explain or (ask.cpu and takes_memory(mem)):
        cpu_ok = state.cpu_free >= ask.cpu
        mem_ok = state.mem_free >= mem
        steps.node("insufficient cpu", cpu_ok)
        steps.node("insufficient memory", mem_ok)
        node_ok = cpu_ok & mem_ok
    elif ask.cpu:
        node_ok = state.cpu_free >= ask.cpu
    elif takes_memory(mem):
        node_ok = state.mem_free >= mem
    else:
        node_ok = state.usable_node  # nothing but devices asked: every node so far
    if open_nodes is not None:
        node_ok = node_ok & open_nodes
    if ask.request.whole_node:
        return _whole_node(state, ask, steps, node_ok, static)
    if ask.kind is SliceKind.NONE:
        return Feasibility(node_ok.copy() if node_ok is state.usable_node else node_ok, None, None)

    if steps.explain:
        dev = ask.model_ok[state.model]
        if ask.min_device_mib:
            dev &= state.dev_mem >= ask.min_device_mib
        steps.dev(f"no {ask.what}", dev)
        if ask.kind is SliceKind.MIG:
            dev &= state.mode == _MIG
            steps.dev(f"no MIG-enabled {ask.what}", dev)
        elif ask.kind is SliceKind.SHARE:
            dev &= state.mode == _SHARE
            steps.dev(f"no shared-mode {ask.what}", dev)
        else:
            dev &= state.mode != _MIG
            steps.dev(f"no {ask.what} outside MIG mode", dev)
        dev &= state.healthy
        steps.dev(f"no healthy {ask.what}", dev)
    elif ask.kind is SliceKind.WHOLE:
        dev = static & state.idle
    elif ask.kind is SliceKind.SHARE:
        dev = static & state.open_share
    else:
        dev = static.copy()

    need_mem = None
    units: np.ndarray | None
    if ask.kind is SliceKind.WHOLE:
        if steps.explain:
            dev &= state.idle
        if ask.topology is Topology.NVLINK:
            units = row_count(dev)
            enough = best_island(state, dev) >= ask.count
            steps.node(f"no NVLink island with {ask.count} free {ask.what}", enough)
        else:
            units, enough = _units(dev, ask.count)
            steps.node(_fewer(ask), enough)
    elif ask.kind is SliceKind.SHARE:
        if steps.explain:
            dev &= state.open_share
            steps.dev("max sharers reached", dev)
        assert ask.need_mem is not None
        need_mem = ask.need_mem if rows is None else ask.need_mem[rows]
        if ask.mem_mib is None:
            dev &= state.free_mem >= need_mem
        else:
            dev &= state.free_mem >= ask.mem_mib
        steps.dev("insufficient gpu memory", dev)
        if ask.compute_pct:
            dev &= state.compute_free >= ask.compute_pct
            steps.dev("insufficient gpu compute", dev)
        units, enough = _units(dev, ask.count)
        if ask.count > 1:
            steps.node(_fewer(ask), enough)
    else:
        slots = mig_slots(state, ask, dev)
        dev &= slots > 0
        steps.dev(f"no free MIG slot for {ask.request.mig_profile}", dev)
        units = slots.sum(axis=1)
        enough = units >= ask.count
        if ask.count > 1:
            steps.node(_fewer(ask), enough)
    return Feasibility(node_ok & enough, dev, units, need_mem)


def _whole_node(
    state: "ClusterState | _Rows", ask: Ask, steps: _Steps, node_ok: np.ndarray, static: np.ndarray
) -> Feasibility:
    """Nodes a whole-node ask can take: nothing of anyone's on them (no card, CPU or memory
    granted), every card out of MIG mode and healthy, and at least ``ask.count`` cards of the
    ask's model. Its grant is every card of the node (``placer``)."""
    busy = state.exists & (state.exclusive | (state.sharers > 0) | (state.mem_used > 0))
    empty = ~row_any(busy) & (state.cpu_free == state.cpu_cap) & (state.mem_free == state.mem_cap)
    steps.node("not empty", empty)
    whole = ~row_any(state.exists & ~(state.healthy & (state.mode != _MIG)))
    steps.node("MIG-mode or unhealthy cards", whole)
    enough = empty & whole
    if ask.count:
        cards = row_count(static & state.exists)
        steps.node(f"fewer than {ask.count} {ask.what}", cards >= ask.count)
        enough &= cards >= ask.count
    return Feasibility(node_ok & enough, state.exists, None)


def _units(dev: np.ndarray, count: int) -> tuple[np.ndarray | None, np.ndarray]:
    """Devices per node and whether that is ``count``; one device needs no count (None)."""
    if count == 1:
        return None, row_any(dev)
    units = row_count(dev)
    return units, units >= count


def mig_slots(state: "ClusterState | _Rows", ask: Ask, dev: np.ndarray) -> np.ndarray:
    """Per device of ``dev``, how many more instances of the ask's profile fit: a lookup by
    (model, occupancy: a MIG position mask or a vNPU chip's counters)."""
    assert ask.mig_slot_table is not None
    slots: np.ndarray = ask.mig_slot_table[state.model, state.mig_used] * dev
    return slots


def best_island(state: "ClusterState | _Rows", dev: np.ndarray) -> np.ndarray:
    """Per node, the most devices of ``dev`` that share one NVLink island."""
    best = np.zeros(dev.shape[0], dtype=np.int64)
    for island in range(state.max_islands):
        best = np.maximum(best, row_count(dev & (state.island == island)))
    return best


def _fewer(ask: Ask) -> str:
    unit = "MIG slots" if ask.kind is SliceKind.MIG else f"free {ask.what}"
    if ask.count == 1:
        return f"no {unit}"
    return f"fewer than {ask.count} {unit}"

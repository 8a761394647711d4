"""Network topology beyond the node: leaf switch, block (spine), rack and zone, read from node
labels (the vocabulary of Kueue's topology-aware scheduling and Volcano's HyperNode). A job
asking ``topology=leaf`` is placed whole — every gang worker, every node of a spanning
request — under one leaf; ``topology=prefer-leaf`` under one leaf when it can, else under one
block, rack or zone, else anywhere. Domains are tried tightest first (the fewest free matching
cards that still hold the job), which keeps roomy domains for the big gangs to come."""

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from gpupool.model import NETWORK_LEVELS, ResourceRequest, SliceKind, SpecError, Topology
from gpupool.scheduler.ask import Ask
from gpupool.scheduler.state import ClusterState

LABELS: dict[Topology, str] = {
    Topology.LEAF: "topology.gpupool.io/leaf",
    Topology.BLOCK: "topology.gpupool.io/block",
    Topology.RACK: "topology.gpupool.io/rack",
    Topology.ZONE: "topology.kubernetes.io/zone",
}

PLURAL = {Topology.LEAF: "leaves", Topology.BLOCK: "blocks", Topology.RACK: "racks",
          Topology.ZONE: "zones"}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Domain:
    level: Topology
    name: str
    rows: np.ndarray  # bool per node row of the state


def labels_from_file(doc: object) -> dict[str, dict[str, str]]:
    """A topology file's ``nodes: {NAME: {leaf: ..., block: ..., rack: ..., zone: ...}}`` as
    the node labels per node; anything else is a ``SpecError`` naming it."""
    nodes = doc.get("nodes") if isinstance(doc, dict) else None
    if not isinstance(nodes, dict) or not nodes:
        raise SpecError("topology file: expected a 'nodes:' mapping of node names to levels")
    by_name = {str(level): level for level in LABELS}
    out: dict[str, dict[str, str]] = {}
    for name, levels in nodes.items():
        if not isinstance(levels, dict) or not levels:
            raise SpecError(f"topology file: node {name!r}: expected leaf/block/rack/zone: NAME")
        labels = {}
        for key, value in levels.items():
            if key not in by_name:
                known = ", ".join(by_name)
                raise SpecError(f"topology file: node {name!r}: unknown level {key!r} ({known})")
            if not isinstance(value, str | int) or not str(value).strip():
                raise SpecError(f"topology file: node {name!r}: {key} needs a name")
            labels[LABELS[by_name[key]]] = str(value).strip()
        out[str(name)] = labels
    return out


def domains(state: ClusterState, level: Topology) -> list[Domain]:
    """The state's domains at ``level`` (nodes without the label are in none). Cached on the
    state: its nodes never change."""
    cache: dict[Topology, list[Domain]] = state.__dict__.setdefault("_topology_domains", {})
    if level not in cache:
        label = LABELS[level]
        names = [n.labels.get(label) for n in state.nodes]
        cache[level] = [
            Domain(level, name, np.array([n == name for n in names], dtype=bool))
            for name in sorted({n for n in names if n})
        ]
    return cache[level]


def levels_to_try(request: ResourceRequest) -> list[Topology | None]:
    """Required: its level. Preferred: its level, the ones above, then anywhere (None)."""
    if not request.topology_preferred:
        return [request.topology]
    start = NETWORK_LEVELS.index(request.topology)
    return [*NETWORK_LEVELS[start:], None]


def free_cards(state: ClusterState, ask: Ask, rows: np.ndarray) -> int:
    """Devices in ``rows`` that could take one of the ask's slices now (whole asks: idle
    matching cards; partitions and shares: matching cards of the right mode)."""
    dev = ask.static_dev & rows[:, None]
    if ask.kind is SliceKind.WHOLE:
        dev = dev & state.idle
    return int(dev.sum())


def candidates(
    state: ClusterState, ask: Ask, level: Topology, need: int, allowed: np.ndarray | None
) -> Iterator[tuple[Domain, np.ndarray]]:
    """Domains at ``level`` with at least ``need`` free cards (slices and shares: one card
    of the right mode, as one card holds several), tightest first, each with the node mask
    to place in."""
    if ask.kind is not SliceKind.WHOLE:
        need = 1
    scored = []
    for d in domains(state, level):
        rows = d.rows if allowed is None else d.rows & allowed
        free = free_cards(state, ask, rows)
        if free >= need:
            scored.append((free, d.name, d, rows))
    for _, _, d, rows in sorted(scored, key=lambda item: item[:2]):
        yield d, rows


def fewest_leaves(
    state: ClusterState, ask: Ask, need: int, within: np.ndarray | None, tries: int = 3
) -> Iterator[np.ndarray]:
    """For a job larger than any leaf can hold now: unions of the leaves with the most free
    cards, as few as hold ``need`` (then one more, up to ``tries``), so that it spans as few
    leaves as it can. Nothing when no node has a leaf label."""
    scored = []
    for d in domains(state, Topology.LEAF):
        rows = d.rows if within is None else d.rows & within
        scored.append((free_cards(state, ask, rows), d.name, rows))
    scored.sort(key=lambda item: (-item[0], item[1]))
    union = np.zeros(state.size, dtype=bool)
    total = 0
    for free, _, rows in scored:
        if free == 0 or tries == 0:
            return
        union, total = union | rows, total + free
        if total >= need:
            tries -= 1
            yield union.copy()


def attempts(
    state: ClusterState, ask: Ask, request: ResourceRequest, need: int, allowed: np.ndarray | None
) -> Iterator[np.ndarray]:
    """The node masks to try a job in, in order: each level it may use, its domains tightest
    first (above the leaf, each domain's fewest leaves before the whole domain); for a
    preferred level at last the fewest leaves anywhere (the caller then tries anywhere)."""
    for level in levels_to_try(request):
        if level is None:
            yield from fewest_leaves(state, ask, need, allowed)
            return
        for _, rows in candidates(state, ask, level, need, allowed):
            if level is not Topology.LEAF:
                yield from fewest_leaves(state, ask, need, rows)
            yield rows


def refusal(
    state: ClusterState, ask: Ask, level: Topology, need: int, allowed: np.ndarray | None
) -> str:
    """Why no domain at ``level`` held the job, naming the best one."""
    found = domains(state, level)
    plural = PLURAL[level]
    what = "cards" if ask.what == "gpu" else f"{ask.what} cards"
    if not found:
        return f"no node has a {level} label ({LABELS[level]})"
    free = [
        (free_cards(state, ask, d.rows if allowed is None else d.rows & allowed), d.name)
        for d in found
    ]
    best, name = min(free, key=lambda f: (-f[0], f[1]))
    if best >= need:
        return (
            f"{sum(f >= need for f, _ in free)}/{len(found)} {plural} have {need} free "
            f"{what}, but none holds the whole job (cpu, memory or cards per node)"
        )
    return f"0/{len(found)} {plural} hold {need} free {what}; best {level} {name} has {best}"

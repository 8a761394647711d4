"""When the meter runs (issue 57): only while the workload runs. An allocation's node part is
metered from the moment its agent says the workload started there (the agent's own clock,
bounded by the server's) to its end; a grant whose workload has not started costs nothing.

``windows`` is the one rule every writer and every live view applies: each started part from
where metering resumes, or its own start if later, to its end."""

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpupool.server.db.tables import AllocationNodeRow, AllocationRow

Part = str | None  # a node's part of an allocation; None: the whole allocation
Window = tuple[float, float]


def nodes_of(alloc: AllocationRow) -> list[str]:
    return [n["node"] for n in alloc.placement["nodes"]]


def part_starts(session: Session, alloc: AllocationRow) -> dict[str, float]:
    """When each node's part started; a part not started is absent. An allocation on one
    node started when the allocation did (also those granted before per-node starts)."""
    if alloc.started_at is None:
        return {}
    nodes = nodes_of(alloc)
    if len(nodes) == 1:
        return {nodes[0]: alloc.started_at}
    rows = session.execute(
        select(AllocationNodeRow.node, AllocationNodeRow.started_at).where(
            AllocationNodeRow.allocation_id == alloc.id,
            AllocationNodeRow.started_at.is_not(None),
        )
    ).all()
    started = {node: at for node, at in rows if at is not None}
    return {n: started[n] for n in nodes if n in started}


def bounded_start(alloc: AllocationRow, at: float | None, now: float) -> float:
    """The start an agent reported (``at``, its clock; None: ``now``, when the server heard
    it), bounded: never after ``now``, before the grant, or before what is settled already —
    a closed interval (an hourly checkpoint that found nothing running) is not opened again."""
    start = now if at is None else min(at, now)
    settled = alloc.metered_until if alloc.metered_until is not None else alloc.created_at
    return max(start, alloc.created_at, settled)


def metered_from(alloc: AllocationRow) -> float:
    """Where metering resumes: what is settled already, else the workload's start."""
    if alloc.metered_until is not None:
        return alloc.metered_until
    return alloc.started_at if alloc.started_at is not None else alloc.created_at


def windows(
    nodes: list[str], starts: dict[str, float], since: float, ends: dict[Part, float]
) -> dict[Part, Window]:
    """What to meter of each started part: from ``since`` or its own start, whichever is
    later, to its end (``ends`` per node, or under None for every part; never before the
    window's start). A part not started has none. When every part of the allocation has the
    same window, it is one window of the whole (None): the allocation's records."""
    out: dict[Part, Window] = {}
    for node in nodes:
        if node not in starts:
            continue
        end = ends[node] if node in ends else ends[None]
        begin = max(since, starts[node])
        out[node] = (begin, max(begin, end))
    if out and len(out) == len(nodes) and len(set(out.values())) == 1:
        return {None: next(iter(out.values()))}
    return out

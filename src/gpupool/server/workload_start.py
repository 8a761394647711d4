"""A workload's start, as its agent reports it (issue 57): the meter of that node's part runs
from then (``meter_clock``). The agent says when the workload started by its own clock, in the
running report and again with the end (a running report lost with the network still starts the
meter); the server bounds it by its own."""

from sqlalchemy.orm import Session

from gpupool.server.db.tables import AllocationNodeRow, AllocationRow, UsageRow
from gpupool.server.lifecycle import device_models, unmetered_rows, usage_rows
from gpupool.server.meter_clock import bounded_start, nodes_of, part_starts


def start_parts(
    session: Session, alloc: AllocationRow, node: str | None, at: float | None, now: float
) -> bool:
    """Record that ``node``'s part of the live ``alloc`` started at ``at`` (the agent's time;
    None: now). ``node`` None: every part (an older agent's report names none). A part already
    started keeps its start. Returns whether a part started.

    What the parts started before ran until this one's start is metered first and
    ``metered_until`` moves there, in this transaction: each part counts from its own start,
    and a checkpoint that read the allocation before is refused (exactly once)."""
    nodes = nodes_of(alloc)
    started = part_starts(session, alloc)
    new = [n for n in (nodes if node is None else [node]) if n in nodes and n not in started]
    if not new:
        return False
    start = bounded_start(alloc, at, now)
    for usage in unmetered_rows(session, alloc, start):
        session.add(UsageRow(**usage))
    alloc.metered_until = start
    _mark(session, alloc, new, start)
    return True


def late_start(
    session: Session, alloc: AllocationRow, node: str | None, at: float, ended_at: float
) -> bool:
    """A released allocation's part whose start the server never heard (its node was cut off
    as it started, and the server released it unmetered): the agent's late report of its start
    and end meters it, within the release (the workload stopped itself at its lease by then)
    and never into a settled interval. Returns whether records were written."""
    nodes = nodes_of(alloc)
    part = node if node in nodes else (nodes[0] if node is None and len(nodes) == 1 else None)
    released = alloc.released_at
    if alloc.state != "released" or released is None or part is None:
        return False
    if part in part_starts(session, alloc):
        return False  # its start is known: a late end corrects downward only
    if len(nodes) > 1 and session.get(AllocationNodeRow, (alloc.id, part)) is None:
        return False  # nowhere to keep its start: it would be metered again by each report
    start = bounded_start(alloc, at, released)
    end = max(start, min(ended_at, released))
    _mark(session, alloc, [part], start)
    models = device_models(session, alloc.placement)
    for row in usage_rows(alloc, models, start, end, part if len(nodes) > 1 else None):
        session.add(UsageRow(**row))
    return True


def _mark(session: Session, alloc: AllocationRow, nodes: list[str], start: float) -> None:
    if alloc.started_at is None:
        alloc.started_at = start
    for node in nodes:
        row = session.get(AllocationNodeRow, (alloc.id, node))
        if row is not None and row.started_at is None:
            row.started_at = start

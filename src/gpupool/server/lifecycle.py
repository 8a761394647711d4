"""The job state machine and the writes that go with a transition: an event row for every
change, and usage records when an allocation is released (metering, invariant 6) — of the time
its workload ran (``meter_clock``)."""

import math
from collections.abc import Collection
from typing import Any, TypeVar

from sqlalchemy import Select, select, update
from sqlalchemy.orm import Session

from gpupool.server.db.tables import (
    AllocationNodeRow,
    AllocationRow,
    DeviceRow,
    JobEventRow,
    JobRow,
    Meta,
    UsageRow,
)
from gpupool.server.meter_clock import Part, metered_from, nodes_of, part_starts, windows
from gpupool.server.metering import Card, meter

TRANSITIONS: dict[str, frozenset[str]] = {
    "pending": frozenset({"admitted", "cancelled", "failed"}),
    # -> pending: requeued by a person (scontrol requeue)
    "admitted": frozenset(
        {"running", "pending", "preempted", "lost", "succeeded", "failed", "cancelled"}
    ),
    "running": frozenset({"pending", "preempted", "lost", "succeeded", "failed", "cancelled"}),
    "preempted": frozenset({"pending", "failed", "cancelled"}),
    "lost": frozenset({"pending", "failed", "cancelled"}),
    "succeeded": frozenset(),
    "failed": frozenset(),
    "cancelled": frozenset(),
}
TERMINAL = frozenset(s for s, nxt in TRANSITIONS.items() if not nxt)
HOLDING = ("admitted", "running")  # states that hold an active allocation


class TransitionError(Exception):
    """A transition the state machine does not allow (the API answers 409)."""


def move(session: Session, job: JobRow, to: str, now: float, reason: str, actor: str) -> None:
    """Move ``job`` (loaded in this transaction) to ``to`` and record the event."""
    if to not in TRANSITIONS[job.state]:
        raise TransitionError(f"job {job.id}: cannot go from {job.state} to {to}")
    session.add(
        JobEventRow(
            job_id=job.id, time=now, from_state=job.state, to_state=to, reason=reason, actor=actor
        )
    )
    job.state = to
    job.reason = reason
    job.wait_code = ""  # a cycle judges it again
    if to == "pending":
        job.queued_at = now
    elif to == "running" and job.started_at is None:
        job.started_at = now
    elif to in TERMINAL:
        job.finished_at = now


def active_allocation(session: Session, job_id: int) -> AllocationRow | None:
    return session.execute(
        select(AllocationRow)
        .where(AllocationRow.job_id == job_id, AllocationRow.state == "active")
        .with_for_update()
    ).scalar_one_or_none()


def release(
    session: Session,
    alloc: AllocationRow,
    now: float,
    reason: str,
    metered_to: float | None = None,
    part: str | None = None,
) -> None:
    """End an allocation and meter what its workload ran since its last checkpoint, one usage
    record per device model (none for a part whose workload never started: a grant released
    before it started costs nothing). ``metered_to``: when its workload really stopped, if
    known earlier than now (the agent's report of its end, a lost node's lease); never after
    now. ``part``: the node that end is known for, when the allocation spans nodes — the other
    nodes' parts ran until now (they stop on the release), so each part is metered to its own
    end.

    When an end lies before the last checkpoint — a checkpoint ran while the agent could not
    yet report the end (the server or the agent had been down) — the records past it are
    corrected: every record of the allocation that reaches past it is replaced by ones over
    [its start, each part's end), so nothing is billed past a part's real end and the records
    stay back to back."""
    alloc.state = "released"
    alloc.released_at = now
    alloc.release_reason = reason
    end = now if metered_to is None else max(alloc.created_at, min(now, metered_to))
    nodes = nodes_of(alloc)
    if part in nodes and len(nodes) > 1:
        _meter_parts(session, alloc, {n: end if n == part else now for n in nodes})
    else:
        _meter_parts(session, alloc, {None: end})


def _meter_parts(session: Session, alloc: AllocationRow, ends: dict[Part, float]) -> None:
    """Usage records of each started part from the allocation's last checkpoint (or the
    part's start) to its end (``ends``: per node, or under None for every part), replacing
    the records that reach past the earliest end."""
    nodes, starts = nodes_of(alloc), part_starts(session, alloc)
    ran = [ends[n] if n in ends else ends[None] for n in nodes if n in starts]
    if not ran:
        return  # no workload started: nothing to meter
    cut = _unmeter_after(session, alloc, min(ran))
    since = metered_from(alloc) if cut is None else cut
    models = device_models(session, alloc.placement)
    for part, (start, end) in windows(nodes, starts, since, ends).items():
        for row in usage_rows(alloc, models, start, end, part):
            session.add(UsageRow(**row))


def meter_to_reported_end(
    session: Session, alloc: AllocationRow, ended_at: float, node: str | None = None
) -> bool:
    """A released allocation's agent reports, late, when its workload really ended: its node
    was cut off and the server released it metered to the lease's end (the latest the
    workload could have run), or to the release for a part of a job spanning nodes. Bill that
    part (``node``'s; the whole allocation on one node) to the reported end where that is
    earlier; never later, which the lease rules out (an agent's clock ahead of the server's
    must not add time). Returns whether records changed."""
    nodes = nodes_of(alloc)
    if alloc.state != "released" or (len(nodes) > 1 and node not in nodes):
        return False
    end = max(alloc.created_at, ended_at)
    rows = list(
        session.execute(select(UsageRow).where(UsageRow.allocation_id == alloc.id)).scalars()
    )
    part = node if len(nodes) > 1 else None  # one node's allocation: metered as a whole
    parts = nodes if part is not None else [None]
    metered: dict[Part, float] = {
        p: max((r.end for r in rows if p is None or r.node in (p, None)), default=end)
        for p in parts
    }
    if metered[part] <= end:
        return False
    _meter_parts(session, alloc, {**metered, part: end})
    return True


def _unmeter_after(session: Session, alloc: AllocationRow, end: float) -> float | None:
    """Delete the allocation's usage records from the earliest start of those that reach past
    ``end`` on (the last pieces, every part's); returns that start, where metering begins
    again (None when no record reaches past ``end``)."""
    rows = list(
        session.execute(select(UsageRow).where(UsageRow.allocation_id == alloc.id)).scalars()
    )
    over = [row.start for row in rows if row.end > end]
    if not over:
        return None
    for row in rows:
        if row.start >= min(over):
            session.delete(row)
    session.flush()
    return min(over)


def metered_seconds(start: float, end: float) -> int:
    """Whole seconds of [start, end): floor(end) - floor(start), so the pieces of a lifetime
    cut at checkpoints add up to exactly the lifetime's (no second lost or counted twice)."""
    return max(0, math.floor(end) - math.floor(start))


def usage_rows(
    alloc: AllocationRow,
    models: dict[tuple[str, int], Card],
    start: float,
    end: float,
    node: str | None = None,
) -> list[dict]:
    """The usage records of ``alloc`` (of ``node``'s part of it) over [start, end)."""
    seconds = metered_seconds(start, end)
    placement = alloc.placement
    if node is not None:
        placement = {**placement, "nodes": [n for n in placement["nodes"] if n["node"] == node]}
    return [
        {
            "tenant": alloc.tenant,
            "job_id": alloc.job_id,
            "allocation_id": alloc.id,
            "start": start,
            "end": end,
            "node": node,
            **record,
        }
        for record in meter(placement, models, seconds)
    ]


def unmetered_rows(
    session: Session,
    alloc: AllocationRow,
    until: float,
    since: float | None = None,
    models: dict[tuple[str, int], Card] | None = None,
) -> list[dict]:
    """The usage records of what a live allocation's workload ran since its last checkpoint
    (from ``since`` if later), up to ``until``: live use no record holds yet (none before
    its workload started)."""
    starts = part_starts(session, alloc)
    if not starts:
        return []
    begin = metered_from(alloc) if since is None else max(since, metered_from(alloc))
    out: list[dict] = []
    for part, (start, end) in windows(nodes_of(alloc), starts, begin, {None: until}).items():
        if end > start:
            if models is None:
                models = device_models(session, alloc.placement)
            out += usage_rows(alloc, models, start, end, part)
    return out


def device_models(session: Session, placement: dict) -> dict[tuple[str, int], Card]:
    """Model and memory of every device a placement touches."""
    keys = {(n["node"], d["device"]) for n in placement["nodes"] for d in n["devices"]}
    if not keys:
        return {}
    rows = session.execute(
        select(DeviceRow.node, DeviceRow.index, DeviceRow.model, DeviceRow.memory_mib).where(
            DeviceRow.node.in_({k[0] for k in keys})
        )
    )
    return {(n, i): Card(m, mem) for n, i, m, mem in rows if (n, i) in keys}


_Query = TypeVar("_Query", bound="Select[*tuple[Any, ...]]")


def live_on(query: _Query, node: str | Collection[str]) -> _Query:
    """``query`` (over ``AllocationRow``) narrowed to the live allocations touching ``node``
    (or any of several nodes: one row per allocation and node it touches)."""
    on = (
        AllocationNodeRow.node == node
        if isinstance(node, str)
        else AllocationNodeRow.node.in_(node)
    )
    return query.join(AllocationNodeRow, AllocationNodeRow.allocation_id == AllocationRow.id).where(
        on, AllocationRow.state == "active"
    )


def held_devices(session: Session, node: str | None = None) -> set[tuple[str, int]]:
    """(node, device) pairs live allocations hold any part of — on ``node``, or anywhere."""
    everywhere = select(AllocationRow.placement).where(AllocationRow.state == "active")
    query = everywhere if node is None else live_on(select(AllocationRow.placement), node)
    held: set[tuple[str, int]] = set()
    for (placement,) in session.execute(query):
        for n in placement["nodes"]:
            if node is None or n["node"] == node:
                held.update((n["node"], d["device"]) for d in n["devices"])
    return held


def bump_nodes_version(session: Session) -> None:
    session.execute(update(Meta).where(Meta.id == 1).values(nodes_version=Meta.nodes_version + 1))


def finish(
    session: Session,
    job: JobRow,
    to: str,
    now: float,
    reason: str,
    actor: str,
    metered_to: float | None = None,
    part: str | None = None,
) -> AllocationRow | None:
    """Move a job to a terminal (or requeue) state, releasing its allocation if it holds one
    (metered up to ``metered_to`` when its workload — ``part``'s, of a job spanning nodes — is
    known to have stopped earlier)."""
    alloc = active_allocation(session, job.id) if job.state in HOLDING else None
    move(session, job, to, now, reason, actor)
    if alloc is not None:
        release(session, alloc, now, reason, metered_to, part)
    return alloc

"""Metering in closed intervals: live allocations are metered up to each hour's start (UTC),
so a billing month (in any time zone a whole number of hours from UTC) closes while jobs run.

Exactly once: a checkpoint moves an allocation's ``metered_until`` forward with a conditional
update in the transaction that writes its records, so two servers (a fail-over) or a retried
checkpoint never meter an interval twice, and ``release`` meters only from ``metered_until``.
Only what the workload ran is metered (``meter_clock``): an allocation whose workload has not
started is settled with no record, so its month closes and a start reported later is not
billed back into it; a part starting moves ``metered_until`` too, so a checkpoint that read the
allocation before it is refused and leaves it to the next.
"""

import math

from sqlalchemy import ColumnElement, or_, select, update
from sqlalchemy.orm import Session

from gpupool.server.db.rows_changed import rows_changed
from gpupool.server.db.tables import AllocationRow, UsageRow
from gpupool.server.lifecycle import unmetered_rows

INTERVAL_S = 3600


def boundary(now: float, interval: int = INTERVAL_S) -> float:
    """The latest checkpoint time not after ``now``."""
    return float(math.floor(now / interval) * interval)


def checkpoint(session: Session, now: float, interval: int = INTERVAL_S) -> int:
    """Meter every live allocation up to the last boundary; returns how many got records
    (those whose workload has not started are settled with none)."""
    until = boundary(now, interval)
    table = AllocationRow.__table__.c
    due = session.execute(
        select(AllocationRow).where(
            AllocationRow.state == "active",
            AllocationRow.created_at < until,
            or_(AllocationRow.metered_until.is_(None), AllocationRow.metered_until < until),
        )
    ).scalars()
    done = 0
    for alloc in due:
        moved = rows_changed(
            session,
            update(AllocationRow.__table__)
            .where(
                table.id == alloc.id,
                table.state == "active",
                _same(table.metered_until, alloc.metered_until),
                _same(table.started_at, alloc.started_at),
            )
            .values(metered_until=until),
        )
        if moved != 1:  # released, started or checkpointed by another writer meanwhile
            continue
        # read after the update holds the row: a part started since the read above is seen
        # (its report waits for this transaction otherwise, and then starts at ``until``)
        rows = unmetered_rows(session, alloc, until)
        if rows:
            session.execute(UsageRow.__table__.insert(), rows)
            done += 1
    session.expire_all()
    return done


def _same(column: ColumnElement, seen: float | None) -> ColumnElement[bool]:
    """``column`` still holds what was read (a conditional update's guard)."""
    return column.is_(None) if seen is None else column == seen

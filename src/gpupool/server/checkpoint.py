"""Metering in closed intervals: live allocations are metered up to each hour's start (UTC),
so a billing month (in any time zone a whole number of hours from UTC) closes while jobs run.

Exactly once: a checkpoint moves an allocation's ``metered_until`` forward with a conditional
update in the transaction that writes its records, so two servers (a fail-over) or a retried
checkpoint never meter an interval twice, and ``release`` meters only from ``metered_until``.
"""

import math

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from gpupool.server.db.rows_changed import rows_changed
from gpupool.server.db.tables import AllocationRow, UsageRow
from gpupool.server.lifecycle import device_models, metered_from, usage_rows

INTERVAL_S = 3600


def boundary(now: float, interval: int = INTERVAL_S) -> float:
    """The latest checkpoint time not after ``now``."""
    return float(math.floor(now / interval) * interval)


def checkpoint(session: Session, now: float, interval: int = INTERVAL_S) -> int:
    """Meter every live allocation up to the last boundary; returns how many were."""
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
        start = metered_from(alloc)
        unchanged = (
            table.metered_until.is_(None)
            if alloc.metered_until is None
            else table.metered_until == alloc.metered_until
        )
        moved = rows_changed(
            session,
            update(AllocationRow.__table__)
            .where(table.id == alloc.id, table.state == "active", unchanged)
            .values(metered_until=until),
        )
        if moved != 1:  # released or checkpointed by another writer meanwhile
            continue
        rows = usage_rows(alloc, device_models(session, alloc.placement), start, until)
        session.execute(UsageRow.__table__.insert(), rows)
        done += 1
    session.expire_all()
    return done

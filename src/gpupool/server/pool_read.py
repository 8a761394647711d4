"""Read the pool as ``gpupool.server.pool_view`` needs it, and keep its history: the leader
writes one sample per model every ``sample_interval_s`` and forgets samples after 8 days."""

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from gpupool.server.db.tables import AllocationRow, DeviceRow, NodeRow, PoolSampleRow
from gpupool.server.pool_view import Card, Live, holders, sample

KEEP_S = 8 * 86400


def read_cards(s: Session) -> list[Card]:
    nodes = {n.name: n for n in s.execute(select(NodeRow)).scalars()}
    out = []
    for d in s.execute(select(DeviceRow).order_by(DeviceRow.node, DeviceRow.index)).scalars():
        n = nodes.get(d.node)
        if n is None:
            continue
        out.append(
            Card(
                d.node,
                n.pool,
                d.index,
                d.model,
                d.vendor,
                d.mode,
                d.memory_mib,
                d.healthy,
                n.state,
                n.schedulable,
                dict(d.telemetry or {}),
            )
        )
    return out


def read_live(s: Session) -> list[Live]:
    q = select(
        AllocationRow.job_id, AllocationRow.tenant, AllocationRow.borrowed, AllocationRow.placement
    ).where(AllocationRow.state == "active")
    return [Live(*row) for row in s.execute(q)]


def record_sample(s: Session, now: float) -> int:
    """Write the pool's sample for ``now``; returns how many rows (one per model)."""
    cards = read_cards(s)
    held = holders(read_live(s), lambda _: True)
    rows = [PoolSampleRow(time=now, **entry) for entry in sample(cards, held, now)]
    s.add_all(rows)
    s.execute(delete(PoolSampleRow).where(PoolSampleRow.time < now - KEEP_S))
    return len(rows)

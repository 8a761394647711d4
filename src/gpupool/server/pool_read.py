"""Read the pool as ``gpupool.server.pool_view`` needs it, and keep its history: the leader
writes one sample per model every ``sample_interval_s`` and forgets samples after 8 days."""

from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from gpupool.server.db.tables import AllocationRow, DeviceRow, NodeRow, PoolSampleRow
from gpupool.server.pool_view import Card, Live, holders, sample

KEEP_S = 8 * 86400


def read_cards(s: Session) -> list[Card]:
    """Every card with its node's pool and state (columns, not ORM objects: 1,000s of rows
    on every dashboard refresh)."""
    n, d = NodeRow.__table__.c, DeviceRow.__table__.c
    q = (
        select(d.node, n.pool, d.index, d.model, d.vendor, d.mode, d.memory_mib, d.healthy)
        .add_columns(n.state, n.schedulable, d.telemetry, d.want_mode)
        .join(NodeRow.__table__, n.name == d.node)
        .order_by(d.node, d.index)
    )
    return [_card(row) for row in s.execute(q)]


def _card(row: Any) -> Card:
    node, pool, index, model, vendor, mode, memory, healthy, state, schedulable, tel, want = row
    return Card(
        node, pool, index, model, vendor, mode, memory, healthy, state, schedulable,
        dict(tel or {}), want,
    )  # fmt: skip


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

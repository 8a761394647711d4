"""What the alert rules look at, read from the state of record in one transaction."""

from datetime import datetime
from zoneinfo import ZoneInfo

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpupool.server.alerts.rules import BudgetFact, DeviceFact, Facts, Limits, PendingFact
from gpupool.server.db.tables import AllocationRow, BudgetRow, DeviceRow, JobRow, NodeRow
from gpupool.server.invoicing import month_invoice


def current_month(now: float, zone: str) -> str:
    return datetime.fromtimestamp(now, ZoneInfo(zone)).strftime("%Y-%m")


def budget_facts(s: Session, now: float, zone: str) -> list[BudgetFact]:
    """Each budget with what its tenant has spent this month: its invoice so far, live
    allocations included up to ``now`` (checkpoints are hourly; a budget must act sooner)."""
    month = current_month(now, zone)
    out = []
    for b in s.execute(select(BudgetRow).order_by(BudgetRow.tenant)).scalars():
        spent = month_invoice(s, b.tenant, month, zone, live_until=now)["total_fen"]
        out.append(BudgetFact(b.tenant, month, spent, b.monthly_fen, tuple(b.thresholds), b.action))
    return out


def gather(s: Session, now: float, zone: str, limits: Limits) -> Facts:
    # columns, not ORM rows: every few seconds over every card of the pool (4,000 device
    # objects were most of an idle scheduler's time at 1,000 nodes)
    nodes = {name: state for name, state in s.execute(select(NodeRow.name, NodeRow.state))}
    held: dict[tuple[str, int], tuple[str, float]] = {}
    live = select(AllocationRow.placement, AllocationRow.tenant, AllocationRow.created_at)
    for placement, tenant, created_at in s.execute(live.where(AllocationRow.state == "active")):
        for n in placement["nodes"]:
            for d in n["devices"]:
                held[(n["node"], d["device"])] = (tenant, created_at)
    devices = []
    # the two readings alerts use, taken out by the database: decoding every card's telemetry
    # document was most of an idle scheduler's time at 5,000 nodes
    temp, util = (
        DeviceRow.telemetry["temp_c"].as_float(),
        DeviceRow.telemetry["util_pct"].as_float(),
    )
    cards = select(DeviceRow.node, DeviceRow.index, DeviceRow.healthy, temp, util)
    for node, index, healthy, temp_c, util_pct in s.execute(cards):
        tenant, since = held.get((node, index), (None, None))
        devices.append(DeviceFact(node, index, healthy, temp_c, util_pct, tenant, since))
    jobs = JobRow.__table__.c
    pending = [
        PendingFact(r.id, r.tenant, r.queued_at, r.reason, bool(r.held), r.wait_code)
        for r in s.execute(
            select(
                jobs.id, jobs.tenant, jobs.queued_at, jobs.reason, jobs.held, jobs.wait_code
            ).where(jobs.state == "pending")
        )
    ]
    return Facts(
        now=now,
        lost_nodes=tuple(sorted(n for n, state in nodes.items() if state == "lost")),
        devices=tuple(devices),
        pending=tuple(pending),
        budgets=tuple(budget_facts(s, now, zone)),
        limits=limits,
    )

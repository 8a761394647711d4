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
    nodes = {n.name: n.state for n in s.execute(select(NodeRow)).scalars()}
    held: dict[tuple[str, int], tuple[str, float]] = {}
    for a in s.execute(select(AllocationRow).where(AllocationRow.state == "active")).scalars():
        for n in a.placement["nodes"]:
            for d in n["devices"]:
                held[(n["node"], d["device"])] = (a.tenant, a.created_at)
    devices = []
    for d in s.execute(select(DeviceRow)).scalars():
        tel = d.telemetry or {}
        tenant, since = held.get((d.node, d.index), (None, None))
        devices.append(
            DeviceFact(
                d.node, d.index, d.healthy, tel.get("temp_c"), tel.get("util_pct"), tenant, since
            )
        )
    jobs = JobRow.__table__.c
    pending = [
        PendingFact(r.id, r.tenant, r.queued_at, r.reason, bool(r.held))
        for r in s.execute(
            select(jobs.id, jobs.tenant, jobs.queued_at, jobs.reason, jobs.held).where(
                jobs.state == "pending"
            )
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

"""What the dashboard reads that no other route answers: the pool at a glance, every card
with who holds it, and utilisation over time. Every human role may call them; jobs, tenants
and money are narrowed to the tenants the caller sees, like every other route."""

import math
import time
from fractions import Fraction
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from sqlalchemy import func, literal, select

from gpupool.billing.catalog import Catalog
from gpupool.billing.estimate import job_estimate
from gpupool.billing.invoice import month_bounds
from gpupool.billing.money import cny, to_fen
from gpupool.model import SpecError
from gpupool.server.alerts.facts import current_month
from gpupool.server.cache import TtlCache
from gpupool.server.db.tables import AlertRow, JobRow, PoolSampleRow, TenantRow
from gpupool.server.deps import Caller, Ctx, Id, human
from gpupool.server.invoicing import catalog, month_invoice
from gpupool.server.ledger import entries
from gpupool.server.pool_read import read_cards, read_live
from gpupool.server.pool_view import by_model, history, holders, tiles, utilisation
from gpupool.server.routes.billing import READERS
from gpupool.server.routes.jobs import visible_job
from gpupool.server.routes.usage import usage_totals

router = APIRouter(prefix="/api/v1", tags=["dashboard"])
WINDOWS = {"24h": (86400, 96), "7d": (7 * 86400, 168)}


def _queue(s: Any, visible: frozenset[str] | None, now: float) -> dict[str, Any]:
    q = select(JobRow.state, func.count(), func.min(JobRow.submit_time)).group_by(JobRow.state)
    if visible is not None:
        q = q.where(JobRow.tenant.in_(visible))
    counts = {state: (n, oldest) for state, n, oldest in s.execute(q)}
    pending, oldest = counts.get("pending", (0, None))
    return {
        "pending": pending,
        "running": sum(counts.get(st, (0, None))[0] for st in ("admitted", "running")),
        "oldest_wait_s": round(now - oldest, 1) if oldest is not None else None,
    }


def _month(s: Any, who: Any, now: float, zone: str, costs: TtlCache) -> dict[str, Any]:
    """This month's card-hours of the visible tenants (live jobs up to now) and, for those
    who may read invoices, their cost so far: each tenant's invoice in its own billing mode
    (card-hours, GB-hours, per task, plans, discounts, credits) with live jobs up to now, by
    mode, next to what the card-hours cost at list prices — the two differ whenever a team
    is not billed by the card-hour. Both are counted to one moment, ``as_of`` (the costs
    are kept for ``MONTH_COST_TTL_S``, the overview's refresh: every open overview does not
    price every team's month anew; ``cost_as_of`` says when they were)."""
    month = current_month(now, zone)
    key = (month, who.visible, who.role in READERS)
    cached = costs.get(key)
    if cached is not None:
        return cached
    start, _ = month_bounds(month, zone)
    totals = usage_totals(s, who, start, None, now)
    pct_seconds = sum(
        v["compute_pct_seconds"] for (_, model), v in totals.items() if model != "cpu"
    )
    out: dict[str, Any] = {
        "month": month,
        "zone": zone,
        "as_of": now,
        "card_hours": round(pct_seconds / 360000, 1),
    }
    if who.role in READERS:
        names = [t for t in s.execute(select(TenantRow.name)).scalars() if who.sees(t)]
        by_mode: dict[str, int] = {}
        for t in names:
            inv = month_invoice(s, t, month, zone, live_until=now)
            by_mode[inv["mode"]] = by_mode.get(inv["mode"], 0) + inv["total_fen"]
        fen = sum(by_mode.values())
        out |= {
            "cost_fen": fen,
            "cost": cny(fen),
            "cost_by_mode": {m: cny(v) for m, v in sorted(by_mode.items())},
            "list_cost_fen": to_fen(_at_list_prices(totals, catalog(s), now)),
            "cost_as_of": now,
        }
    costs.put(key, out)
    return out


def _at_list_prices(totals: dict, cat: Catalog, now: float) -> Fraction:
    """What the card-hours cost at the catalog's card-hour prices (models without a price:
    nothing)."""
    fen = Fraction(0)
    for (_, model), v in totals.items():
        if model in ("cpu", "unknown"):
            continue
        try:
            fen += Fraction(v["compute_pct_seconds"], 360000) * cat.at(model, now).hourly()
        except SpecError:
            continue
    return fen


@router.get("/overview")
def overview(ctx: Ctx, who: Caller) -> dict[str, Any]:
    """The pool at a glance: cards by model (total, allocated, free, unavailable; whole /
    MIG / shared), utilisation now (allocated, and really used from telemetry), the queue
    and alerts of the tenants you see, and this month's card-hours (and cost for roles that
    read invoices)."""
    human(who)
    now = time.time()
    with ctx.db.read() as s:
        cards = read_cards(s)
        held = holders(read_live(s), who.sees)
        alerts = [
            tenant
            for (tenant,) in s.execute(select(AlertRow.tenant).where(AlertRow.state == "firing"))
            if who.is_admin or (tenant is not None and who.sees(tenant))
        ]
        return {
            "time": now,
            "models": by_model(cards, held),
            "utilisation": utilisation(cards, held, now),
            "queue": _queue(s, who.visible, now),
            "alerts_firing": len(alerts),
            "month": _month(s, who, now, ctx.settings.billing_zone, ctx.month_costs),
        }


@router.get("/devices")
def devices(
    ctx: Ctx,
    who: Caller,
    pool: Annotated[str | None, Query(max_length=100)] = None,
    model: Annotated[str | None, Query(max_length=100)] = None,
    vendor: Annotated[str | None, Query(max_length=20)] = None,
    state: Annotated[Literal["allocated", "free", "unavailable"] | None, Query()] = None,
) -> list[dict[str, Any]]:
    """Every card: model, mode, who holds each slice (another team's slice shows without
    tenant or job), utilisation, memory used and granted, temperature, power, health."""
    human(who)
    now = time.time()
    with ctx.db.read() as s:
        cards = read_cards(s)
        held = holders(read_live(s), who.sees)
    wanted = {"pool": pool, "model": model, "vendor": vendor, "state": state}
    return [
        t for t in tiles(cards, held, now) if all(v is None or t[k] == v for k, v in wanted.items())
    ]


@router.get("/overview/history")
def utilisation_history(
    ctx: Ctx, who: Caller, window: Annotated[Literal["24h", "7d"], Query()] = "24h"
) -> dict[str, Any]:
    """Pool utilisation over the window in equal buckets (24 h: 15 min, 7 d: 1 h):
    allocated % and used % (telemetry), from the leader's samples."""
    human(who)
    span, points = WINDOWS[window]
    end = time.time()
    start = end - span
    c = PoolSampleRow.__table__.c
    with ctx.db.read() as s:
        rows = s.execute(
            select(c.time, c.cards, c.allocated, c.util_sum, c.util_n).where(c.time >= start)
        ).mappings()
        points_out = history(rows, start, end, points)
    return {"window": window, "start": start, "end": end, "points": points_out}


@router.get("/jobs/{job_id}/cost")
def job_cost(job_id: Id, ctx: Ctx, who: Caller) -> dict[str, Any]:
    """Card-hours and cost so far at list prices (card-hour): metered records plus the live
    allocation up to now. An estimate; the tenant's invoice is what bills."""
    human(who)
    now = time.time()
    with ctx.db.read() as s:
        visible_job(s, who, job_id)
        ledger = entries(s, 0, math.inf, now, jobs=select(literal(job_id)))
        records = [
            {"model": e.model, "start": e.start, "compute_pct_seconds": e.compute_pct_seconds}
            for e in ledger
        ]
        out = job_estimate(records, catalog(s))
    out["cost"] = cny(out["cost_fen"]) if out["cost_fen"] is not None else None
    return out

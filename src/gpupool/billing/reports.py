"""Cost and usage reports (pure): card-hours per tenant, model and day; the jobs that cost the
most; the cost of cards held but idle. Prices are list prices in force at each moment (plans
and discounts are the invoice's business)."""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from fractions import Fraction
from zoneinfo import ZoneInfo

from gpupool.billing.catalog import Catalog
from gpupool.billing.invoice import parts
from gpupool.billing.money import cny, to_fen

HOUR = 3600


@dataclass(frozen=True)
class JobUsage:
    """One usage record with who it belongs to."""

    tenant: str
    job_id: int
    model: str
    start: float
    end: float
    compute_pct_seconds: int


def _days(start: float, end: float, zone: str) -> list[float]:
    """Local midnights in (start, end)."""
    tz = ZoneInfo(zone)
    day = datetime.fromtimestamp(start, tz).replace(hour=0, minute=0, second=0, microsecond=0)
    out: list[float] = []
    while True:
        day = (day + timedelta(days=1, hours=2)).replace(hour=0)  # DST-safe next midnight
        if day.timestamp() >= end:
            return out
        out.append(day.timestamp())


def _pieces(u: JobUsage, start: float, end: float, cuts: list[float]):
    """(from, card-seconds) of the parts of ``u`` in [start, end) cut at ``cuts``."""
    for a, _, share in parts(u, start, end, cuts):
        yield a, Fraction(u.compute_pct_seconds, 100) * share


def daily_usage(
    records: Iterable[JobUsage], start: float, end: float, zone: str
) -> list[dict[str, object]]:
    """Card-hours per tenant, GPU model and local day in [start, end)."""
    tz = ZoneInfo(zone)
    cuts = _days(start, end, zone)
    acc: dict[tuple[str, str, str], Fraction] = {}
    for u in records:
        if u.model == "cpu":
            continue
        for at, card_seconds in _pieces(u, start, end, cuts):
            day = datetime.fromtimestamp(at, tz).date().isoformat()
            key = (u.tenant, u.model, day)
            acc[key] = acc.get(key, Fraction(0)) + card_seconds
    return [
        {"tenant": t, "model": m, "day": d, "card_hours": round(float(v / HOUR), 4)}
        for (t, m, d), v in sorted(acc.items(), key=lambda kv: (kv[0][2], kv[0][0], kv[0][1]))
    ]


def job_costs(
    records: Iterable[JobUsage], catalog: Catalog, start: float, end: float, limit: int = 10
) -> list[dict[str, object]]:
    """The ``limit`` jobs whose card-hours in [start, end) cost the most at list prices."""
    cost: dict[tuple[str, int], Fraction] = {}
    hours: dict[tuple[str, int], Fraction] = {}
    for u in records:
        if u.model == "cpu":
            continue
        cuts = catalog.boundaries(u.model, start, end)
        for at, card_seconds in _pieces(u, start, end, cuts):
            key = (u.tenant, u.job_id)
            cost[key] = (
                cost.get(key, Fraction(0)) + card_seconds / HOUR * catalog.at(u.model, at).hourly()
            )
            hours[key] = hours.get(key, Fraction(0)) + card_seconds / HOUR
    top = sorted(cost.items(), key=lambda kv: (-kv[1], kv[0][1]))[:limit]
    return [
        {
            "job_id": job,
            "tenant": tenant,
            "card_hours": round(float(hours[(tenant, job)]), 4),
            "cost": cny(to_fen(value)),
        }
        for (tenant, job), value in top
    ]


@dataclass(frozen=True)
class IdleHold:
    """An allocation's idle card-percent-seconds, its model and when it ended (or now)."""

    tenant: str
    job_id: int
    model: str
    idle_pct_seconds: int
    at: float
    interactive: bool = False  # an interactive session's (a shell, a notebook)


def idle_costs(holds: Iterable[IdleHold], catalog: Catalog) -> list[dict[str, object]]:
    """Per tenant: card-hours held under 5% utilisation and what they cost at list prices,
    and how many of those hours interactive sessions held (what idle culling takes back)."""
    hours: dict[str, Fraction] = {}
    sessions: dict[str, Fraction] = {}
    cost: dict[str, Fraction] = {}
    for h in holds:
        if h.idle_pct_seconds <= 0 or h.model == "cpu":
            continue
        card_hours = Fraction(h.idle_pct_seconds, 100 * HOUR)
        hours[h.tenant] = hours.get(h.tenant, Fraction(0)) + card_hours
        if h.interactive:
            sessions[h.tenant] = sessions.get(h.tenant, Fraction(0)) + card_hours
        cost[h.tenant] = (
            cost.get(h.tenant, Fraction(0)) + card_hours * catalog.at(h.model, h.at).hourly()
        )
    return [
        {
            "tenant": t,
            "idle_card_hours": round(float(hours[t]), 4),
            "idle_cost": cny(to_fen(c)),
            "interactive_idle_card_hours": round(float(sessions.get(t, 0)), 4),
        }
        for t, c in sorted(cost.items(), key=lambda kv: (-kv[1], kv[0]))
    ]

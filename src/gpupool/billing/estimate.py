"""What a job has cost so far at list prices (pure): its usage records priced per card-hour
(compute share x hours x the hourly price in force when each record started), rounded once.
An estimate for the job page; the tenant's invoice (mode, plans, discounts) is what bills."""

from collections.abc import Iterable
from fractions import Fraction
from typing import Any

from gpupool.billing.catalog import Catalog
from gpupool.billing.money import to_fen
from gpupool.model import SpecError


def job_estimate(records: Iterable[dict[str, Any]], catalog: Catalog) -> dict[str, Any]:
    """``card_hours`` (float, 0.001 h) and ``cost_fen`` (None when a model has no price)."""
    hours = Fraction(0)
    cost: Fraction | None = Fraction(0)
    for r in records:
        h = Fraction(int(r["compute_pct_seconds"]), 100 * 3600)
        hours += h
        if r["model"] in ("cpu", "unknown") or cost is None:
            continue
        try:
            cost += h * catalog.at(r["model"], float(r["start"])).hourly()
        except SpecError:
            cost = None
    return {
        "card_hours": round(float(hours), 3),
        "cost_fen": to_fen(cost) if cost is not None else None,
    }

"""Rental plans and their quotes (pure): N cards of a model by the hour, day or month, or a
year prepaid at 15% off (the seed's "年付85折"). A day is 24 hourly rates, a month the monthly
rate, a year 12 months less the discount.

A plan commits to its whole term. It is paid ``upfront`` (all of it on the invoice of the
month it starts; the default for annual plans) or ``monthly`` (each calendar month bills the
part of the term inside it, prorated by the second). Cancelled early, its guarantee ends then
and it owes every period it started, in full, at its own period price — for an annual plan
every month (a twelfth of its year) it started, at the monthly price without the annual
discount — never more than its total; a plan cancelled before it starts owes nothing. The
invoice of the month of the cancellation carries the difference from what its schedule billed.
"""

import math
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction

from gpupool.billing.catalog import Catalog
from gpupool.billing.money import cny, to_fen
from gpupool.model import SpecError

PLANS = ("hourly", "daily", "monthly", "annual")
PAYMENTS = ("upfront", "monthly")
ANNUAL_DISCOUNT = Fraction(15, 100)
# a month is 30 days (the 720-hour month of the prices); a year runs 365 days to the same date
PERIOD_SECONDS = {"hourly": 3600, "daily": 86400, "monthly": 30 * 86400, "annual": 365 * 86400}


@dataclass(frozen=True)
class Line:
    description: str
    quantity: Fraction
    unit: str
    unit_price: Fraction  # fen, exact
    amount_fen: int  # rounded once, half to even

    def as_json(self) -> dict[str, str]:
        return {
            "description": self.description,
            "quantity": _number(self.quantity),
            "unit": self.unit,
            "unit_price": unit_price(self.unit_price),
            "amount": cny(self.amount_fen),
        }


def _number(q: Fraction) -> str:
    if q.denominator == 1:
        return str(q.numerator)
    exact = Decimal(q.numerator) / Decimal(q.denominator)
    return str(exact.quantize(Decimal("0.000001"), ROUND_HALF_EVEN)).rstrip("0")


def unit_price(fen: Fraction) -> str:
    """A unit price in CNY: two decimals when it is whole fen, else up to six (unit prices
    are exact; only line amounts are rounded)."""
    if fen.denominator == 1:
        return cny(int(fen))
    exact = Decimal(fen.numerator) / Decimal(fen.denominator * 100)
    return str(exact.quantize(Decimal("0.000001"), ROUND_HALF_EVEN)).rstrip("0")


def period_price(catalog: Catalog, model: str, plan: str, when: float) -> Fraction:
    """One card's price for one period of ``plan`` (fen, exact)."""
    if plan not in PLANS:
        raise SpecError(f"plan: {plan!r} is not one of {', '.join(PLANS)}", field="plan")
    price = catalog.at(model, when)
    if plan == "hourly":
        return price.hourly()
    if plan == "daily":
        return price.hourly() * 24
    if plan == "monthly":
        return Fraction(price.monthly_fen)
    return Fraction(price.monthly_fen) * 12 * (1 - ANNUAL_DISCOUNT)


def quote(catalog: Catalog, model: str, cards: int, plan: str, periods: int, when: float) -> dict:
    """What renting ``cards`` cards of ``model`` on ``plan`` for ``periods`` periods costs."""
    if cards < 1 or periods < 1:
        raise SpecError("quote: cards and periods must be at least 1", field="cards")
    unit = period_price(catalog, model, plan, when)
    quantity = Fraction(cards * periods)
    line = Line(
        f"{cards} x {model}, {plan} plan, {periods} period{'s' if periods > 1 else ''}",
        quantity,
        f"card-{PERIOD_NAME[plan]}",
        unit,
        to_fen(unit * quantity),
    )
    return {
        "model": model,
        "cards": cards,
        "plan": plan,
        "periods": periods,
        "total": cny(line.amount_fen),
        "total_fen": line.amount_fen,
        "currency": "CNY",
        "lines": [line.as_json()],
    }


PERIOD_NAME = {"hourly": "hour", "daily": "day", "monthly": "month", "annual": "year"}


@dataclass(frozen=True)
class Plan:
    """A rental: ``cards`` cards of ``model`` from ``start`` to ``end`` at a price locked when
    it was made (``total_fen``). Cancelled early, it ends then and bills its share."""

    id: int
    tenant: str
    model: str
    cards: int
    start: float
    end: float
    total_fen: int
    cancelled_at: float | None = None
    kind: str = ""  # hourly, daily, monthly or annual
    periods: int = 1
    payment: str = "monthly"  # or upfront: all of it when it starts

    @property
    def until(self) -> float:
        """When its guarantee ends: its end, or when it was cancelled."""
        if self.cancelled_at is None:
            return self.end
        return max(self.start, min(self.end, self.cancelled_at))

    @property
    def cancelled_early(self) -> bool:
        return self.cancelled_at is not None and self.cancelled_at < self.end

    def active(self, when: float) -> bool:
        return self.start <= when < self.until

    def steps(self) -> tuple[int, Fraction]:
        """How many periods its early cancellation counts in, and each one's price (fen, all
        its cards): months without the discount for an annual plan, else its own periods."""
        if self.kind == "annual":
            steps = 12 * self.periods
            return steps, Fraction(self.total_fen) / steps / (1 - ANNUAL_DISCOUNT)
        return self.periods, Fraction(self.total_fen, self.periods)

    def started_steps(self) -> int:
        """The periods (months, for annual) it started before it ended or was cancelled."""
        steps, _ = self.steps()
        used = Fraction(self.until) - Fraction(self.start)
        term = Fraction(self.end) - Fraction(self.start)
        return min(steps, math.ceil(used * steps / term)) if used > 0 else 0

    def owed(self) -> Fraction:
        """What it costs in all (fen, exact): its total, or by the early-cancellation rule."""
        if not self.cancelled_early:
            return Fraction(self.total_fen)
        _, step_price = self.steps()
        return min(Fraction(self.total_fen), self.started_steps() * step_price)

    def scheduled_between(self, start: float, end: float) -> Fraction:
        """What its payment schedule bills in [start, end), up to its cancellation."""
        hi_edge = min(end, self.until) if self.cancelled_early else end
        if self.payment == "upfront":
            return Fraction(self.total_fen) if start <= self.start < hi_edge else Fraction(0)
        lo, hi = max(start, self.start), min(hi_edge, self.end)
        if hi <= lo:
            return Fraction(0)
        return (
            Fraction(self.total_fen)
            * (Fraction(hi) - Fraction(lo))
            / (Fraction(self.end) - Fraction(self.start))
        )

    def cancelled_in(self, start: float, end: float) -> bool:
        """Whether it was cancelled early inside [start, end)."""
        return self.cancelled_early and start <= self.until < end

    def adjustment_between(self, start: float, end: float) -> Fraction:
        """At an early cancellation inside [start, end): what the rule owes less what the
        schedule billed (negative: a refund)."""
        if not self.cancelled_in(start, end):
            return Fraction(0)
        return self.owed() - self.scheduled_between(self.start, self.until)

    def card_seconds_between(self, start: float, end: float) -> Fraction:
        lo, hi = max(start, self.start), min(end, self.until)
        return Fraction(self.cards) * max(Fraction(0), Fraction(hi) - Fraction(lo))


def new_plan(
    catalog: Catalog,
    plan_id: int,
    tenant: str,
    model: str,
    cards: int,
    plan: str,
    periods: int,
    start: float,
    payment: str | None = None,
) -> Plan:
    """A plan priced from the catalog at ``start`` (the price is locked then); paid upfront
    when annual, monthly otherwise, unless ``payment`` says."""
    total = quote(catalog, model, cards, plan, periods, start)["total_fen"]
    payment = payment or ("upfront" if plan == "annual" else "monthly")
    if payment not in PAYMENTS:
        raise SpecError(
            f"payment: {payment!r} is not one of {', '.join(PAYMENTS)}",
            field="payment",
        )
    end = start + periods * PERIOD_SECONDS[plan]
    return Plan(plan_id, tenant, model, cards, start, end, total, None, plan, periods, payment)

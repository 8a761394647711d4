"""Rental plans and their quotes (pure): N cards of a model by the hour, day or month, or a
year prepaid at 15% off (the seed's "年付85折"). A day is 24 hourly rates, a month the monthly
rate, a year 12 months less the discount."""

from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction

from gpupool.billing.catalog import Catalog
from gpupool.billing.money import cny, to_fen
from gpupool.model import SpecError

PLANS = ("hourly", "daily", "monthly", "annual")
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

    @property
    def until(self) -> float:
        """When its guarantee ends: its end, or when it was cancelled."""
        if self.cancelled_at is None:
            return self.end
        return max(self.start, min(self.end, self.cancelled_at))

    def active(self, when: float) -> bool:
        return self.start <= when < self.until

    def cost_between(self, start: float, end: float) -> Fraction:
        """What [start, end) of it costs (fen, exact): its price prorated by the second."""
        lo, hi = max(start, self.start), min(end, self.until)
        if hi <= lo:
            return Fraction(0)
        return (
            Fraction(self.total_fen)
            * (Fraction(hi) - Fraction(lo))
            / (Fraction(self.end) - Fraction(self.start))
        )

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
) -> Plan:
    """A plan priced from the catalog at ``start`` (the price is locked then)."""
    total = quote(catalog, model, cards, plan, periods, start)["total_fen"]
    end = start + periods * PERIOD_SECONDS[plan]
    return Plan(plan_id, tenant, model, cards, start, end, total, kind=plan)

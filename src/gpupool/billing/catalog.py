"""The price catalog: what a card of each model costs per month, effective from a date, in fen.

Defaults are the seed article's list prices per card-month: T4 ¥900, RTX 3090 ¥1,750, V100S
¥1,500, A100-40G ¥2,800, A100-80G ¥2,500; an 8-card H100 server ¥80,000–120,000 a month
(default ¥100,000: ¥12,500 a card); a bare-metal E5-2698v4 x2 CPU server ¥3,999. The hourly
rate is the monthly one / 720 unless a price sets its own; a GPU-memory GB-hour is the card's
hourly rate / its memory in GB unless set. Entries are effective-dated: an invoice for a month
uses the entry in force at each moment, so a change never alters a closed month.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction

from gpupool.billing.money import FEN_PER_CNY
from gpupool.model import SpecError, canonical_model

HOURS_PER_MONTH = 720  # the seed's convention: 30 days of 24 hours
CPU_SERVER = "cpu-server"  # the bare-metal CPU server of the seed's list
DEFAULT_MONTHLY_FEN: dict[str, int] = {
    "T4": 900 * FEN_PER_CNY,
    "RTX3090": 1750 * FEN_PER_CNY,
    "V100S": 1500 * FEN_PER_CNY,
    "A100-40G": 2800 * FEN_PER_CNY,
    "A100-80G": 2500 * FEN_PER_CNY,
    "H100-80G": 100_000 * FEN_PER_CNY // 8,
    CPU_SERVER: 3999 * FEN_PER_CNY,
}
MEMORY_GB = {"T4": 16, "RTX3090": 24, "V100S": 32, "A100-40G": 40, "A100-80G": 80, "H100-80G": 80}


@dataclass(frozen=True)
class Price:
    """One model's price from ``effective_from`` (epoch seconds) until the next entry."""

    model: str
    monthly_fen: int
    effective_from: float = 0.0
    hourly_fen: int | None = None  # None: monthly / 720
    gb_hour_fen: Fraction | None = None  # None: hourly / the card's memory in GB

    def hourly(self) -> Fraction:
        if self.hourly_fen is not None:
            return Fraction(self.hourly_fen)
        return Fraction(self.monthly_fen, HOURS_PER_MONTH)

    def gb_hour(self) -> Fraction:
        if self.gb_hour_fen is not None:
            return self.gb_hour_fen
        gb = MEMORY_GB.get(self.model)
        if gb is None:
            raise SpecError(f"price: {self.model} has no GPU-memory GB-hour price; set one")
        return self.hourly() / gb


class Catalog:
    """Prices by model and time; the latest entry not after a moment is in force then."""

    def __init__(self, prices: Iterable[Price]):
        self.by_model: dict[str, list[Price]] = {}
        for p in sorted(prices, key=lambda p: (p.model, p.effective_from)):
            self.by_model.setdefault(p.model, []).append(p)

    @classmethod
    def default(cls) -> "Catalog":
        return cls(Price(m, fen) for m, fen in DEFAULT_MONTHLY_FEN.items())

    def _name(self, model: str) -> str:
        """The catalog's name for ``model``: itself, else its family when only the family is
        priced (``Ascend910B-B3`` billed at ``Ascend910B``'s price)."""
        if model == CPU_SERVER:
            return model
        name = canonical_model(model)
        family = name.rpartition("-")[0]
        return family if name not in self.by_model and family in self.by_model else name

    def at(self, model: str, when: float) -> Price:
        name = self._name(model)
        entries = self.by_model.get(name, [])
        in_force = [p for p in entries if p.effective_from <= when]
        if not in_force:
            known = ", ".join(sorted(self.by_model)) or "none"
            raise SpecError(f"price: no price for {name} in force then (known: {known})")
        return in_force[-1]

    def boundaries(self, model: str, start: float, end: float) -> list[float]:
        """Times inside (start, end) where ``model``'s price changes."""
        entries = self.by_model.get(self._name(model), [])
        return [p.effective_from for p in entries if start < p.effective_from < end]


def monthly_price_fen(model: str, overrides: Mapping[str, int] | None = None) -> int:
    """Card-month price of ``model`` in fen; overrides (model -> fen) win."""
    name = canonical_model(model)
    table = {**DEFAULT_MONTHLY_FEN, **{canonical_model(k): v for k, v in (overrides or {}).items()}}
    if name not in table:
        known = ", ".join(sorted(table))
        raise SpecError(
            f"price: no monthly price for {name} (known: {known}; give one with --price)",
            token=model,
        )
    return table[name]

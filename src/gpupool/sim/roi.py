"""Return on investment of pooling: the same work on fewer cards, and when it pays back.

Pure arithmetic, every step kept so it can be shown to the user:
1. busy card-equivalents = cards x utilisation before;
2. cards needed after = ceil(busy / (utilisation after x (1 - headroom))), where headroom is
   capacity kept free for the virtualisation layer (the seed advises 10-15%);
3. cards freed = cards - cards needed; monthly saving = cards freed x card-month price;
4. payback months = one-off platform cost / monthly saving.
Money is integer fen (DESIGN.md invariant 2); outputs in yuan are for display.
"""

import math
from dataclasses import asdict, dataclass
from typing import Any

from gpupool.billing.catalog import FEN_PER_CNY
from gpupool.model import SpecError


@dataclass(frozen=True, slots=True)
class RoiResult:
    cards: int
    busy_card_equivalents: float
    cards_needed: int
    cards_freed: int
    price_per_card_month: float
    monthly_saving: float
    monthly_saving_fen: int
    platform_cost: float
    payback_months: float | None
    currency: str = "CNY"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def roi(
    cards: int,
    util_before: float,
    util_after: float,
    price_fen: int,
    platform_cost_fen: int,
    headroom: float = 0.0,
) -> RoiResult:
    if cards <= 0:
        raise SpecError("roi: --cards must be positive", field="cards")
    for name, value in (("util-before", util_before), ("util-after", util_after)):
        if not 0 < value <= 1:
            raise SpecError(f"roi: --{name} must be in (0, 1], got {value}", field=name)
    if util_after < util_before:
        raise SpecError("roi: --util-after below --util-before saves nothing", field="util-after")
    if not 0 <= headroom < 1:
        raise SpecError("roi: --headroom must be in [0, 1)", field="headroom")
    if price_fen <= 0 or platform_cost_fen < 0:
        raise SpecError("roi: prices must be positive", field="price")
    busy = cards * util_before
    needed = math.ceil(round(busy / (util_after * (1 - headroom)), 9))
    needed = min(cards, max(1, needed))
    freed = cards - needed
    saving_fen = freed * price_fen
    payback = None if saving_fen == 0 else round(platform_cost_fen / saving_fen, 2)
    return RoiResult(
        cards=cards,
        busy_card_equivalents=round(busy, 2),
        cards_needed=needed,
        cards_freed=freed,
        price_per_card_month=price_fen / FEN_PER_CNY,
        monthly_saving=saving_fen / FEN_PER_CNY,
        monthly_saving_fen=saving_fen,
        platform_cost=platform_cost_fen / FEN_PER_CNY,
        payback_months=payback,
    )

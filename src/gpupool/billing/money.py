"""Money: integer fen (1 CNY = 100 fen), exact fractions until an invoice line is rounded,
half to even, once (DESIGN.md invariant 2). Never a float."""

import re
from fractions import Fraction

FEN_PER_CNY = 100
MAX_CNY_DIGITS = 10  # up to 9,999,999,999.99 CNY: any price, credit or budget, and fen fit int64
_AMOUNT = re.compile(r"([0-9]+)(?:\.([0-9]{1,2}))?")


def to_fen(amount: Fraction) -> int:
    """An exact amount of fen rounded to a whole fen, half to even (the one rounding rule;
    applied per invoice line, never to unit prices or running sums)."""
    return round(amount)


def cny(fen: int) -> str:
    """``2550000`` -> ``"25500.00"``: the decimal string invoices and the API carry."""
    sign = "-" if fen < 0 else ""
    whole, cents = divmod(abs(fen), FEN_PER_CNY)
    return f"{sign}{whole}.{cents:02d}"


def yuan(fen: int) -> str:
    """``2550000`` -> ``¥25,500.00``: for people (thousands grouped), on pages and in alerts."""
    sign = "-" if fen < 0 else ""
    whole, cents = divmod(abs(fen), FEN_PER_CNY)
    return f"{sign}¥{whole:,}.{cents:02d}"


def parse_cny(text: str) -> int:
    """``"25500"``, ``"25500.5"`` or ``"25500.50"`` (CNY) -> fen; more than two decimals, a
    sign or anything else is refused."""
    from gpupool.model import SpecError

    m = _AMOUNT.fullmatch(text.strip())  # ASCII digits only: "¹" is a digit to str.isdigit
    if m is None:
        raise SpecError(f"price: {text[:40]!r} is not an amount in CNY like 2500 or 2500.50")
    if len(m[1].lstrip("0")) > MAX_CNY_DIGITS:
        raise SpecError(f"price: {text[:40]!r} is above 9,999,999,999.99 CNY")
    return int(m[1]) * FEN_PER_CNY + int((m[2] or "").ljust(2, "0"))

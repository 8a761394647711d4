"""The default price catalog: monthly rent per card, in fen (1 CNY = 100 fen).

Defaults are the seed article's list prices; users override them per model.
"""

from collections.abc import Mapping

from gpupool.model import SpecError, canonical_model

FEN_PER_CNY = 100
DEFAULT_MONTHLY_FEN: dict[str, int] = {
    "T4": 900 * FEN_PER_CNY,
    "RTX3090": 1750 * FEN_PER_CNY,
    "V100S": 1500 * FEN_PER_CNY,
    "A100-40G": 2800 * FEN_PER_CNY,
    "A100-80G": 2500 * FEN_PER_CNY,
}


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

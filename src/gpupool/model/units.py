"""Parsing of quantities into the integer units of DESIGN.md invariant 2.

Memory is MiB, CPU is millicores, compute is percent of one device (100 = a whole card).
Binary suffixes (Ki, Mi, Gi, Ti / KiB...) are powers of 1024; decimal ones (K, M, G, T / KB...)
are powers of 1000, as in Kubernetes quantities.
"""

import re
from fractions import Fraction

from gpupool.model.errors import SpecError

_MIB = 1024 * 1024
_UNITS: dict[str, int] = {
    "": _MIB,  # a bare number is MiB
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "ki": 1024,
    "kib": 1024,
    "m": 1000**2,
    "mb": 1000**2,
    "mi": _MIB,
    "mib": _MIB,
    "g": 1000**3,
    "gb": 1000**3,
    "gi": 1024**3,
    "gib": 1024**3,
    "t": 1000**4,
    "tb": 1000**4,
    "ti": 1024**4,
    "tib": 1024**4,
}
_QUANTITY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def _number(text: str, what: str) -> tuple[Fraction, str]:
    match = _QUANTITY.match(text)
    if not match:
        raise SpecError(f"{what}: {text!r} is not a quantity (expected e.g. 32GiB)", token=text)
    return Fraction(match.group(1)), match.group(2).lower()


def parse_memory_mib(text: str | int | float, what: str = "memory") -> int:
    """Return the MiB in ``text`` (``"32GiB"``, ``"512Mi"``, ``"20GB"``), rounded up."""
    if isinstance(text, bool):
        raise SpecError(f"{what}: expected a size, got {text!r}", token=str(text))
    if isinstance(text, int):
        if text < 0:
            raise SpecError(f"{what}: {text} is negative", token=str(text))
        return text
    value, unit = _number(str(text), what)
    if unit not in _UNITS:
        raise SpecError(
            f"{what}: unknown unit {unit!r} in {text!r} (expected MiB, GiB, TiB, MB, GB or TB)",
            token=str(text),
        )
    size = value * _UNITS[unit]
    mib = -(-size // _MIB)  # ceiling
    return int(mib)


def parse_cpu_millis(text: str | int | float, what: str = "cpu") -> int:
    """Return millicores for ``"4"``, ``"0.5"`` or ``"500m"``."""
    if isinstance(text, bool):
        raise SpecError(f"{what}: expected a CPU count, got {text!r}", token=str(text))
    if isinstance(text, int | float):
        if text < 0:
            raise SpecError(f"{what}: {text} is negative", token=str(text))
        return int(Fraction(str(text)) * 1000)
    raw = str(text).strip()
    if raw.endswith("m") and raw[:-1].isdigit():
        return int(raw[:-1])
    try:
        value = Fraction(raw)
    except (ValueError, ZeroDivisionError):
        raise SpecError(
            f"{what}: {raw!r} is not a CPU count (expected e.g. 4, 0.5 or 500m)", token=raw
        ) from None
    if value < 0:
        raise SpecError(f"{what}: {raw!r} is negative", token=raw)
    millis = value * 1000
    if millis.denominator != 1:
        raise SpecError(f"{what}: {raw!r} is finer than one millicore", token=raw)
    return int(millis)


def parse_share_percent(text: str | int | float, what: str = "gpu_share") -> int:
    """Return percent of one device for ``"0.5"`` / ``"50%"`` (1 = the whole card)."""
    raw = str(text).strip()
    try:
        pct = Fraction(raw[:-1]) if raw.endswith("%") else Fraction(raw) * 100
    except (ValueError, ZeroDivisionError):
        raise SpecError(
            f"{what}: {raw!r} is not a share (expected a fraction like 0.5 or a percent like 50%)",
            token=raw,
        ) from None
    if pct.denominator != 1:
        raise SpecError(f"{what}: {raw!r} is finer than 1% of a device", token=raw)
    if not 0 < pct <= 100:
        raise SpecError(f"{what}: {raw!r} must be above 0 and at most 1 (100%)", token=raw)
    return int(pct)


def format_mib(mib: int) -> str:
    """Human form of a MiB amount: ``81920 -> '80GiB'``, ``1536 -> '1536MiB'``."""
    if mib and mib % 1024 == 0:
        return f"{mib // 1024}GiB"
    return f"{mib}MiB"


_DURATION = re.compile(r"^\s*(?:now\s*([+-])\s*)?(\d+)\s*([smhdw])\s*$")
UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}  # a duration's units


def parse_point_in_time(text: str, now: float, what: str = "expires") -> float:
    """``now``, ``30d`` / ``12h`` / ``90m`` / ``2w`` from ``now`` (also ``now+12h``), ``now-7d``
    before it, or an ISO 8601 date or time, as epoch seconds. A date or time without an offset
    is in the user's zone (``TZ``, else the machine's), as every time gpupool prints is: a
    user in Shanghai who types 09:00 means nine in Shanghai."""
    from datetime import datetime

    if text.strip().lower() == "now":
        return now
    match = _DURATION.match(text)
    if match:
        sign = -1 if match[1] == "-" else 1
        return now + sign * int(match[2]) * UNIT_SECONDS[match[3]]
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise SpecError(
            f"{what}: {text!r} is neither now, a duration (30d, 12h, 90m) nor an ISO date",
            field=what,
            token=text,
        ) from None
    return when.timestamp()  # a naive datetime counts in the local zone

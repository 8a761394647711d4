"""Settings swept and the fronts they make (pure): a policy's points, each a setting and its
replay's summary, and the ones no other beats on cost and harm."""

from typing import Any

Point = dict[str, Any]  # one policy setting and its replay's summary (JSON)


def steps(start: float, stop: float, step: float) -> list[float]:
    """``start``, ``start + step``, ... up to ``stop`` (at least ``start``)."""
    count = round((stop - start) / step) + 1
    return [round(start + k * step, 6) for k in range(max(count, 1))]


def pareto(points: list[Point], key: str = "underprovisioned_min") -> list[Point]:
    """Points no other point beats on both replica-hours and ``key`` (minutes of harm)."""
    front: list[Point] = []
    for p in sorted(points, key=lambda p: (p["replica_hours"], p[key])):
        if not front or p[key] < front[-1][key]:
            front.append(p)
    return front

"""What the dashboard shows of the pool, computed from plain rows (pure, so the counting rules
are tested without a server): each card with who holds its slices, counts by model, and
utilisation now. A card whose holder the caller may not see shows as held by another team —
the pool is shared, its occupancy is not secret, other teams' work is."""

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

FRESH_S = 120.0  # telemetry older than this says nothing about "now"


@dataclass(frozen=True, slots=True)
class Card:
    node: str
    pool: str
    index: int
    model: str
    vendor: str
    mode: str
    memory_mib: int
    healthy: bool
    node_state: str  # ready, lost, fenced
    schedulable: bool
    telemetry: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
    want_mode: str | None = None  # a hybrid pool's switch in progress

    @property
    def switching(self) -> bool:
        return self.want_mode not in (None, self.mode)

    @property
    def key(self) -> tuple[str, int]:
        return (self.node, self.index)

    @property
    def open(self) -> bool:
        """Takes new work: healthy, on a ready node that is not drained, not switching mode."""
        ready = self.node_state == "ready" and self.schedulable
        return self.healthy and ready and not self.switching


@dataclass(frozen=True, slots=True)
class Live:
    """A live allocation as the view needs it."""

    job_id: int
    tenant: str
    borrowed: bool
    placement: dict[str, Any]


def holders(allocations: Iterable[Live], sees: Callable[[str], bool]) -> dict[tuple, list]:
    """Per card, the slices held on it: tenant and job for tenants the caller sees, None for
    both where it may not."""
    out: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for a in allocations:
        visible = sees(a.tenant)
        for n in a.placement.get("nodes", []):
            for d in n.get("devices", []):
                out[(n["node"], d["device"])].append(
                    {
                        "tenant": a.tenant if visible else None,
                        "job_id": a.job_id if visible else None,
                        "compute_pct": d.get("compute_pct", 100),
                        "mem_mib": d.get("mem_mib", 0),
                        "mig_profile": d.get("mig_profile"),
                        "borrowed": a.borrowed if visible else None,
                    }
                )
    return out


def card_state(card: Card, held: list[dict[str, Any]]) -> str:
    """allocated (any slice held), free (open and empty) or unavailable."""
    if held:
        return "allocated"
    return "free" if card.open else "unavailable"


def fresh_util(card: Card, now: float) -> float | None:
    """The card's utilisation if its telemetry is recent, else None."""
    return telemetry_util(card.telemetry, now)


def telemetry_util(telemetry: dict[str, Any] | None, now: float) -> float | None:
    """Utilisation (%, 0..100) from a card's telemetry if it is recent, else None."""
    t = telemetry or {}
    util = t.get("util_pct")
    if not isinstance(util, int | float) or now - float(t.get("time") or 0) > FRESH_S:
        return None
    return max(0.0, min(100.0, float(util)))


def tiles(cards: list[Card], held: dict[tuple, list], now: float) -> list[dict[str, Any]]:
    """One tile per card: what the nodes page draws."""
    out = []
    for c in cards:
        mine = held.get(c.key, [])
        t = c.telemetry or {}
        out.append(
            {
                "node": c.node,
                "pool": c.pool,
                "index": c.index,
                "model": c.model,
                "vendor": c.vendor,
                "mode": c.mode,
                "memory_mib": c.memory_mib,
                "healthy": c.healthy,
                "node_state": c.node_state,
                "schedulable": c.schedulable,
                "state": card_state(c, mine),
                "holders": mine,
                "granted_mib": sum(h["mem_mib"] for h in mine),
                "util_pct": fresh_util(c, now),
                "mem_used_mib": t.get("mem_used_mib"),
                "temp_c": t.get("temp_c"),
                "power_w": t.get("power_w"),
                "mig_layout": t.get("mig") if isinstance(t.get("mig"), list) else None,
                "switching_to": c.want_mode if c.switching else None,
                "mode_error": t.get("mode_error"),
            }
        )
    return out


def by_model(cards: list[Card], held: dict[tuple, list]) -> list[dict[str, Any]]:
    """Cards per model: total, allocated, free, unavailable, and how they are cut."""
    rows: dict[str, dict[str, Any]] = {}
    for c in cards:
        r = rows.setdefault(
            c.model,
            {"model": c.model, "total": 0, "allocated": 0, "free": 0, "unavailable": 0}
            | {"whole": 0, "mig": 0, "share": 0},
        )
        r["total"] += 1
        r[card_state(c, held.get(c.key, []))] += 1
        r[c.mode if c.mode in ("mig", "share") else "whole"] += 1
    return [rows[m] for m in sorted(rows)]


def utilisation(cards: list[Card], held: dict[tuple, list], now: float) -> dict[str, Any]:
    """Allocated share of the cards and, from fresh telemetry, how busy they really are."""
    total = len(cards)
    allocated = sum(1 for c in cards if held.get(c.key))
    utils = [u for c in cards if (u := fresh_util(c, now)) is not None]
    return {
        "cards": total,
        "allocated": allocated,
        "allocated_pct": round(100.0 * allocated / total, 1) if total else 0.0,
        "used_pct": round(sum(utils) / len(utils), 1) if utils else None,
        "reporting": len(utils),
    }


def sample(cards: list[Card], held: dict[tuple, list], now: float) -> list[dict[str, Any]]:
    """One history sample per model: cards, allocated, and the sum and count of fresh
    utilisations (so buckets and models average correctly)."""
    out: dict[str, dict[str, Any]] = {}
    for c in cards:
        s = out.setdefault(
            c.model, {"model": c.model, "cards": 0, "allocated": 0, "util_sum": 0.0, "util_n": 0}
        )
        s["cards"] += 1
        s["allocated"] += 1 if held.get(c.key) else 0
        u = fresh_util(c, now)
        if u is not None:
            s["util_sum"] += u
            s["util_n"] += 1
    return [out[m] for m in sorted(out)]


def history(samples: Iterable[Mapping[Any, Any]], start: float, end: float, points: int) -> list:
    """Samples (time, cards, allocated, util_sum, util_n per model) summed per instant and
    averaged into ``points`` equal buckets: allocated % and used % per bucket (None where no
    sample fell)."""
    width = (end - start) / points
    instants: dict[float, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])
    for s in samples:
        acc = instants[s["time"]]
        acc[0] += s["cards"]
        acc[1] += s["allocated"]
        acc[2] += s["util_sum"]
        acc[3] += s["util_n"]
    buckets = [[0.0, 0.0, 0, 0] for _ in range(points)]  # allocated %, used %, n used, n
    for t, (cards, allocated, util_sum, util_n) in instants.items():
        i = int((t - start) // width)
        if 0 <= i < points and cards:
            b = buckets[i]
            b[0] += 100.0 * allocated / cards
            b[1] += util_sum / util_n if util_n else 0.0
            b[2] += 1 if util_n else 0
            b[3] += 1
    out = []
    for i, (alloc_sum, used_sum, used_n, n) in enumerate(buckets):
        out.append(
            {
                "time": start + (i + 1) * width,
                "allocated_pct": round(alloc_sum / n, 1) if n else None,
                "used_pct": round(used_sum / used_n, 1) if used_n else None,
            }
        )
    return out

"""A tenant's monthly invoice from metered quantities (pure: records and prices in, lines out).

Months are calendar months in a time zone (default Asia/Shanghai); a usage record that spans
a month boundary, or a price change, bills each part by its share of the record's seconds.
Modes, as the seed lists them: ``card-hour`` (whole-card equivalents: a share or MIG slice
bills its compute fraction), ``gpu-mem`` (GPU-memory GB-hours) and ``per-task`` (a price per
finished job by its priority class). Each line is rounded once, half to even; the total is
the sum of the lines, exactly.
"""

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from fractions import Fraction
from itertools import pairwise
from typing import Any, Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from gpupool.billing.catalog import Catalog
from gpupool.billing.money import cny, to_fen
from gpupool.billing.plans import PERIOD_NAME, Plan, unit_price
from gpupool.model import SpecError

MODES = ("card-hour", "gpu-mem", "per-task")
DEFAULT_ZONE = "Asia/Shanghai"
MIB_PER_GB = 1024
HOUR = 3600


def month_bounds(month: str, zone: str = DEFAULT_ZONE) -> tuple[float, float]:
    """``2026-11`` in ``zone`` as [start, end) epoch seconds."""
    try:
        tz = ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        raise SpecError(f"zone: unknown time zone {zone!r}", field="zone") from None
    try:
        first = datetime.strptime(month, "%Y-%m").replace(tzinfo=tz)
    except ValueError:
        raise SpecError(f"month: {month!r} is not YYYY-MM", field="month") from None
    nxt = first.replace(year=first.year + first.month // 12, month=first.month % 12 + 1)
    return first.timestamp(), nxt.timestamp()


class Spanned(Protocol):
    @property
    def start(self) -> float: ...
    @property
    def end(self) -> float: ...


@dataclass(frozen=True)
class Usage:
    """One usage record's quantities (see ``gpupool.server.metering``)."""

    model: str
    start: float
    end: float
    compute_pct_seconds: int
    mem_mib_seconds: int


@dataclass(frozen=True)
class Task:
    job_id: int
    priority_class: str
    finished_at: float


def parts(
    u: Spanned, start: float, end: float, cuts: Sequence[float]
) -> list[tuple[float, float, Fraction]]:
    """(from, to, share of the record) for each part of ``u`` inside [start, end), cut at
    ``cuts`` (price changes, hours, a month's edge). A share is the part's whole seconds
    over the record's, as metering counts them (``floor(end) - floor(start)``): the part of
    a running job before a cut is then the same however far the job has run on (split by
    fractional time it moved with every look, issue 59), and the parts add up to the whole.
    A record shorter than a whole second is split by time."""
    lo, hi = max(u.start, start), min(u.end, end)
    if u.end <= u.start:  # an instant: wholly where it lies
        return [(u.start, u.start, Fraction(1))] if start <= u.start < end else []
    if hi <= lo:
        return []
    edges = [lo, *(c for c in cuts if lo < c < hi), hi]
    seconds = math.floor(u.end) - math.floor(u.start)
    if seconds > 0:
        return [
            (a, b, Fraction(math.floor(b) - math.floor(a), seconds)) for a, b in pairwise(edges)
        ]
    span = Fraction(u.end) - Fraction(u.start)
    return [(a, b, (Fraction(b) - Fraction(a)) / span) for a, b in pairwise(edges)]


def local_span(a: float, b: float, zone: str, to: str = "to") -> str:
    """``2027-01-01 00:00 to 2027-01-15 00:00 +08:00`` in ``zone`` (each end's offset when
    they differ, across a daylight-saving change)."""
    tz = ZoneInfo(zone)
    first, last = datetime.fromtimestamp(a, tz), datetime.fromtimestamp(b, tz)
    one, two = (f"{d:%Y-%m-%d %H:%M}" for d in (first, last))
    off1, off2 = (f"{d:%z}"[:3] + ":" + f"{d:%z}"[3:] for d in (first, last))
    return f"{one} {to} {two} {off2}" if off1 == off2 else f"{one} {off1} {to} {two} {off2}"


def _dated(
    item: dict,
    description: str,
    model: str,
    since: float,
    catalog: Catalog,
    start: float,
    end: float,
    zone: str,
) -> tuple[dict, str]:
    """A usage line of a price that changes within [start, end): dated with the part of the
    month its price was in force (two lines of one model were told apart by nothing)."""
    cuts = catalog.boundaries(model, start, end)
    if not cuts:
        return item, description
    lo = max(since, start)
    hi = min([c for c in cuts if c > lo] + [end])
    return {**item, "from": lo, "to": hi}, f"{description}, {local_span(lo, hi, zone)}"


def invoice(
    tenant: str,
    month: str,
    records: Iterable[Usage],
    catalog: Catalog,
    *,
    mode: str = "card-hour",
    zone: str = DEFAULT_ZONE,
    tasks: Iterable[Task] = (),
    task_prices: Mapping[str, int] | None = None,
    plans: Sequence[Plan] = (),
    discount_pct: int = 0,
    credits: Sequence[tuple[str, int]] = (),
) -> dict:
    """The invoice of ``tenant`` for ``month``: lines per rental plan (its locked price,
    prorated by the second), then per model and price (or per class), then a discount on the
    usage lines (not the plans, priced already) and credits, amounts in CNY strings, total =
    the sum of the lines. A model under a plan bills only what was used beyond the plan's
    cards, hour by hour, at the on-demand rate."""
    if mode not in MODES:
        raise SpecError(f"mode: {mode!r} is not one of {', '.join(MODES)}", field="mode")
    start, end = month_bounds(month, zone)
    plans = [p for p in plans if p.start < end and (p.until > start or p.cancelled_in(start, end))]
    if plans and mode != "card-hour":
        raise SpecError("mode: a tenant with rental plans is billed by card-hour", field="mode")
    lines: list[dict] = [line for p in plans for line in _plan_lines(p, start, end)]
    planned = {p.model for p in plans}
    hours: dict[str, dict[float, Fraction]] = {}  # model -> hour -> card-seconds used
    if mode == "per-task":
        lines = _task_lines(tasks, start, end, task_prices or {})
    else:
        card = mode == "card-hour"
        per_unit = 100 * HOUR if card else MIB_PER_GB * HOUR  # card-%-s or MiB-s in a unit
        # (model, the price entry's start) -> [whole records' amount (int), parts' (exact)]
        acc: dict[tuple[str, float], list] = {}
        for u in records:
            if u.model == "cpu":
                continue  # CPU and host memory come with the cards
            if u.model in planned:
                _bucket(hours.setdefault(u.model, {}), u, start, end)
                continue
            amount = u.compute_pct_seconds if card else u.mem_mib_seconds
            cuts = catalog.boundaries(u.model, start, end)
            if start <= u.start and u.end <= end and not any(u.start < c < u.end for c in cuts):
                # wholly inside the month at one price: integers only (most records)
                price = catalog.at(u.model, u.start)
                key = (u.model, price.effective_from)
                acc.setdefault(key, [0, Fraction(0), price])[0] += amount
                continue
            for moment, _, share in parts(u, start, end, cuts):
                price = catalog.at(u.model, moment)
                entry = acc.setdefault((u.model, price.effective_from), [0, Fraction(0), price])
                entry[1] += amount * share
        unit = "card-hour" if card else "GB-hour"
        for (model, since), (whole, partial, price) in sorted(acc.items()):
            quantity = (whole + partial) / per_unit
            rate = price.hourly() if card else price.gb_hour()
            item, what = _dated(
                {"kind": "usage", "model": model}, f"{model} ({unit}s)", model, since, catalog,
                start, end, zone,
            )  # fmt: skip
            lines.append(_line(what, quantity, unit, rate, item))
        lines += _beyond_plans(hours, plans, catalog, start, end, zone)
    if discount_pct:
        on_demand = sum(
            line["amount_fen"] for line in lines if not line["item"]["kind"].startswith("plan")
        )
        if on_demand:
            discount: dict[str, Any] = {"kind": "discount", "pct": discount_pct}
            rate = -Fraction(on_demand * discount_pct, 100)
            lines.append(
                _line(f"discount {discount_pct}% on usage", Fraction(1), "", rate, discount)
            )
    for reason, fen in credits:  # never below zero: a credit applies up to what is due
        due = max(0, sum(line["amount_fen"] for line in lines))
        applied = min(fen, due)
        item = {"kind": "credit", "reason": reason, "credit": cny(fen), "applied": cny(applied)}
        what = f"credit: {reason}"
        if applied < fen:
            what += f" (¥{cny(fen)}; ¥{cny(applied)} applies, the invoice does not go below zero)"
        lines.append(_line(what, Fraction(1), "", -Fraction(applied), item))
    total = sum(line["amount_fen"] for line in lines)
    return {
        "tenant": tenant,
        "month": month,
        "zone": zone,
        "mode": mode,
        "period": {"start": start, "end": end},
        "currency": "CNY",
        "lines": [{k: v for k, v in line.items() if k != "amount_fen"} for line in lines],
        "total": cny(total),
        "total_fen": total,
    }


def _line(
    description: str, quantity: Fraction, unit: str, rate: Fraction, item: dict | None = None
) -> dict:
    """One invoice line; ``item`` says what it is for other languages (kind, model, ...)."""
    amount = to_fen(quantity * rate)
    exact = float(quantity)
    return {
        "description": description,
        "item": item or {},
        "quantity": f"{exact:.4f}",
        "unit": unit,
        "unit_price": unit_price(rate),
        "amount": cny(amount),
        "amount_fen": amount,
    }


def _task_lines(
    tasks: Iterable[Task], start: float, end: float, prices: Mapping[str, int]
) -> list[dict]:
    counts: dict[str, int] = {}
    for t in tasks:
        if start <= t.finished_at < end:
            counts[t.priority_class] = counts.get(t.priority_class, 0) + 1
    lines = []
    for klass, count in sorted(counts.items()):
        if klass not in prices:
            raise SpecError(f"price: no per-task price for class {klass!r}", field="task_prices")
        item = {"kind": "tasks", "class": klass}
        lines.append(_line(f"{klass} jobs", Fraction(count), "job", Fraction(prices[klass]), item))
    return lines


def _plan_lines(p: Plan, start: float, end: float) -> list[dict]:
    """A plan's line in [start, end) — all of it when paid upfront and starting here, else
    its prorated share — and, when it was cancelled early in [start, end), the line the
    early-cancellation rule adds or refunds."""
    item = {
        "kind": "plan",
        "plan": p.id,
        "cards": p.cards,
        "model": p.model,
        "term": p.kind,
        "payment": p.payment,
        "cancelled": p.cancelled_early,
    }
    what = f"plan {p.id}: {p.cards} x {p.model}, {p.kind or 'rental'}"
    lines = []
    scheduled = p.scheduled_between(start, end)
    if p.payment == "upfront":
        if scheduled:
            count = Fraction(p.cards * p.periods)
            unit = f"card-{PERIOD_NAME.get(p.kind, 'term')}"
            lines.append(_line(f"{what}, paid upfront", count, unit, scheduled / count, item))
    else:
        hours = p.card_seconds_between(start, end) / 3600
        if hours or scheduled:
            rate = scheduled / hours if hours else Fraction(0)
            lines.append(_line(what, hours, "card-hour", rate, item))
    if p.cancelled_in(start, end):
        steps, _ = p.steps()
        step = "month" if p.kind == "annual" else PERIOD_NAME.get(p.kind, "period")
        started = p.started_steps()
        note = " (no annual discount)" if p.kind == "annual" else ""
        cancel = {
            **item,
            "kind": "plan-cancellation",
            "owed": cny(to_fen(p.owed())),
            "started": started,
            "steps": steps,
            "step": step,
        }
        lines.append(
            _line(
                f"plan {p.id}: cancelled early, owes {started} of {steps} {step}s{note}; "
                f"less what was billed",
                Fraction(1),
                "",
                p.adjustment_between(start, end),
                cancel,
            )
        )
    return lines


def _bucket(acc: dict[float, Fraction], u: Usage, start: float, end: float) -> None:
    """Spread a record's card-seconds evenly over the hours (UTC) it covers in [start, end)."""
    first = math.floor(max(u.start, start) / HOUR) * HOUR
    cuts = [float(h) for h in range(int(first) + HOUR, int(min(u.end, end)) + HOUR, HOUR)]
    for a, _, share in parts(u, start, end, cuts):
        hour = float(math.floor(a / HOUR) * HOUR)
        acc[hour] = acc.get(hour, Fraction(0)) + Fraction(u.compute_pct_seconds, 100) * share


def _beyond_plans(
    hours: Mapping[str, Mapping[float, Fraction]],
    plans: Sequence[Plan],
    catalog: Catalog,
    start: float,
    end: float,
    zone: str = DEFAULT_ZONE,
) -> list[dict]:
    """Per model, the card-hours used beyond the plans' cards in each hour, at the on-demand
    rate in force at that hour's start."""
    acc: dict[tuple[str, float], list[Fraction]] = {}
    for model, used in sorted(hours.items()):
        mine = [p for p in plans if p.model == model]
        for hour, card_seconds in sorted(used.items()):
            lo, hi = max(hour, start), min(hour + HOUR, end)
            covered = sum((p.card_seconds_between(lo, hi) for p in mine), Fraction(0))
            beyond = card_seconds - covered
            if beyond <= 0:
                continue
            price = catalog.at(model, lo)
            entry = acc.setdefault((model, price.effective_from), [Fraction(0), price.hourly()])
            entry[0] += beyond / HOUR
    out = []
    for (model, since), (quantity, rate) in sorted(acc.items()):
        item, what = _dated(
            {"kind": "beyond", "model": model}, f"{model} beyond plans (card-hours)", model,
            since, catalog, start, end, zone,
        )  # fmt: skip
        out.append(_line(what, quantity, "card-hour", rate, item))
    return out

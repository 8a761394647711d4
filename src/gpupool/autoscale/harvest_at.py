"""Harvest@99: the training GPU-hours a week a service leaves while at most 1% of minutes
violate its SLO — the headline of issue 49 — for the anchors, gpupool's warm path and a
clairvoyant ceiling.

Each contender is a policy swept over its headroom with one mechanism (the leads of its
paths, the work a stopped training job loses, where its replicas lie), judged on days 8–14.
Harvest@99 is its best setting there within the target, as the definition reads; beside it,
the setting an operator fixes in advance — the most harvest within the target on days 2–7
(day 1 teaches the seasonal forecaster) — judged on days 8–14. And each contender's
SLO-violating minutes at one fixed replica-hour budget (the replica-hours the best anchor
needs for Harvest@99), interpolated along its judged front.
"""

from collections.abc import Callable
from dataclasses import dataclass, replace
from math import ceil
from typing import Any

import numpy as np

from gpupool.autoscale import forecast
from gpupool.autoscale.fronts import Point, pareto, steps
from gpupool.autoscale.harvest import Training, harvest
from gpupool.autoscale.kpa import Kpa
from gpupool.autoscale.predictive import Predictive
from gpupool.autoscale.reactive import Reactive, SloReactive
from gpupool.autoscale.replay import Policy, ServiceModel, replay

DAY_S = 86_400


@dataclass(frozen=True)
class Contender:
    """A policy family and the mechanism it runs on."""

    name: str
    model: ServiceModel  # leads (cold, warm) and parked engines
    lost_per_stop_s: float  # work a training job loses when its card is taken
    pack: bool  # the service's replicas fill servers one by one (else spread)
    settings: list[float]  # the swept knob: headroom
    policy: Callable[[float], Policy]  # a fresh policy at a setting
    anchor: bool = True
    engines: Callable[[float], int] | None = None  # parked engines at a setting


@dataclass(frozen=True)
class Span:
    start: int
    end: int

    def minutes(self, tick_s: int) -> float:
        return (self.end - self.start) * tick_s / 60


class HarvestBench:
    """One trace's ticks and the two spans; evaluates contenders' settings on them."""

    def __init__(
        self,
        rates: np.ndarray,
        tick_s: int,
        learn: Span,
        judge: Span,
        servers: int,
        cards_per_server: int,
        gang: int,
        restart_s: float,
        slo_target: float,
    ):
        self.rates, self.tick_s = rates, tick_s
        self.learn, self.judge = learn, judge
        self.servers, self.cps, self.gang = servers, cards_per_server, gang
        self.restart_s, self.slo_target = restart_s, slo_target

    def point(self, c: Contender, setting: float, span: Span) -> Point:
        model = c.model
        engines = c.engines(setting) if c.engines else 0
        if engines:
            model = replace(model, warm=engines)
        out = replay(self.rates, span.start, span.end, c.policy(setting), model, self.tick_s)
        train = Training(self.servers, self.cps, 1, c.lost_per_stop_s, self.restart_s, pack=c.pack)
        single = harvest(out.replicas, model.gpus_per_replica, self.tick_s, train)
        gangs = harvest(
            out.replicas, model.gpus_per_replica, self.tick_s, replace(train, gang=self.gang)
        )
        days = (span.end - span.start) * self.tick_s / DAY_S
        return {
            "headroom": setting,
            "parked_engines": engines,
            "replica_hours": round(out.replica_hours, 1),
            "slo_violating_min": round(out.slo_violating_min, 1),
            "unserved_requests": round(out.unserved_requests),
            "scale_ups": out.scale_ups,
            # per week, so the learning days' (6) and the judged (7) read alike
            "harvest_gpu_hours_week": round(single.gpu_hours * 7 / days, 1),
            "harvest_gang_gpu_hours_week": round(gangs.gpu_hours * 7 / days, 1),
            "lost_gpu_hours_week": round(single.lost_gpu_hours * 7 / days, 1),
        }

    def best_within(self, points: list[Point], span: Span) -> int | None:
        """The index of the point with the most harvest whose SLO-violating minutes stay
        within the target on ``span``; None when none does."""
        limit = self.slo_target * span.minutes(self.tick_s)
        ok = [i for i, p in enumerate(points) if p["slo_violating_min"] <= limit]
        return max(ok, key=lambda i: points[i]["harvest_gpu_hours_week"]) if ok else None

    def evaluate(self, c: Contender) -> dict[str, Any]:
        """Harvest@99 on the judged days (the best setting there, as the definition reads),
        and the setting learned on days 2-7 judged on days 8-14 (what an operator fixing
        it in advance gets; the fewest violating minutes when none met the target)."""
        learned = [self.point(c, s, self.learn) for s in c.settings]
        chosen = self.best_within(learned, self.learn)
        if chosen is None:
            chosen = min(range(len(learned)), key=lambda i: learned[i]["slo_violating_min"])
        judged = [self.point(c, s, self.judge) for s in c.settings]
        best = self.best_within(judged, self.judge)
        limit = self.slo_target * self.judge.minutes(self.tick_s)
        return {
            "anchor": c.anchor,
            "cold_lead_s": c.model.lead_s,
            "warm_lead_s": c.model.warm_lead_s if c.engines else None,
            "lost_per_stop_s": c.lost_per_stop_s,
            "replicas": "pack" if c.pack else "spread",
            "harvest_at_99": None if best is None else judged[best]["harvest_gpu_hours_week"],
            "harvest_gang_at_99": None
            if best is None
            else judged[best]["harvest_gang_gpu_hours_week"],
            "at_99": None if best is None else judged[best],
            "learned": {
                "on_learning_days": learned[chosen],
                "judged": judged[chosen],
                "met_slo_judged": judged[chosen]["slo_violating_min"] <= limit,
            },
            "front": judged,
        }


def slo_at_budget(front: list[Point], replica_hours: float) -> float | None:
    """SLO-violating minutes along the (replica-hours, minutes) front at ``replica_hours``,
    linear between the two points around it. Past its most expensive point, that point's
    minutes (an upper bound: more replicas held could only help); None below its cheapest."""
    best = pareto(front, "slo_violating_min")
    xs = [p["replica_hours"] for p in best]
    if not xs or replica_hours < xs[0]:
        return None
    return round(float(np.interp(replica_hours, xs, [p["slo_violating_min"] for p in best])), 1)


@dataclass(frozen=True)
class Mechanisms:
    """The leads and losses the contenders run on (from the scenario's ``harvest`` part)."""

    slow: ServiceModel  # the simulator's former 480 s
    product: ServiceModel  # today's defaults: 30 s grace + 60 s start-up
    warm_lead_s: float  # gpupool's warm path: vacate grace + wake + control, decision to serving
    cold_lost_s: float  # work lost per card by a job stopped without checkpointing on a signal
    vacate_lost_s: float  # by a job that saves on the signal: the short grace
    slo_budget: float = 0.01  # share of minutes that may violate: the SLO feedback's budget


def contenders(
    rates: np.ndarray, tick_s: int, learn_end: int, stable_s: float, m: Mechanisms
) -> list[Contender]:
    """The anchors (KPA at 480 s and 90 s, Dynamo-like constant and the seasonal forecaster
    at 90 s), gpupool's warm path (the reconciler's KPA with SLO feedback waking parked
    engines, fast vacate, packed), the same path with its headroom fixed (issue 49's, no
    feedback) and the clairvoyant ceiling (the real peak over the warm lead)."""
    mu = m.product.replica_rps
    utilisations = steps(0.5, 1.0, 0.05)
    headrooms = steps(0.8, 1.6, 0.05)
    stable = max(1, round(stable_s / tick_s))
    day = DAY_S // tick_s
    peak = float(np.max(rates[:learn_end]))

    def kpa(u: float) -> Policy:
        return Reactive(rates, tick_s, Kpa(mu, u, stable_s))

    def predicted(up: np.ndarray) -> Callable[[float], Policy]:
        return lambda h: Predictive(up, mu, h)

    def horizon(model: ServiceModel) -> int:
        return ceil(model.lead_s / tick_s) + 1

    seasonal = forecast.seasonal_quantile(rates, tick_s, horizon(m.product), 0.9, day, stable)
    constant = forecast.constant(rates, stable)
    warm_model = replace(m.product, warm_lead_s=m.warm_lead_s)
    ceiling_model = replace(m.product, grace_s=0, load_s=m.warm_lead_s)
    future = forecast.clairvoyant(rates, horizon(ceiling_model))
    as_util = [round(1 / u, 4) for u in utilisations]  # KPAs are swept as headroom 1/u

    def kpa_at(h: float) -> Policy:
        return kpa(round(1 / h, 6))

    def engines(h: float) -> int:
        """Parked engines: what the setting asks at the learning days' peak (host memory)."""
        return min(m.product.max_replicas, ceil(peak * h / mu - 1e-9))

    def warm_at(h: float) -> Policy:
        """The live reconciler's decider with SLO feedback, the setting its floor."""
        u = round(1 / h, 6)
        most = m.product.max_replicas
        return SloReactive(rates, tick_s, mu, u, stable_s, engines(h), most, m.slo_budget)

    return [
        Contender("kpa-480s", m.slow, m.cold_lost_s, False, as_util, kpa_at),
        Contender("kpa-90s", m.product, m.cold_lost_s, False, as_util, kpa_at),
        Contender(
            "constant-90s", m.product, m.cold_lost_s, False, headrooms, predicted(constant.peak)
        ),
        Contender(
            "seasonal-90s", m.product, m.cold_lost_s, False, headrooms, predicted(seasonal.peak)
        ),
        Contender(
            "gpupool-warm", warm_model, m.vacate_lost_s, True, as_util, warm_at, False, engines
        ),
        # issue 49's warm path: the same mechanism, its headroom fixed (no SLO feedback)
        Contender(
            "gpupool-warm-fixed",
            warm_model,
            m.vacate_lost_s,
            True,
            as_util,
            kpa_at,
            False,
            engines,
        ),
        Contender(
            "clairvoyant",
            ceiling_model,
            m.vacate_lost_s,
            True,
            steps(1.0, 1.3, 0.05),
            predicted(future.peak),
            False,
        ),
    ]


def harvest_report(bench: HarvestBench, cs: list[Contender]) -> dict[str, Any]:
    """Each contender's Harvest@99 and learned setting; the best anchor, the ceiling, the
    goals (a third of the gap to the ceiling closed; half the best anchor's SLO minutes at
    the budget)."""
    results = {c.name: bench.evaluate(c) for c in cs}
    anchors = {n: r for n, r in results.items() if r["anchor"]}
    scored = {n: r["harvest_at_99"] for n, r in anchors.items() if r["harvest_at_99"] is not None}
    best = max(scored, key=lambda n: scored[n]) if scored else None
    budget = _budget(anchors, best)
    for r in results.values():
        r["slo_violating_min_at_budget"] = slo_at_budget(r["front"], budget)
    ours = results["gpupool-warm"]["harvest_at_99"]
    ceiling = results["clairvoyant"]["harvest_at_99"]
    closed = None
    if best is not None and ours is not None and ceiling is not None and ceiling > scored[best]:
        closed = round((ours - scored[best]) / (ceiling - scored[best]), 3)
    anchor_slo = [
        r["slo_violating_min_at_budget"]
        for r in anchors.values()
        if r["slo_violating_min_at_budget"] is not None
    ]
    ours_slo = results["gpupool-warm"]["slo_violating_min_at_budget"]
    best_slo = min(anchor_slo) if anchor_slo else None
    limit = round(bench.slo_target * bench.judge.minutes(bench.tick_s), 1)
    warm = results["gpupool-warm"]["learned"]
    best_front = None if best is None else scored[best]
    return {
        # the headline: out of sample, what each contender's setting chosen on days 2-7
        # gets on days 8-14, its front's Harvest@99 (read on days 8-14 themselves) beside it
        "headline": {n: _headline(r) for n, r in results.items()},
        "slo_limit_min": limit,
        # gpupool-warm's learned setting holds the target on days 8-14 and harvests at
        # least the best anchor's front Harvest@99
        "learned_goal_met": warm["met_slo_judged"]
        and best_front is not None
        and warm["judged"]["harvest_gpu_hours_week"] >= best_front,
        "slo_target_minutes_fraction": bench.slo_target,
        "gang_cards": bench.gang,
        # the replica-hours the best anchor needs for Harvest@99 (or, none reaching the
        # target, those of the anchors' fewest SLO-violating minutes)
        "budget_replica_hours": budget,
        "best_anchor": best,
        "gap_closed": closed,
        "harvest_goal_met": closed is not None and closed >= 1 / 3,
        "best_anchor_slo_at_budget": best_slo,
        "slo_goal_met": ours_slo is not None and best_slo is not None and ours_slo <= best_slo / 2,
        "contenders": results,
    }


def _headline(r: dict[str, Any]) -> dict[str, Any]:
    """One contender's out-of-sample figures and its front's beside them."""
    judged = r["learned"]["judged"]
    return {
        "headroom": judged["headroom"],
        "harvest_gpu_hours_week": judged["harvest_gpu_hours_week"],
        "harvest_gang_gpu_hours_week": judged["harvest_gang_gpu_hours_week"],
        "slo_violating_min": judged["slo_violating_min"],
        "met_slo": r["learned"]["met_slo_judged"],
        "front_harvest_at_99": r["harvest_at_99"],
        "front_slo_violating_min_at_budget": r["slo_violating_min_at_budget"],
    }


def _budget(anchors: dict[str, dict[str, Any]], best: str | None) -> float:
    if best is not None:
        return float(anchors[best]["at_99"]["replica_hours"])
    points = [p for r in anchors.values() for p in r["front"]]
    return float(
        min(points, key=lambda p: (p["slo_violating_min"], p["replica_hours"]))["replica_hours"]
    )

"""Reactive against predictive autoscaling on a request-rate trace, at equal cost.

Both policies are swept over their headroom. The reactive baseline is swept also over
Knative's scale-down delay and only its Pareto front (fewest under-provisioned minutes for the
replica-hours) is kept, so it is never weakened. At the predictive policy's default the
reactive point compared is the cheapest front point whose replica-hours are the same or higher.
The trace is scaled so that the learning days' peak needs ``peak_share_of_pool`` of the pool.
"""

from dataclasses import replace
from typing import Any

import numpy as np

from gpupool.autoscale import forecast
from gpupool.autoscale.fronts import Point, pareto, steps
from gpupool.autoscale.harvest_at import HarvestBench, Mechanisms, Span, contenders, harvest_report
from gpupool.autoscale.kpa import Kpa
from gpupool.autoscale.load import bursty_ticks, ticks_from_windows
from gpupool.autoscale.predictive import Predictive
from gpupool.autoscale.reactive import Reactive
from gpupool.autoscale.replay import Policy, replay
from gpupool.autoscale.scenario import AutoscaleScenario
from gpupool.extras import have
from gpupool.model import SpecError

DAY_S = 86_400


def at_equal_cost(front: list[Point], replica_hours: float) -> Point | None:
    """The cheapest point of ``front`` costing at least ``replica_hours``."""
    return next((p for p in front if p["replica_hours"] >= replica_hours), None)


def interpolated(front: list[Point], replica_hours: float, key: str) -> float | None:
    """``key`` (minutes) of ``front`` at exactly ``replica_hours``, linear between the two
    front points around it (the cheapest-point-above rule favours the front by up to a step);
    None outside the front."""
    xs = [p["replica_hours"] for p in front]
    if not xs or replica_hours < xs[0] or replica_hours > xs[-1]:
        return None
    return round(float(np.interp(replica_hours, xs, [p[key] for p in front])), 1)


class Comparison:
    """One trace, one scenario: the load per tick and the judged span."""

    def __init__(
        self,
        window_rates: np.ndarray,
        window_s: int,
        scenario: AutoscaleScenario,
        window_cv2: np.ndarray | None = None,
    ):
        self.scenario = scenario
        self.model = scenario.service_model()
        tick = scenario.tick_s
        learn_w = scenario.learn_days * DAY_S // window_s
        judge_w = scenario.judge_days * DAY_S // window_s
        if len(window_rates) <= learn_w:
            raise SpecError(
                f"trace: {len(window_rates)} windows of {window_s} s; learning needs "
                f"{scenario.learn_days} days and then days to judge",
                field="trace",
            )
        peak = float(np.max(window_rates[:learn_w]))
        if peak <= 0:
            raise SpecError("trace: no requests in the learning days", field="trace")
        s = scenario.service
        need = s.peak_share_of_pool * scenario.pool.cards / s.gpus_per_replica
        self.scale = need * s.replica_rps / peak
        self.window_rates = np.asarray(window_rates) * self.scale
        if scenario.arrivals == "bursty":
            if window_cv2 is None:
                raise SpecError("arrivals: bursty needs the trace's inter-arrival CVs")
            self.rates = bursty_ticks(self.window_rates, window_cv2, window_s, tick, scenario.seed)
        else:
            self.rates = ticks_from_windows(self.window_rates, window_s, tick)
        self.window_ticks = window_s // tick
        self.start = learn_w * self.window_ticks
        self.end = min(len(self.rates), (learn_w + judge_w) * self.window_ticks)
        self.lead = int(np.ceil(self.model.lead_s / tick))

    def _point(self, policy: Policy, **setting: float) -> Point:
        out = replay(self.rates, self.start, self.end, policy, self.model, self.scenario.tick_s)
        return {**setting, **out.summary()}

    def reactive_points(self) -> list[Point]:
        r = self.scenario.reactive
        points = []
        for delay in r.scale_down_delays_s:
            for u in steps(r.utilisation_from, r.utilisation_to, r.utilisation_step):
                kpa = Kpa(self.model.replica_rps, u, r.stable_s, r.panic_threshold, delay)
                policy = Reactive(self.rates, self.scenario.tick_s, kpa)
                headroom = round(1 / u, 4)
                points.append(self._point(policy, headroom=headroom, scale_down_delay_s=delay))
        return points

    def forecasts(self) -> dict[str, np.ndarray]:
        """Forecast peak per tick over the lead time, by predictor."""
        p = self.scenario.predictive
        tick = self.scenario.tick_s
        stable = max(1, round(self.scenario.reactive.stable_s / tick))
        seasonal = forecast.seasonal_quantile(
            self.rates,
            tick,
            self.lead + 1,
            p.quantile,
            self.start,
            stable_ticks=stable,
            volatility_ticks=round(p.volatility_hours * 3600 / tick),
        )
        learn_w = self.start // self.window_ticks
        peaks = {
            "seasonal-quantile": seasonal.peak,
            "constant": forecast.constant(self.rates, stable).peak,
        }
        if have("statsmodels"):  # the comparison-only forecaster (gpupool[forecast])
            peaks["arima"] = forecast.arima(self.window_rates, self.window_ticks, learn_w).peak
        return peaks

    def predictive_points(self, up: np.ndarray) -> list[Point]:
        p = self.scenario.predictive
        headrooms = sorted({*steps(p.headroom_from, p.headroom_to, p.headroom_step), p.headroom})
        return [
            self._point(Predictive(up, self.model.replica_rps, h), headroom=h) for h in headrooms
        ]

    def coverage(self, up: np.ndarray) -> float:
        """How often the load's real peak over the lead time stayed within the forecast."""
        judged = np.arange(self.start, self.end - self.lead - 1)
        future = np.array([self.rates[t + 1 : t + self.lead + 2].max() for t in judged[::6]])
        return float(np.mean(future <= up[judged[::6]] + 1e-9))

    def harvest(self) -> dict[str, Any]:
        """Harvest@99 and SLO minutes at a budget: anchors, the warm path, the ceiling."""
        s, h = self.scenario, self.scenario.harvest
        day = DAY_S // s.tick_s
        bench = HarvestBench(
            self.rates,
            s.tick_s,
            Span(day, self.start),
            Span(self.start, self.end),
            s.pool.servers,
            s.pool.cards_per_server,
            h.gang,
            h.restart_s,
            h.slo_target,
        )
        slow = replace(self.model, grace_s=h.slow_grace_s, load_s=h.slow_load_s)
        m = Mechanisms(
            slow,
            self.model,
            h.warm_lead_s,
            self.model.restart_cost_s,
            h.vacate_lost_s,
            h.slo_target,
        )
        return harvest_report(
            bench, contenders(self.rates, s.tick_s, self.start, s.reactive.stable_s, m)
        )


def compare(
    window_rates: np.ndarray,
    window_s: int,
    scenario: AutoscaleScenario,
    window_cv2: np.ndarray | None = None,
) -> dict[str, Any]:
    """The comparison's JSON: both policies at equal cost, their curves, the other predictors.
    ``window_cv2``: each window's squared inter-arrival CV (needed for bursty arrivals)."""
    c = Comparison(window_rates, window_s, scenario, window_cv2)
    reactive_front = pareto(c.reactive_points())
    default = scenario.predictive.headroom
    curves: dict[str, list[Point]] = {"reactive": reactive_front}
    at_default: dict[str, Point] = {}
    coverage: dict[str, float] = {}
    for name, up in c.forecasts().items():
        points = c.predictive_points(up)
        curves[f"predictive-{name}"] = points
        at_default[name] = next(p for p in points if p["headroom"] == default)
        coverage[name] = round(c.coverage(up), 3)
    predictive = at_default["seasonal-quantile"]
    reactive = at_equal_cost(reactive_front, predictive["replica_hours"])
    others = {
        name: {"predictive": p, "reactive": at_equal_cost(reactive_front, p["replica_hours"])}
        for name, p in at_default.items()
    }
    return {
        "scenario": scenario.name,
        "judged_days": round((c.end - c.start) * scenario.tick_s / DAY_S, 2),
        "trace_scale": round(c.scale, 6),
        "lead_s": c.model.lead_s,
        "predictive": predictive,
        "reactive": reactive,
        "underprovisioned_ratio": _ratio(predictive, reactive),
        "arrivals": scenario.arrivals,
        "seed": scenario.seed,
        # the reactive front at exactly the predictive point's replica-hours (interpolated)
        "reactive_interpolated": {
            key: interpolated(reactive_front, predictive["replica_hours"], key)
            for key in ("underprovisioned_min", "slo_violating_min")
        },
        "forecast_coverage": coverage,
        "quantile": scenario.predictive.quantile,
        "predictors": others,
        "curves": curves,
        "harvest": c.harvest(),
    }


def harvest_only(
    window_rates: np.ndarray,
    window_s: int,
    scenario: AutoscaleScenario,
    window_cv2: np.ndarray | None = None,
) -> dict[str, Any]:
    """Only Harvest@99 and the out-of-sample headline (``compare``'s ``harvest``), without
    the reactive and predictive curves, which take as long again."""
    c = Comparison(window_rates, window_s, scenario, window_cv2)
    return {
        "scenario": scenario.name,
        "judged_days": round((c.end - c.start) * scenario.tick_s / DAY_S, 2),
        "trace_scale": round(c.scale, 6),
        "arrivals": scenario.arrivals,
        "seed": scenario.seed,
        "harvest": c.harvest(),
    }


def _ratio(predictive: Point, reactive: Point | None) -> float | None:
    """Predictive's under-provisioned minutes over reactive's (None: no reactive point)."""
    if reactive is None or reactive["underprovisioned_min"] == 0:
        return None
    return round(float(predictive["underprovisioned_min"] / reactive["underprovisioned_min"]), 3)

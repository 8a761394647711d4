"""How many replicas a service wants, from its replicas' readings (pure logic, no I/O).

The load is the service's metric summed over its ready replicas: requests/s from the
counters' increase since the last reading, requests in flight, GPU utilisation (% from the
agents' telemetry of the replicas' cards), or the p95 latency of the
requests finished since the last reading (from the histograms' buckets, scaled as the HPA
does: ready x p95 / target). The online KPA (``gpupool.autoscale.kpa``) turns it into desired
replicas; ``predictive`` also sizes for the forecast peak over the start-up time.
"""

from dataclasses import dataclass, field
from math import ceil

from gpupool.autoscale.kpa import Kpa
from gpupool.autoscale.reading import Reading
from gpupool.autoscale.slo_feedback import SloFeedback, violated


def _p95(buckets: dict[float, float]) -> float | None:
    """The upper bound of the bucket holding the 95th percentile (None: no requests)."""
    bounds = sorted(buckets)
    if not bounds or buckets[bounds[-1]] <= 0:
        return None
    total = buckets[bounds[-1]]
    for le in bounds:
        if buckets[le] >= 0.95 * total:
            return le
    return bounds[-1]


@dataclass
class ScalerState:
    """What the autoscaler remembers of one service between readings."""

    kpa: Kpa
    settings: "ScalerSettings"
    counters: dict[int, tuple[float, float]] = field(default_factory=dict)
    buckets: dict[int, dict[float, float]] = field(default_factory=dict)
    feedback: SloFeedback = field(default_factory=SloFeedback)
    short: bool = False  # a reading of this minute so far found the load above capacity

    def load(
        self, metric: str, target: float, readings: dict[int, Reading], now: float
    ) -> float | None:
        """The metric over the ready replicas now (None: nothing to judge by yet)."""
        ready = {j: r for j, r in readings.items() if r.ready}
        if metric == "gpu_util":
            seen = [r.gpu_util for r in ready.values() if r.gpu_util is not None]
            return sum(seen) if seen else None
        if metric == "concurrency":
            seen = [r.in_flight for r in ready.values() if r.in_flight is not None]
            return sum(seen) if seen else None
        if metric == "rps":
            rate, measured = 0.0, False
            for job, r in ready.items():
                if r.requests_total is None:
                    continue
                before = self.counters.get(job)
                at = now if r.at is None else r.at  # when it was read, where it says
                self.counters[job] = (at, r.requests_total)
                if before is not None and at > before[0]:
                    grew = r.requests_total - before[1]
                    rate += (grew if grew >= 0 else r.requests_total) / (at - before[0])
                    measured = True
            self._forget(ready)
            return rate if measured else None
        delta: dict[float, float] = {}
        for job, r in ready.items():
            last = self.buckets.get(job, {})
            self.buckets[job] = dict(r.buckets)
            for le, count in r.buckets.items():
                delta[le] = delta.get(le, 0.0) + max(0.0, count - last.get(le, 0.0))
        self._forget(ready)
        p95 = _p95(delta)
        return None if p95 is None else len(ready) * p95 / target

    def _forget(self, ready: dict[int, Reading]) -> None:
        for gone in set(self.counters) - set(ready):
            del self.counters[gone]
        for gone in set(self.buckets) - set(ready):
            del self.buckets[gone]


# (metric, target, utilisation, stable_s, scale_down_delay_s): a change starts a fresh state
ScalerSettings = tuple[str, float, float, float, float]


def new_state(
    metric: str, target: float, utilisation: float, stable_s: float, delay_s: float
) -> ScalerState:
    """A fresh state; latency is judged per replica-unit (target folded into the load)."""
    per = 1.0 if metric == "latency_p95" else target
    return ScalerState(
        Kpa(per, utilisation, stable_s, 2.0, delay_s),
        (metric, target, utilisation, stable_s, delay_s),
    )


def judge_minute(state: ScalerState, load: float, ready: int) -> bool:
    """One minute's SLO verdict (``autoscale.slo_feedback``) from its load reading and the
    ready replicas: steps the controller and sets the KPA's headroom to the declared one
    raised by it. Returns whether the minute violated."""
    bad = state.short or violated(load, ready, state.kpa.per_replica)
    state.short = False
    state.feedback = state.feedback.step(bad)
    state.kpa.utilisation = state.settings[2] / state.feedback.raised
    return bad


def decide(
    state: ScalerState,
    load: float | None,
    now: float,
    ready: int,
    starting: int,
    bounds: tuple[int, int],
    forecast: float | None = None,
) -> int:
    """Desired replicas: the KPA's (or, with no reading yet, what is there), at least the
    forecast peak's when there is one, within ``bounds``."""
    if load is None:
        want = ready + starting
    else:
        state.short = state.short or violated(load, ready, state.kpa.per_replica)
        state.kpa.observe(now, load)
        want = state.kpa.desired(now, ready, starting)
    if forecast is not None:
        per = state.kpa.per_replica * state.kpa.utilisation
        want = max(want, ceil(forecast / per - 1e-9))
    low, high = bounds
    return min(high, max(low, want))

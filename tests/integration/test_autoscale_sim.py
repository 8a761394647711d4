"""Autoscaling policies and their replay (pure logic): the KPA-like baseline reacts as Knative
does, a replica serves only after its lead time, forecasts never see the future, and the
comparison on the shipped ServeGen excerpt matches policies at equal replica-hours."""

import json

import numpy as np
import pytest

from gpupool.autoscale import forecast
from gpupool.autoscale.compare import at_equal_cost, compare
from gpupool.autoscale.fronts import pareto
from gpupool.autoscale.kpa import Kpa
from gpupool.autoscale.load import ticks_from_windows
from gpupool.autoscale.reactive import Reactive
from gpupool.autoscale.replay import ServiceModel, replay
from gpupool.autoscale.scenario import AutoscaleScenario, load_scenario
from gpupool.model import SpecError
from gpupool.sim.traces.servegen import load_rates
from tests.support.paths import DATA, EXAMPLES

EXCERPT = DATA / "servegen" / "m-large"
EXAMPLE = EXAMPLES / "autoscale-scenario.yaml"


def test_reactive_sizes_for_the_target_panics_on_a_burst_and_delays_scale_in():
    rates = np.array([50.0] * 12 + [200.0] * 3 + [50.0] * 21)
    kpa = Reactive(rates, 10, Kpa(10, utilisation=0.5))
    ready = [10] * 13 + [40] * 23  # what the cluster had when each tick was decided
    wants = [kpa.desired(i, ready=ready[i], starting=0) for i in range(36)]
    assert wants[11] == 10  # 50 / (10 * 0.5)
    # the burst: the 6-s panic window sees 40 replicas' worth, 4x the 10 ready -> panic
    assert wants[12] == 40
    # in panic (one 60-s stable window) replicas only go up, though the load fell back
    assert wants[16] == wants[17] == 40
    # after it: the stable window's need (100 req/s -> 20), halving at most per decision
    assert wants[18] == 20
    kpa = Reactive(rates, 10, Kpa(10, utilisation=0.5))
    wants = [kpa.desired(i, ready=20, starting=0) for i in range(36)]
    assert wants[35] == 10  # 50 req/s; 20 ready halve to 10, no further in one decision
    plain = Reactive(rates, 10, Kpa(10, utilisation=1.0))
    held = Reactive(rates, 10, Kpa(10, utilisation=1.0, scale_down_delay_s=60))
    now = [plain.desired(i, ready=20, starting=0) for i in range(36)]
    late = [held.desired(i, ready=20, starting=0) for i in range(36)]
    # the delay keeps the highest desired of the last minute
    assert all(late[i] == max(now[max(0, i - 5) : i + 1]) for i in range(36))
    assert late[19] > now[19] and late[35] == now[35] == 10


def test_a_replica_serves_only_after_the_lead_time_and_the_queue_drops_past_the_timeout():
    rates = np.array([10.0] * 6 + [30.0] * 60)
    model = ServiceModel(replica_rps=10, load_s=30, grace_s=30, timeout_s=20, max_replicas=10)
    kpa = Reactive(rates, 10, Kpa(10, utilisation=1.0))
    out = replay(rates, 0, len(rates), kpa, model, tick_s=10)
    # decided at the end of the burst's first tick, ready 1 + 6 ticks later: 7 short ticks
    assert out.underprovisioned_min == pytest.approx(7 * 10 / 60)
    # 20 req/s short for 7 ticks = 1,400 requests; one replica's queue holds 10 * 20 s
    assert out.unserved_requests == pytest.approx(1400 - 200)
    assert out.wait_p95_s == pytest.approx(20)
    assert out.scale_ups == 2 and out.replicas[-1] == 3
    assert out.replica_hours == pytest.approx(out.replicas.sum() * 10 / 3600)
    assert out.training_gpu_hours == pytest.approx(40 * 66 * 10 / 3600 - out.replica_hours)


def test_forecasts_never_use_load_after_the_tick_they_forecast_at():
    trace, _ = load_rates(EXCERPT)
    rates = ticks_from_windows(trace.total[: 144 * 9], 600, 60)
    start, cut = 144 * 7 * 10, 144 * 8 * 10 + 500
    changed = rates.copy()
    changed[cut + 1 :] *= 3.0  # a different future from tick cut+1 on
    for make in (
        lambda r: forecast.seasonal_quantile(r, 60, 5, 0.9, start).peak,
        lambda r: forecast.seasonal_quantile(r, 60, 5, 0.9, start, volatility_ticks=360).peak,
        lambda r: forecast.constant(r).peak,
    ):
        a, b = make(rates), make(changed)
        assert np.array_equal(a[start : cut + 1], b[start : cut + 1])
        assert not np.array_equal(a, b)
    windows, changed_w = trace.total[: 144 * 9], trace.total[: 144 * 9].copy()
    changed_w[144 * 8 + 50 :] *= 3.0
    a = forecast.arima(windows, 10, 144 * 7).peak
    b = forecast.arima(changed_w, 10, 144 * 7).peak
    # the tick forecasts window w+1 from windows up to w (the window it is in)
    assert np.allclose(a[: (144 * 8 + 49) * 10], b[: (144 * 8 + 49) * 10])


def test_the_seasonal_quantile_holds_the_hours_rise():
    day = np.concatenate([np.full(12, 10.0), np.full(12, 20.0)])  # 10 req/s, then 20
    rates = np.tile(np.repeat(day, 360), 3)  # three days, one-hour bins of 10-s ticks
    peak = forecast.seasonal_quantile(rates, 10, 30, 0.99, 2 * 8640, neighbours=0).peak
    rise = 2 * 8640 + 12 * 360 - 10  # ten ticks before 10 -> 20 on day 3
    assert peak[rise] == pytest.approx(20.0, rel=1e-3)  # learned: this hour doubles
    assert peak[rise - 3600] == pytest.approx(10.0, rel=1e-3)  # mid-hour: no rise seen


def test_pareto_and_equal_cost_pick_the_cheapest_point_at_or_above_the_cost():
    pts = [
        {"replica_hours": 10, "underprovisioned_min": 50},
        {"replica_hours": 12, "underprovisioned_min": 60},  # dominated
        {"replica_hours": 14, "underprovisioned_min": 20},
        {"replica_hours": 20, "underprovisioned_min": 0},
    ]
    front = pareto(pts)
    assert [p["replica_hours"] for p in front] == [10, 14, 20]
    assert at_equal_cost(front, 13)["replica_hours"] == 14
    assert at_equal_cost(front, 21) is None


def _quick() -> AutoscaleScenario:
    scenario = load_scenario(EXAMPLE)
    scenario.tick_s = 60
    scenario.reactive.scale_down_delays_s = [0, 600]
    scenario.reactive.utilisation_step = 0.1
    scenario.predictive.headroom_step = 0.1
    return scenario


def test_compare_on_the_excerpt_matches_at_equal_cost():
    trace, _ = load_rates(EXCERPT)
    result = compare(trace.total, trace.window_s, _quick())
    assert result["judged_days"] == 7 and result["lead_s"] == 90  # the product's 30 + 60 s
    pred, react = result["predictive"], result["reactive"]
    assert pred["headroom"] == 1.0
    assert react["replica_hours"] >= pred["replica_hours"]
    front = result["curves"]["reactive"]
    cheaper = [p for p in front if p["replica_hours"] < react["replica_hours"]]
    assert all(p["replica_hours"] < pred["replica_hours"] for p in cheaper)
    assert set(result["predictors"]) == {"seasonal-quantile", "constant", "arima"}
    # the trace is scaled so the learning days' peak needs half the 40 cards
    assert max(p["replica_hours"] for p in front) < 40 * 24 * 7
    assert 0.5 < result["forecast_coverage"]["seasonal-quantile"] <= 1.0
    json.dumps(result)


def test_a_bad_scenario_or_a_short_trace_is_named(tmp_path):
    with pytest.raises(SpecError, match=r"nonexistent\.yaml"):
        load_scenario(tmp_path / "nonexistent.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("service: {min_replicas: 5, max_replicas: 2}\n")
    with pytest.raises(SpecError, match=r"service: .*min_replicas is above max_replicas"):
        load_scenario(bad)
    bad.write_text("predictive: {quantile: 1.5}\n")
    with pytest.raises(SpecError, match=r"predictive\.quantile"):
        load_scenario(bad)
    bad.write_text("pool: [unclosed\n")
    with pytest.raises(SpecError, match="not valid YAML"):
        load_scenario(bad)
    with pytest.raises(SpecError, match="learning needs 7 days"):
        compare(np.ones(144 * 3), 600, AutoscaleScenario())
    with pytest.raises(SpecError, match="no requests in the learning days"):
        compare(np.zeros(144 * 14), 600, AutoscaleScenario())

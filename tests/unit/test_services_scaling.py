"""The live autoscaler's pure parts: reading replicas' Prometheus text (garbage reported, not
raised), turning readings into load per metric, which replicas a scaling step adds, drains
and stops, and the live forecast with its fallbacks."""

from dataclasses import dataclass

import numpy as np
import pytest

from gpupool.autoscale.reading import Reading
from gpupool.autoscale.scale_plan import plan_scale, shrinks
from gpupool.autoscale.scaler import decide, new_state
from gpupool.replicas.probe import parse_metrics
from gpupool.server.services.predict import coverage, live_forecast, per_minute

METRICS = """\
# TYPE gpupool_replica_requests counter
gpupool_replica_requests_total{route="chat"} 100
gpupool_replica_requests_total{route="embed"} 20
# TYPE gpupool_replica_requests_in_flight gauge
gpupool_replica_requests_in_flight 3
# TYPE gpupool_replica_request_duration_seconds histogram
gpupool_replica_request_duration_seconds_bucket{le="0.1"} 50
gpupool_replica_request_duration_seconds_bucket{le="0.5"} 110
gpupool_replica_request_duration_seconds_bucket{le="+Inf"} 120
gpupool_replica_request_duration_seconds_count 120
gpupool_replica_request_duration_seconds_sum 20
"""


def test_metrics_text_is_read_and_garbage_is_named():
    reading = parse_metrics(METRICS)
    assert (reading.requests_total, reading.in_flight, reading.error) == (120, 3, "")
    assert reading.buckets == {0.1: 50, 0.5: 110, float("inf"): 120}
    bad = parse_metrics("gpupool_replica_requests_total {{{ not prometheus\n")
    assert bad.ready and bad.error.startswith("metrics: not the Prometheus text format")


# a vLLM OpenAI server's /metrics, in the shape vLLM's production metrics take (vLLM docs,
# "Production Metrics": labels engine, model_name, finished_reason)
VLLM_METRICS = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="Qwen/Qwen3-0.6B"} 3.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="Qwen/Qwen3-0.6B"} 2.0
# HELP vllm:request_success_total Count of successfully processed requests.
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="stop",model_name="Qwen/Qwen3-0.6B"} 40.0
vllm:request_success_total{engine="0",finished_reason="length",model_name="Qwen/Qwen3-0.6B"} 2.0
# HELP vllm:e2e_request_latency_seconds Histogram of e2e request latency in seconds.
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{engine="0",le="1.0",model_name="Qwen/Qwen3-0.6B"} 30.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="+Inf",model_name="Qwen/Qwen3-0.6B"} 42.0
vllm:e2e_request_latency_seconds_count{engine="0",model_name="Qwen/Qwen3-0.6B"} 42.0
vllm:e2e_request_latency_seconds_sum{engine="0",model_name="Qwen/Qwen3-0.6B"} 31.5
"""


def test_a_vllm_server_is_read_by_its_own_metric_names_where_ours_are_absent():
    reading = parse_metrics(VLLM_METRICS)
    assert (reading.requests_total, reading.in_flight, reading.error) == (42, 5, "")
    assert reading.buckets == {1.0: 30, float("inf"): 42}
    both = parse_metrics(METRICS + VLLM_METRICS)  # ours win where a replica has both
    assert (both.requests_total, both.in_flight) == (120, 3)


def test_load_per_metric_from_successive_readings():
    rps = new_state("rps", 10, 0.7, 60, 0)
    assert rps.load("rps", 10, {1: Reading(True, requests_total=100)}, 0.0) is None
    two = {1: Reading(True, requests_total=160), 2: Reading(True, requests_total=5)}
    assert rps.load("rps", 10, two, 2.0) == pytest.approx(30.0)  # replica 2 is new
    # a counter that went back (the replica restarted) counts from zero
    assert rps.load("rps", 10, {1: Reading(True, requests_total=8)}, 4.0) == pytest.approx(4.0)
    conc = new_state("concurrency", 2, 1.0, 60, 0)
    busy = {1: Reading(True, in_flight=3), 2: Reading(True, in_flight=4), 3: Reading(False)}
    assert conc.load("concurrency", 2, busy, 0.0) == 7
    util = new_state("gpu_util", 70, 1.0, 60, 0)
    cards = {1: Reading(True, gpu_util=90.0), 2: Reading(True, gpu_util=60.0), 3: Reading(True)}
    assert util.load("gpu_util", 70, cards, 0.0) == 150.0
    assert decide(util, 150.0, 0.0, 2, 0, (1, 8)) == 3  # 150% over replicas of 70% each
    lat = new_state("latency_p95", 0.2, 1.0, 60, 0)
    first = {1: Reading(True, buckets={0.1: 10, 0.5: 10, float("inf"): 10})}
    assert lat.load("latency_p95", 0.2, first, 0.0) == pytest.approx(0.1 / 0.2)
    slower = {1: Reading(True, buckets={0.1: 10, 0.5: 30, float("inf"): 30})}
    # the 20 requests since the last reading took up to 0.5 s: 2.5x the target on 1 replica
    assert lat.load("latency_p95", 0.2, slower, 2.0) == pytest.approx(2.5)


def test_decide_keeps_bounds_and_sizes_for_the_forecast():
    state = new_state("rps", 10, 0.5, 60, 0)
    assert decide(state, None, 0.0, 2, 1, (1, 8)) == 3  # no reading: what is there
    assert decide(state, 45.0, 2.0, 3, 0, (1, 8)) == 8  # 45 / (10 * 0.5) = 9, capped
    state = new_state("rps", 10, 0.5, 60, 0)
    assert decide(state, 10.0, 0.0, 2, 0, (1, 8), forecast=30.0) == 6


def test_the_live_forecast_needs_a_day_and_stands_aside_when_it_misses():
    minutes = np.arange(0, 3 * 86400, 60.0)
    daily = 10 + 5 * np.sin(2 * np.pi * minutes / 86400)
    value, note = live_forecast(minutes[:600], daily[:600], np.full(600, np.nan), 120)
    assert value is None and note.startswith("predictive: needs a day of load history (has 10.0")
    value, note = live_forecast(minutes, daily, np.full(len(minutes), np.nan), 120)
    assert value is not None and daily[-1] <= value <= daily[-1] * 1.05
    assert note.startswith("predictive: forecast peak")
    missed = np.full(len(minutes), 1.0)  # every forecast of the last day far below the load
    value, note = live_forecast(minutes, daily, missed, 120)
    assert value is None and "covered 0% of the last day's peaks" in note


def test_samples_are_put_on_a_minute_grid_and_coverage_counts_passed_forecasts():
    times = np.array([0.0, 60.0, 240.0])
    assert per_minute(times, np.array([1.0, 2.0, 5.0])).tolist() == [1.0, 2.0, 2.0, 2.0, 5.0]
    loads = np.array([1.0, 2.0, 3.0, 4.0])
    times = np.array([0.0, 60.0, 120.0, 180.0])
    forecasts = np.array([2.0, 2.5, np.nan, np.nan])
    assert coverage(times, loads, forecasts, 60, 0.0) == (0.5, 2)


@dataclass
class _Replica:
    job_id: int
    state: str = "running"
    ready: bool = True
    ready_at: float | None = 0.0
    draining_since: float | None = None


def test_scale_in_stops_the_unready_first_and_drains_the_youngest_ready():
    replicas = [
        _Replica(1, ready_at=10.0),
        _Replica(2, ready_at=50.0),
        _Replica(3, state="pending", ready=False, ready_at=None),
        _Replica(4, ready=False, ready_at=None),
        _Replica(5, ready_at=30.0),
    ]
    d = plan_scale(replicas, {2: 3.0}, 2, 100.0, service="chat", drain_s=30)
    assert d.add == 0 and d.drain == (2,) and not d.held
    assert d.stop == ((3, "scaled in (service chat)"), (4, "scaled in (service chat)"))
    idle = plan_scale(replicas, {2: 0.0}, 2, 100.0, service="chat", drain_s=30)
    assert idle.drain == (2,) and (2, "scaled in (service chat), drained") in idle.stop


def test_a_draining_replica_stops_when_idle_or_after_the_drain_time_and_is_not_counted():
    replicas = [_Replica(1), _Replica(2, ready=False, draining_since=90.0)]
    assert plan_scale(replicas, {2: 4.0}, 1, 100.0, service="s", drain_s=30).stop == ()
    late = plan_scale(replicas, {2: 4.0}, 1, 121.0, service="s", drain_s=30)
    assert late.stop == ((2, "scaled in (service s), drained"),) and late.add == 0
    unknown = plan_scale(replicas, {}, 1, 100.0, service="s", drain_s=30)
    assert unknown.stop == ()  # no reading: not known to be idle


def test_scale_out_waits_while_replacements_back_off_and_advisory_holds_scale_in():
    one = [_Replica(1)]
    assert plan_scale(one, {}, 3, 0.0, service="s", drain_s=30).add == 2
    assert plan_scale(one, {}, 3, 0.0, service="s", drain_s=30, backing_off=True).add == 0
    three = [_Replica(1), _Replica(2), _Replica(3)]
    assert shrinks(three, 1) and not shrinks(three, 3)
    held = plan_scale(three, {}, 1, 0.0, service="s", drain_s=30, may_scale_in=False)
    assert held.held and held.drain == () and held.stop == ()

"""What the autoscaling simulator measures of users' harm (issue 49): SLO-violating minutes,
bursts inside a window drawn from the trace's own CV, equal cost by interpolation (pure)."""

import numpy as np
import pytest

from gpupool.autoscale.compare import interpolated
from gpupool.autoscale.load import bursty_ticks, ticks_from_windows
from gpupool.autoscale.replay import ServiceModel, replay, slo_violating_minutes
from gpupool.sim.traces.servegen import RateTrace


class Fixed:
    def __init__(self, n: int):
        self.n = n

    def desired(self, i: int, ready: int, starting: int) -> int:
        return self.n


def test_a_minute_violates_when_over_one_percent_of_its_requests_are_harmed():
    arrivals = np.full(12, 100.0)  # two minutes of 10-s ticks
    harmed = np.zeros(12)
    harmed[0] = 6.0  # 6 of the first minute's 600: exactly 1%, not over
    harmed[8] = 7.0  # 7 of the second's: over
    assert slo_violating_minutes(arrivals, harmed, 10, 0.01) == 1.0
    assert slo_violating_minutes(np.zeros(6), np.zeros(6), 10, 0.01) == 0.0  # nobody came


def test_a_short_tick_with_an_empty_queue_harms_nobody_a_backlog_after_it_does():
    """Under-provisioned minutes count capacity; SLO minutes count requests that waited."""
    model = ServiceModel(replica_rps=10, load_s=0, grace_s=0, min_replicas=1, max_replicas=1)
    rates = np.array([10.0] * 6 + [10.5] * 6 + [10.0] * 6)  # 5% over for one minute
    out = replay(rates, 0, len(rates), Fixed(1), model, 10)
    assert out.underprovisioned_min == 1.0  # the over-loaded minute
    # its backlog grows 5 requests a tick: waits stay under 2 s only for the first 3 ticks
    assert out.slo_violating_min == 2.0  # that minute, and the next: its queue is still there


def test_bursty_ticks_keep_each_windows_rate_and_have_its_variance():
    rates, cv2 = np.array([50.0, 0.0, 20.0]), np.array([4.0, 1.0, 0.0])
    draws = np.stack([bursty_ticks(rates, cv2, 600, 10, seed) for seed in range(200)])
    first = draws[:, :60] * 10  # counts per tick, window 0
    assert first.mean() == pytest.approx(500, rel=0.02)
    assert first.var() == pytest.approx(500 * 4.0, rel=0.1)  # rate x t x CV^2
    assert np.all(draws[:, 60:120] == 0)  # no load: none drawn
    assert np.allclose(draws[:, 120:], 20.0)  # CV 0: the smooth load
    assert np.array_equal(
        bursty_ticks(rates, cv2, 600, 10, 7), bursty_ticks(rates, cv2, 600, 10, 7)
    )
    assert np.allclose(ticks_from_windows(rates, 600, 10)[:60], 50.0)


def test_the_totals_burstiness_weighs_each_client_by_its_rate():
    trace = RateTrace(
        600,
        {"a": np.array([3.0, 0.0]), "b": np.array([1.0, 0.0])},
        {"a": np.array([1.0, 0.0]), "b": np.array([3.0, 0.0])},
    )
    assert trace.burst_cv2.tolist() == [pytest.approx((3 * 1 + 1 * 9) / 4), 0.0]


def test_equal_cost_interpolates_along_the_front():
    front = [
        {"replica_hours": 100.0, "underprovisioned_min": 50.0},
        {"replica_hours": 200.0, "underprovisioned_min": 10.0},
    ]
    assert interpolated(front, 150.0, "underprovisioned_min") == 30.0
    assert interpolated(front, 250.0, "underprovisioned_min") is None  # beyond the front

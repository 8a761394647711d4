"""Harvest@99's parts (issue 49), pure: the warm path's lead, training slots beside the
service packed or spread, lost work per stop, the clairvoyant ceiling, the budget rule."""

import numpy as np
import pytest

from gpupool.autoscale.forecast import clairvoyant
from gpupool.autoscale.harvest import Training, harvest, training_slots
from gpupool.autoscale.harvest_at import HarvestBench, Span, slo_at_budget
from gpupool.autoscale.replay import ServiceModel, replay


class Step:
    """Asks for ``low`` replicas until tick ``at``, then ``high``."""

    def __init__(self, low: int, high: int, at: int):
        self.low, self.high, self.at = low, high, at

    def desired(self, i: int, ready: int, starting: int) -> int:
        return self.high if i >= self.at else self.low


def test_parked_engines_serve_after_the_warm_lead_the_rest_after_the_cold_one():
    model = ServiceModel(
        replica_rps=10, load_s=60, grace_s=30, max_replicas=10, warm=3, warm_lead_s=10
    )
    rates = np.full(30, 10.0)
    out = replay(rates, 0, 30, Step(1, 5, 4), model, 10)
    held = out.replicas
    assert held[3] == 1 and held[4] == 5  # asked at the end of tick 4: all five held at once
    cold = replay(rates, 0, 30, Step(1, 5, 4), ServiceModel(10, 60, 30, max_replicas=10), 10)
    assert out.scale_ups == cold.scale_ups == 4
    ready = out.ready
    assert ready[5] == 1 and ready[6] == 3  # 1 + the two warm ones: 1 tick of 10 s later
    assert ready[13] == 3 and ready[14] == 5  # the cold ones: 9 ticks (90 s) later
    assert cold.ready[6] == 1 and cold.ready[14] == 5  # no parked engines: all cold


def test_packing_keeps_whole_servers_for_gangs_spreading_breaks_one_per_server():
    held = np.array([0, 4, 5, 10])
    pack = Training(servers=10, cards_per_server=4, gang=4, pack=True)
    spread = Training(servers=10, cards_per_server=4, gang=4, pack=False)
    assert training_slots(held, pack).tolist() == [10, 9, 8, 7]
    assert training_slots(held, spread).tolist() == [10, 6, 5, 0]
    single = Training(servers=10, cards_per_server=4, gang=1, pack=False)
    assert training_slots(held, single).tolist() == [40, 36, 35, 30]


def test_a_taken_card_stops_its_whole_gang_and_a_returned_one_restarts_it():
    t = Training(servers=2, cards_per_server=4, gang=4, lost_per_stop_s=600, restart_s=60)
    out = harvest(np.array([0, 1, 1, 0]), 1.0, 3600, t)
    assert out.stops == 1
    # gangs run 2 + 1 + 1 + 2 hours of 4 cards = 24 GPU-h; one stop loses 4 x 600 s,
    # one restart 4 x 60 s
    assert out.lost_gpu_hours == pytest.approx(4 * 660 / 3600)
    assert out.gpu_hours == pytest.approx(24 - 4 * 660 / 3600)
    fast = harvest(np.array([0, 1, 1, 0]), 1.0, 3600, Training(2, 4, 4, 5, 60))
    assert fast.gpu_hours > out.gpu_hours


def test_the_clairvoyant_sees_the_real_peak_over_its_horizon():
    rates = np.array([1.0, 5, 2, 3, 0, 1])
    assert clairvoyant(rates, 2).peak.tolist() == [5, 3, 3, 1, 1, 1]


def test_slo_minutes_at_a_budget_follow_the_front_and_hold_past_its_end():
    front = [
        {"replica_hours": 100.0, "slo_violating_min": 50.0},
        {"replica_hours": 200.0, "slo_violating_min": 10.0},
        {"replica_hours": 150.0, "slo_violating_min": 60.0},  # beaten: off the front
    ]
    assert slo_at_budget(front, 150) == 30.0
    assert slo_at_budget(front, 500) == 10.0  # more replicas held could only help
    assert slo_at_budget(front, 50) is None  # cheaper than any setting


def test_the_best_setting_is_the_most_harvest_within_the_target():
    bench = HarvestBench(np.zeros(1), 60, Span(0, 1440), Span(0, 1440), 1, 1, 1, 0, 0.01)
    points = [
        {"slo_violating_min": 20.0, "harvest_gpu_hours_week": 900.0},  # over 1% of 1440
        {"slo_violating_min": 14.0, "harvest_gpu_hours_week": 800.0},
        {"slo_violating_min": 2.0, "harvest_gpu_hours_week": 700.0},
    ]
    assert bench.best_within(points, bench.judge) == 1
    assert bench.best_within(points[:1], bench.judge) is None

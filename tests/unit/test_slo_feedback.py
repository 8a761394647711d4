"""The SLO-feedback controller (issue 66): hand-computed sequences of its rule, and the
simulator's gpupool-warm policy deciding with the live reconciler's own steps."""

from math import log

import numpy as np
import pytest

from gpupool.autoscale.reactive import SloReactive
from gpupool.autoscale.scaler import decide, judge_minute, new_state
from gpupool.autoscale.slo_feedback import (
    AIM,
    CEILING,
    UP,
    WINDOW_MIN,
    SloFeedback,
    down_factor,
    kept_warm,
    violated,
)

DECAY = 1 - 1 / WINDOW_MIN
# 1% budget, aiming at half of it: a = 0.005; DOWN = 1.1 ** (-0.005 / 0.995)
DOWN = 1.1 ** (-0.005 / 0.995)


def test_the_constants_are_the_documented_ones():
    assert (UP, CEILING, AIM, WINDOW_MIN) == (1.1, 2.0, 0.5, 1440)
    assert down_factor(0.01) == pytest.approx(DOWN, rel=1e-12)
    # stationary at a = AIM * budget violating minutes
    a = AIM * 0.01
    assert UP**a * down_factor(0.01) ** (1 - a) == pytest.approx(1.0, rel=1e-12)
    assert down_factor(0.02) < down_factor(0.01) < 1  # a larger budget falls back faster


def test_a_violating_minute_raises_the_headroom_at_once():
    fb = SloFeedback().step(True)
    assert (fb.raised, fb.spent) == (pytest.approx(1.1), 1.0)
    fb = fb.step(True)
    assert fb.raised == pytest.approx(1.21)
    assert fb.spent == pytest.approx(DECAY + 1)


def test_unharmed_minutes_lower_it_slowly_while_the_budget_is_unspent():
    fb = SloFeedback().step(True).step(True).step(False)
    assert fb.raised == pytest.approx(1.21 * DOWN, rel=1e-12)
    assert fb.spent == pytest.approx((DECAY + 1) * DECAY)
    # 1.21 falls back to the declared headroom after ln(1.21) / -ln(DOWN) = 3,800 minutes
    minutes = log(1.21) / -log(DOWN)
    assert minutes == pytest.approx(2 * 0.995 / 0.005, rel=1e-9)  # 398: 2 raises' worth
    for _ in range(397):
        fb = fb.step(False)
    assert fb.raised > 1.0
    fb = fb.step(False).step(False)
    assert fb.raised == 1.0  # the floor: never below the declared headroom


def test_it_holds_while_the_budget_of_the_last_day_is_spent():
    fb = SloFeedback()
    for _ in range(8):  # 1.1 ** 8 = 2.14: held at the ceiling
        fb = fb.step(True)
    assert fb.raised == CEILING
    spent = (1 - DECAY**8) / (1 - DECAY)  # 7.98 of the 7.2 allowed (half of 1% of a day)
    assert fb.spent == pytest.approx(spent) and fb.allowance == pytest.approx(7.2)
    # spent decays below 7.2 after ln(7.98 / 7.2) / -ln(DECAY) = 148 minutes
    held = int(log(spent / 7.2) / -log(DECAY))
    assert held == 148
    for _ in range(held):
        fb = fb.step(False)
    assert fb.raised == CEILING  # no decrease while the budget is spent
    fb = fb.step(False)
    assert fb.spent < fb.allowance and fb.raised == pytest.approx(CEILING * DOWN)


def test_bad_budget_is_refused_naming_it():
    with pytest.raises(ValueError, match="budget: 0 is not a share"):
        SloFeedback(0)


def test_a_minute_violates_when_its_load_is_above_what_the_ready_replicas_hold():
    assert not violated(10.0, 1, 10.0)  # at the target, not above it
    assert violated(10.01, 1, 10.0)
    assert violated(0.1, 0, 10.0)  # requests and no replica
    assert not violated(0.0, 0, 10.0)
    # latency_p95: load = ready * p95 / target, judged per replica-unit
    assert violated(3 * 0.6 / 0.5, 3, 1.0) and not violated(3 * 0.4 / 0.5, 3, 1.0)


def test_warm_engines_grow_with_the_headroom_within_max_replicas():
    assert kept_warm(0, 2.0, 10) == 0  # a service that keeps none keeps none
    assert kept_warm(2, 1.0, 10) == 2
    assert kept_warm(2, 1.21, 10) == 3
    assert kept_warm(4, 2.0, 6) == 6


def test_the_kpa_headroom_follows_the_controller():
    state = new_state("rps", 10.0, 0.8, 60.0, 0.0)
    assert judge_minute(state, 25.0, 2)  # 25 req/s on 2 replicas of 10: violating
    assert state.kpa.utilisation == pytest.approx(0.8 / 1.1)
    assert not judge_minute(state, 15.0, 2)
    assert state.kpa.utilisation == pytest.approx(0.8 / (1.1 * DOWN))


def test_the_simulator_decides_with_the_reconcilers_steps():
    """On a small recorded load, the simulator's gpupool-warm policy decides what the
    reconciler's pure steps decide on the same readings: ``scaler.decide`` every pass and
    ``scaler.judge_minute`` on the sample it writes once a minute."""
    rng = np.random.default_rng(7)
    rates = np.concatenate([np.full(30, 20.0), np.full(30, 45.0), rng.uniform(10, 60, 60)])
    seen = [(2 + k % 3, k % 2) for k in range(len(rates))]  # (ready, starting) per tick
    sim = SloReactive(rates, 10, 10.0, 0.8, 60.0, engines_declared=3, most=12)
    sim_wants, sim_engines = [], []
    for i, (ready, starting) in enumerate(seen):
        sim_wants.append(sim.desired(i, ready, starting))
        sim_engines.append(sim.engines())
    # the reconciler: service of target 10 req/s, utilisation 0.8, stable 60 s, warm 3
    state = new_state("rps", 10.0, 0.8, 60.0, 0.0)
    wants, engines, sampled = [], [], 0.0  # its last sample: at the start
    for i, (ready, starting) in enumerate(seen):
        now = i * 10.0
        wants.append(decide(state, float(rates[i]), now, ready, starting, (0, 1_000_000)))
        if now + 10 - sampled >= 60:  # the sample closing each minute
            sampled = now + 10
            judge_minute(state, float(rates[i]), ready)
        engines.append(kept_warm(3, state.feedback.raised, 12))
    assert sim_wants == wants and sim_engines == engines
    assert sim.state.feedback == state.feedback
    assert state.feedback.raised > 1.0  # the recorded load did violate: the rule was at work
    assert max(engines) > 3


def test_a_short_reading_within_the_minute_makes_it_violate():
    """Every reading counts (the reconciler's passes, the simulator's ticks), not only the
    one the minute's sample keeps: a capacity short mid-minute, gone by the sample, violates."""
    state = new_state("rps", 10.0, 1.0, 60.0, 0.0)
    decide(state, 35.0, 0.0, 3, 0, (0, 10))  # 35 req/s on 3 replicas of 10
    assert not violated(25.0, 3, 10.0)
    assert judge_minute(state, 25.0, 3)
    assert not judge_minute(state, 25.0, 3)  # the next minute starts afresh


def test_the_replay_wakes_as_many_engines_as_the_policy_keeps():
    """A policy that sets the engines kept (the SLO feedback grows them) overrides the
    model's fixed ``warm``: the first ``engines()`` replicas wake in the warm lead, the rest
    start cold."""
    from gpupool.autoscale.replay import ServiceModel, replay

    class Grows:
        def desired(self, i: int, ready: int, starting: int) -> int:
            return 4

        def engines(self) -> int:
            return 3

    model = ServiceModel(replica_rps=10, load_s=60, grace_s=30, warm=0, warm_lead_s=10)
    out = replay(np.full(20, 10.0), 0, 20, Grows(), model, 10)
    # 1 ready at the start; asked at tick 0: 2 warm serve from tick 2, 1 cold from tick 10
    assert list(out.ready[:12]) == [1, 1, 3, 3, 3, 3, 3, 3, 3, 3, 4, 4]

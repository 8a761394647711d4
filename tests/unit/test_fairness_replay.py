"""The month of borrowing teams (issue 64), pure: shares and Jain's index by hand, and fair
share over time giving back to a team that was away what the static rule does not."""

import pytest

from gpupool.sim.fairness_replay import DAY, FairnessRun, Team, judge, replay


def test_shares_and_jains_index_by_hand():
    teams = [Team("a", 1.0, 1), Team("b", 1.0, 1), Team("c", 2.0, 1)]
    run = FairnessRun("x", {"a": 30.0, "b": 20.0, "c": 50.0})
    got = judge(run, teams)
    assert got["teams"]["a"] == {
        "card_hours": 30.0, "share": 0.3, "weight_share": 0.25, "off_by": 0.05
    }  # fmt: skip
    # share / weight share: 1.2, 0.8, 1.0 -> (3.0)^2 / (3 x 3.08) = 0.974026
    assert got["jain"] == pytest.approx(0.974, abs=1e-3) and got["max_off_by"] == 0.05


def test_a_team_back_from_away_catches_up_only_with_fair_share_over_time():
    teams = [Team("a", 1.0, 6), Team("b", 1.0, 6, ((0.0, 0.5),))]  # b comes at noon
    static = judge(replay(teams, 8, 1.5, seed=1, half_life_s=None), teams)
    fair = judge(replay(teams, 8, 1.5, seed=1, half_life_s=DAY), teams)
    assert static["preempted"] == fair["preempted"] == 0
    assert fair["teams"]["b"]["share"] > static["teams"]["b"]["share"]
    assert fair["jain"] > static["jain"]

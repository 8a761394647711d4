"""The estimate replay (issue 64), pure: on a constructed trace whose run times the history
learns, gpupool's estimate at submission is exact and Slurm's method (every job runs to its
limit, the run time rounded up to the hour) is off by what the limits overstate."""

from gpupool.model import Node, make_devices, parse_request
from gpupool.sim.estimate_replay import Guess, judge, limit_of, replay_estimates
from gpupool.sim.traces.openb import Pod

NODE = [Node("n1", 64000, 512 * 1024, make_devices("A100-80G", 1, node="n1"))]


def _pod(name: str, created: int, run: int) -> Pod:
    return Pod(name, parse_request("gpu=1"), 1000, created_s=created, run_s=run)


def test_limits_round_up_to_the_hour():
    assert limit_of(600, 3600) == 3600 and limit_of(3600, 3600) == 3600
    assert limit_of(3601, 3600) == 7200 and limit_of(0, 3600) == 3600


def test_estimates_from_history_are_exact_where_limits_overstate():
    # one card; every pod runs 600 s: a runs 0-600, b 600-1200, c 1200-1800; at 1300 a and b
    # have ended (the history: 600 s twice), c runs, d and e wait
    times = (("a", 0), ("b", 1), ("c", 2), ("d", 1300), ("e", 1301))
    pods = [_pod(n, t, 600) for n, t in times]
    run = replay_estimates(NODE, pods)
    by_id = {g.job: g for g in run.estimated}
    d, e = by_id["3"], by_id["4"]
    assert (d.actual, d.ours, d.slurm) == (1800.0, 1800.0, 4800.0)
    assert (e.actual, e.ours, e.slurm) == (2400.0, 2400.0, 8400.0)
    assert d.ours_basis == "from history of 2 similar jobs"
    # b and c waited with no history: both methods say "time limits" (c: a ends at 3600)
    assert (by_id["1"].ours, by_id["1"].slurm, by_id["1"].actual) == (3600.0, 3600.0, 600.0)
    summary = judge(run.estimated)
    assert summary["waited"] == 4 and summary["never"] == 0
    learned = judge([d, e])["all"]
    assert learned["gpupool"]["p90_rel_error"] == 0.0
    assert learned["slurm"]["median_rel_error"] == 6.0  # d: 4800 against 1800, 500 s wait


def test_only_pods_of_the_scored_window_are_estimated():
    pods = [_pod(n, t, 600) for n, t in (("a", 0), ("b", 1), ("c", 2), ("d", 1300))]
    run = replay_estimates(NODE, pods, score_from_s=1000, score_until_s=2000)
    assert [g.job for g in run.estimated] == ["3"]
    scaled = replay_estimates(NODE, pods, time_scale=2.0, score_from_s=1000)
    assert [(g.submit, g.actual) for g in scaled.estimated] == [(650.0, 1800.0)]


def test_a_missing_estimate_counts_as_infinitely_wrong():
    guesses = [Guess("1", 0.0, None, 10.0, actual=10.0), Guess("2", 0.0, 5.0, 5.0, actual=5.0)]
    summary = judge(guesses)
    assert summary["all"]["gpupool"]["no_estimate"] == 1
    assert summary["all"]["gpupool"]["p90_rel_error"] is None  # infinite
    assert summary["all"]["slurm"]["median_rel_error"] == 0.0

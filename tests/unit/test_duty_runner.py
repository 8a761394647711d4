"""The control plane's duty runner (pure: duties are functions of the time given)."""

import pytest

from gpupool.server.commit import LostLeadership
from gpupool.server.control.runner import Duty, Runner, retry_after


class Calls:
    def __init__(self, fail_times: int = 0):
        self.at: list[float] = []
        self.fail_times = fail_times

    def __call__(self, now: float) -> None:
        self.at.append(now)
        if self.fail_times:
            self.fail_times -= 1
            raise RuntimeError("database is locked\nmore lines")


class Recorder:
    def __init__(self) -> None:
        self.ok: list[tuple[str, float]] = []
        self.failed: list[str] = []
        self.known: list[str] = []

    def duty_known(self, name: str) -> None:
        self.known.append(name)

    def duty_ok(self, name: str, at: float) -> None:
        self.ok.append((name, at))

    def duty_failed(self, name: str) -> None:
        self.failed.append(name)


def test_a_failing_duty_stops_none_of_the_others_and_is_retried_with_backoff():
    broken, cycle, alerts = Calls(fail_times=5), Calls(), Calls()
    metrics = Recorder()
    runner = Runner(
        [Duty("liveness", broken), Duty("scheduling", cycle), Duty("alerts", alerts, 10.0)],
        metrics,
    )
    for t in range(0, 40):
        assert runner.run_due(float(t)) == (["liveness"] if float(t) in broken.at[:5] else [])
    assert cycle.at == [float(t) for t in range(40)]  # every pass, whatever liveness did
    assert alerts.at == [0.0, 10.0, 20.0, 30.0]
    # failed at 0, 1, 3, 7 and 15 (again after 1, 2, 4, 8, 10 s), then every pass from 25
    assert broken.at == [0.0, 1.0, 3.0, 7.0, 15.0] + [float(t) for t in range(25, 40)]
    health = runner.report()["liveness"]
    assert health == {"last_ok": 39.0, "failures": 0, "failures_total": 5, "last_error": ""}
    assert metrics.failed == ["liveness"] * 5
    assert metrics.known == ["liveness", "scheduling", "alerts"]
    assert ("scheduling", 39.0) in metrics.ok


def test_the_last_error_is_one_line_and_said_until_the_duty_succeeds():
    runner = Runner([Duty("alerts", Calls(fail_times=2), 60.0)])
    runner.run_due(0.0)
    assert runner.report()["alerts"]["last_error"] == "RuntimeError: database is locked"
    assert runner.report()["alerts"]["failures"] == 1
    assert not runner.ok_within("alerts", 0.0, 60)
    runner.run_due(0.5)  # too early: backing off
    assert runner.report()["alerts"]["failures"] == 1
    runner.run_due(1.0)
    runner.run_due(3.0)
    assert runner.report()["alerts"]["last_error"] == "" and runner.ok_within("alerts", 3.0, 60)


def test_a_lost_lead_ends_the_pass_and_a_new_lead_runs_every_duty_at_once():
    def lost(now: float) -> None:
        raise LostLeadership("epoch 3 is no longer the leader's")

    after = Calls()
    hourly = Calls()
    runner = Runner([Duty("hourly", hourly, 3600.0), Duty("scheduling", lost), Duty("x", after)])
    with pytest.raises(LostLeadership):
        runner.run_due(0.0)
    assert after.at == [] and runner.report()["scheduling"]["failures"] == 0
    runner.reset()
    runner.duties[1] = Duty("scheduling", Calls())
    runner.run_due(5.0)
    assert hourly.at == [0.0, 5.0] and after.at == [5.0]


def test_retries_never_wait_longer_than_the_duty_s_own_interval():
    assert [retry_after(n, 0) for n in range(1, 7)] == [1, 2, 4, 8, 10, 10]
    assert [retry_after(n, 3.0) for n in (1, 2, 3, 9)] == [1, 2, 3, 3]


def test_duty_names_are_unique():
    with pytest.raises(ValueError, match="repeat"):
        Runner([Duty("a", Calls()), Duty("a", Calls())])

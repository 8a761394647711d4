"""The warm-engine scaling decider (issue 49), pure: wake parked replicas before adding cold
ones, park drained ones while the engines are no more than ``warm``, keep starting engines,
top the engines up, give up a wake that does not come."""

from dataclasses import dataclass

from gpupool.autoscale.warm_plan import plan_warm


@dataclass
class R:
    job_id: int
    state: str = "running"
    ready: bool = True
    ready_at: float | None = 1.0
    draining_since: float | None = None
    parked: bool = False
    park_at: float | None = None
    wake_at: float | None = None


def plan(replicas, desired, warm, now=100.0, in_flight=None, **kw):
    return plan_warm(
        replicas, in_flight or {}, desired, now, service="chat", warm=warm, drain_s=10,
        wake_timeout_s=30, **kw,
    )  # fmt: skip


def test_scale_out_wakes_parked_replicas_before_adding_cold_ones():
    replicas = [R(1), R(2, parked=True, ready=False), R(3, parked=True, ready=False)]
    d = plan(replicas, desired=4, warm=3)
    assert d.wake == (2, 3) and d.add == 1 and not d.stop
    cold = plan([R(1)], desired=3, warm=0)
    assert cold.wake == () and cold.add == 2


def test_a_park_not_yet_done_is_cancelled_first():
    d = plan([R(1), R(2, park_at=99.0, ready=False)], desired=2, warm=2)
    assert d.unpark == (2,) and d.wake == () and d.add == 0


def test_scale_in_drains_then_parks_within_warm_and_stops_past_it():
    replicas = [R(1, ready_at=1.0), R(2, ready_at=5.0), R(3, ready_at=9.0)]
    d = plan(replicas, desired=1, warm=2, in_flight={2: 0, 3: 0})
    assert set(d.drain) == {2, 3}  # the youngest ready ones
    assert len(d.park) == 1 and len(d.stop) == 1  # 3 engines, 2 kept warm
    later = [R(1), R(2, draining_since=80.0, ready=False)]
    assert plan(later, desired=1, warm=2, in_flight={2: 3}).park == (2,)  # drain_s passed


def test_starting_engines_are_kept_within_warm_and_engines_are_topped_up():
    starting = [R(1), R(2, state="pending", ready=False, ready_at=None)]
    d = plan(starting, desired=1, warm=2)
    assert not d.stop and d.add == 0  # it parks once ready
    assert plan(starting, desired=1, warm=1).stop == ((2, "scaled in (service chat)"),)
    assert plan([R(1)], desired=1, warm=3).add == 2
    assert plan([R(1)], desired=1, warm=3, backing_off=True).add == 0


def test_a_wake_that_does_not_come_stops_the_replica():
    replicas = [R(1), R(2, parked=True, ready=False, wake_at=60.0)]
    d = plan(replicas, desired=2, warm=2, now=100.0)
    assert [j for j, _ in d.stop] == [2] and "wake took over 30 s" in d.stop[0][1]
    assert d.add == 1  # its place goes to a cold one
    waiting = plan(replicas, desired=2, warm=2, now=80.0)
    assert not waiting.stop and waiting.add == 0  # still waking: counted as serving


def test_advisory_mode_holds_a_scale_in():
    d = plan([R(1), R(2)], desired=1, warm=2, may_scale_in=False)
    assert d.held and not d.drain and not d.park

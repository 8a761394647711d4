"""Start-time estimates (issue 64), pure: on a constructed queue whose run times are known,
the plan (the real cycle run forward over expected ends) gives each pending job exactly the
start and node the cycles give it when the jobs then run as long as expected; and the
run-time model (a time limit, or the team's history of similar jobs) says where each
expectation comes from."""

import math

import pytest

from gpupool.model import Job, Node, make_devices, parse_request
from gpupool.scheduler import ClusterState
from gpupool.scheduler.cycle import RunningJob, run_cycle
from gpupool.scheduler.estimates import plan_starts
from gpupool.scheduler.runtime_model import (
    Ended,
    Expected,
    RuntimeHistory,
    RuntimeModel,
    quantile,
    remaining,
)
from gpupool.scheduler.tenants import Quota, Tenant, TenantTree

NODES = [
    Node("n1", 64000, 512 * 1024, make_devices("A100-80G", 2, node="n1")),
    Node("n2", 64000, 512 * 1024, make_devices("A100-80G", 1, node="n2")),
]


def _tree() -> TenantTree:
    return TenantTree([Tenant("org"), Tenant("t", "org", {"gpu": Quota.cards(3)})])


def _job(job_id: str, spec: str, submit: float, limit: int | None = None) -> Job:
    return Job(job_id, parse_request(spec), tenant="t", submit_time=submit, max_runtime_s=limit)


# the truth: how long each job runs
RUNS = {"r1": 100.0, "r2": 300.0, "r3": 250.0, "p1": 50.0, "p2": 100.0, "p3": 400.0}


def _start():
    """Three cards busy: r1 and r2 on n1 (ending at 100 and 300), r3 on n2 (at 250);
    waiting at 50: p1 (2 cards), p2 and p3 (1 card each)."""
    state = ClusterState(NODES)
    first = run_cycle(
        state,
        [],
        [_job("r1", "gpu=1", 0), _job("r2", "gpu=1", 0), _job("r3", "gpu=1", 0, 3600)],
        _tree(),
        0.0,
    )
    by_id = {b.job_id: b for b in first.bindings}
    running = [
        RunningJob(_job(j, "gpu=1", 0, 3600 if j == "r3" else None), by_id[j].placement, 0.0)
        for j in ("r1", "r2", "r3")
    ]
    pending = [_job("p1", "gpu=2", 10), _job("p2", "gpu=1", 20), _job("p3", "gpu=1", 30)]
    return state, running, pending


def _truth() -> dict[str, tuple[float, tuple[str, ...]]]:
    """Run the real cycles: one at every end, jobs running as long as ``RUNS`` says."""
    state, running, pending = _start()
    live = {r.job.id: r for r in running}
    queue = {j.id: j for j in pending}
    started: dict[str, tuple[float, tuple[str, ...]]] = {}
    t = 50.0
    while queue:
        result = run_cycle(state, list(live.values()), list(queue.values()), _tree(), t)
        for b in result.bindings:
            live[b.job_id] = RunningJob(queue.pop(b.job_id), b.placement, t)
            started[b.job_id] = (t, b.placement.node_names)
        t = min(r.start_time + RUNS[j] for j, r in live.items())
        for j in [j for j, r in live.items() if r.start_time + RUNS[j] <= t]:
            state.release(j)
            del live[j]
    return started


def test_the_plan_gives_each_job_the_start_and_nodes_the_cycles_give_it():
    state, running, pending = _start()
    expected = {
        "r1": Expected(100.0, "history", similar=3),
        "r2": Expected(300.0, "history", similar=3),
        "r3": Expected(250.0, "history", similar=5),
        "p1": Expected(50.0, "history", similar=2),
        "p2": Expected(100.0, "time limit"),
        "p3": Expected(400.0, "site default"),
    }
    plan = plan_starts(state, running, pending, _tree(), 50.0, expected)
    got = {j: (e.start, e.nodes) for j, e in plan.estimates.items()}
    # by hand: at 100 r1 ends and p2 (1 card) takes its card (p1 needs 2, not starving:
    # smaller jobs pass); at 200 p2 ends and p3 takes that card; at 250 r3 ends (n2); at
    # 300 r2 ends: n1 has one card free while p3 runs; at 600 p3 ends: p1 gets n1's two
    assert got == {
        "p2": (100.0, ("n1",)),
        "p3": (200.0, ("n1",)),
        "p1": (600.0, ("n1",)),
    }
    assert got == _truth()
    assert plan.estimates["p2"].basis == "from history of 3 similar jobs"  # r1's end
    assert plan.estimates["p3"].basis == "from time limits"  # p2's end
    assert plan.estimates["p1"].basis == "from the site default run time"  # p3's end


def test_a_job_expected_never_to_end_leaves_the_jobs_behind_it_without_a_time():
    state, running, pending = _start()
    expected = {"r1": Expected(100.0, "time limit")}  # nothing else is known
    plan = plan_starts(state, running, pending, _tree(), 50.0, expected)
    assert plan.estimates["p2"].start == 100.0
    assert plan.estimates["p1"].start is None and plan.estimates["p3"].start is None


def test_the_plan_stops_once_the_wanted_jobs_are_bound():
    state, running, pending = _start()
    expected = {j: Expected(s, "time limit") for j, s in RUNS.items()}
    plan = plan_starts(state, running, pending, _tree(), 50.0, expected, want={"p2"})
    assert plan.steps == 2 and set(plan.estimates) == {"p2"}


def test_the_model_uses_the_most_similar_history_capped_by_the_limit():
    h = RuntimeHistory(RuntimeModel(recent=3, min_similar=2))
    for run in (100.0, 200.0, 900.0, 300.0):  # the last three are kept: 200, 900, 300
        h.add(Ended("t", "ann", "train", "gpu=1", run))
    h.add(Ended("t", "bob", "eval", "gpu=1", 50.0))
    assert h.expect("t", "ann", "train", "gpu=1", None) == Expected(300.0, "u+n+r", 3)
    assert h.expect("t", "ann", "train", "gpu=1", 250) == Expected(250.0, "u+n+r", 3)
    # bob has one eval (too few): the team's gpu=1 jobs, the last three of five
    assert h.expect("t", "bob", "eval", "gpu=1", None) == Expected(300.0, "r", 3)
    assert h.expect("t", "cy", "x", "gpu=2", 7200) == Expected(7200.0, "time limit")
    assert h.expect("t", "cy", "x", "gpu=2", None, 3600) == Expected(3600.0, "site default")
    assert h.expect("u", "ann", "train", "gpu=1", None).seconds is None  # another team's
    assert Expected(300.0, "u+n+r", 37).words() == "history of 37 similar jobs"


def test_a_running_job_is_expected_to_run_what_its_longer_similar_jobs_ran():
    h = RuntimeHistory(RuntimeModel(recent=5, min_similar=2))
    for run in (60.0, 120.0, 600.0, 3600.0, 7200.0):
        h.add(Ended("t", "ann", "train", "gpu=1", run))
    assert h.expect("t", "ann", "train", "gpu=1", None).seconds == 600.0  # not started
    # ran 300 s: of 600, 3600 and 7200 (the ones that ran longer) the median
    assert h.expect("t", "ann", "train", "gpu=1", None, ran_s=300.0).seconds == 3600.0
    assert h.expect("t", "ann", "train", "gpu=1", 1800, ran_s=300.0).seconds == 1800.0
    # ran longer than all of them: what it ran, so remaining() gives as long again
    longest = h.expect("t", "ann", "train", "gpu=1", None, ran_s=8000.0)
    assert longest == Expected(8000.0, "u+n+r", 5)
    assert remaining(longest, 8000.0, None) == 8000.0


def test_by_limit_the_jobs_with_the_same_limit_come_first():
    h = RuntimeHistory(RuntimeModel(by_limit=True))
    for run, limit in ((100.0, 3600), (200.0, 3600), (90000.0, 93600), (91000.0, 93600)):
        h.add(Ended("t", "ann", "train", "gpu=1", run, limit))
    assert h.expect("t", "ann", "train", "gpu=1", 93600) == Expected(90500.0, "u+n+r+l", 2)
    assert h.expect("t", "ann", "train", "gpu=1", 3600) == Expected(150.0, "u+n+r+l", 2)
    # a limit none of them had: all four of the same user, name and request (capped)
    assert h.expect("t", "ann", "train", "gpu=1", 7200) == Expected(7200.0, "u+n+r", 4)
    assert h.expect("t", "ann", "train", "gpu=1", None).seconds == 45100.0  # no limit


def test_quantiles_and_what_is_left_to_run():
    assert quantile([1, 2, 3, 4], 0.5) == 2.5 and quantile([5], 0.9) == 5
    assert remaining(Expected(100.0, "x"), 30.0, None) == 70.0
    assert remaining(Expected(100.0, "x"), 150.0, None) == 150.0  # past it: as long again
    assert remaining(Expected(100.0, "x"), 150.0, 200) == 50.0  # at most to its limit
    assert remaining(Expected(None, "unknown"), 10.0, None) is None
    assert math.isclose(remaining(Expected(10.0, "x"), 10.0, 10) or 0, 1.0)
    with pytest.raises(ValueError):
        quantile([], 0.5)

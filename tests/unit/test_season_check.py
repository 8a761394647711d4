"""The season's checker (``gpupool.bench.season.check``) on hand-made histories: a healthy
one holds every invariant, and each invariant broken on purpose — a double run, a card held
twice, a lost job, one message made two jobs, a billed queue minute, an unbilled run, a late
reclaim — is caught with its counter-example."""

import json
from dataclasses import replace

import pytest

from gpupool.bench.season import check
from gpupool.bench.season.records import Metered, Record, Submission, read_records
from gpupool.bench.season.run import SMALL, plan_for
from gpupool.bench.season.schedule import guarantees, openb_plan, with_reclaim_probe

T0 = 1_000_000.0
TOL = check.BillingTolerance(start_s=3.0, end_s=1.0, stop_s=5.0)


def rec(
    key: str,
    job: int,
    alloc: int,
    start: float,
    last: float,
    *,
    tenant: str = "research",
    node: str = "n1",
    gpus: str = "",
    completed: bool | None = True,
) -> Record:
    return Record(
        key, job, alloc, 100 + alloc, node, tenant, gpus, T0 + start, T0 + last, completed
    )


def sub(
    key: str,
    job: int,
    acked: float,
    *,
    team: str = "research",
    cards: int = 1,
    repeats: tuple[int, ...] = (),
) -> Submission:
    return Submission(key, team, cards, 5.0, T0 + acked, job, repeats)


def bill(job: int, alloc: int, start: float, end: float, tenant: str = "research") -> Metered:
    return Metered(tenant, job, alloc, T0 + start, T0 + end, 1)


def healthy() -> tuple[list[Submission], list[Record], dict[int, str], list[Metered]]:
    """Two jobs of research, the second preempted once and run again; every meter from the
    launch (1.5 s before the first line) to the end line plus a tick."""
    subs = [sub("a", 1, 0.0), sub("b", 2, 1.0, repeats=(2,))]
    records = [
        rec("a", 1, 10, 1.5, 6.5, gpus="GPU-1"),
        rec("b", 2, 11, 2.5, 4.0, gpus="GPU-2", completed=False),  # preempted
        rec("b", 2, 12, 6.0, 11.0, gpus="GPU-2"),  # its second run, after the first
    ]
    states = {1: "succeeded", 2: "succeeded"}
    usage = [
        bill(1, 10, 0.0, 3.0),
        bill(1, 10, 3.0, 6.7),  # cut by a metering interval
        bill(2, 11, 1.0, 4.2),
        bill(2, 12, 4.5, 11.2),
    ]
    return subs, records, states, usage


def test_a_healthy_history_holds_every_invariant():
    subs, records, states, usage = healthy()
    lost = check.nothing_lost_nothing_twice(subs, records, states)
    assert lost.held and lost.figures["runs_without_cards"] == 0
    billing = check.billing_matches_runs(records, usage, set(), TOL)
    assert billing.held, billing.detail
    assert billing.figures["billed_before_first_line_max_s"] == 1.5
    served = check.guarantee_served(subs, records, {"research": 2}, 2, bound_s=5.0)
    assert served.held, served.detail
    assert served.figures["owed"] == 2


def test_a_double_run_is_caught():
    subs, records, states, _ = healthy()
    twice = [*records, rec("a", 1, 13, 4.0, 9.0, node="n2")]  # a second copy while it ran
    verdict = check.nothing_lost_nothing_twice(subs, twice, states)
    assert not verdict.held
    assert "ran twice at once: a: job 1 allocation 10" in verdict.detail


def test_one_card_held_by_two_workloads_is_caught():
    subs, records, states, _ = healthy()
    records[1] = replace(records[1], gpus="GPU-1")  # b's first run on a's card, while a ran
    verdict = check.nothing_lost_nothing_twice(subs, records, states)
    assert not verdict.held and "one card held by two workloads at once: n1/GPU-1" in verdict.detail


@pytest.mark.parametrize(
    ("state", "words"),
    [
        (None, "acknowledged, then gone"),
        ("failed", "acknowledged, then failed"),
        ("succeeded", "succeeded with no whole run recorded"),
    ],
)
def test_a_lost_job_is_caught(state, words):
    subs, records, states, _ = healthy()
    lost = [r for r in records if r.key != "a"]
    if state is None:
        del states[1]
    else:
        states[1] = state
    verdict = check.nothing_lost_nothing_twice(subs, lost, states)
    assert not verdict.held and words in verdict.detail and "a (job 1)" in verdict.detail


def test_a_job_still_queued_at_the_end_is_accounted_for_not_lost():
    subs, records, states, _ = healthy()
    subs.append(sub("c", 3, 2.0))
    states[3] = "pending"
    verdict = check.nothing_lost_nothing_twice(subs, records, states)
    assert verdict.held and verdict.figures["unfinished"] == 1
    records[0] = replace(records[0], gpus="")  # a run that saw no card is said, not assumed
    verdict = check.nothing_lost_nothing_twice(subs, records, states)
    assert verdict.held and "(1 runs saw no card: not checked for cards)" in verdict.detail


def test_one_message_made_two_jobs_is_caught():
    subs, records, states, _ = healthy()
    subs[1] = replace(subs[1], repeats=(7,))
    verdict = check.nothing_lost_nothing_twice(subs, records, states)
    assert not verdict.held and "one message sent twice made jobs 2 and [7]" in verdict.detail


def test_a_run_nobody_acknowledged_is_caught():
    subs, records, states, _ = healthy()
    verdict = check.nothing_lost_nothing_twice(subs, [*records, rec("z", 9, 20, 20, 25)], states)
    assert not verdict.held and "job 9 ran though the season never was told" in verdict.detail


def test_a_billed_queue_minute_is_caught():
    _, records, _, usage = healthy()
    usage[0] = bill(1, 10, -60.0, 3.0)  # metered from submission: a minute in the queue
    verdict = check.billing_matches_runs(records, usage, set(), TOL)
    assert not verdict.held
    assert "allocation 10 (job 1, research): billed from 61.5 s before its workload started" in (
        verdict.detail
    )


def test_billing_past_the_end_a_gap_a_meter_without_a_run_and_a_run_unbilled_are_caught():
    _, records, _, usage = healthy()
    longer = [*usage[:1], bill(1, 10, 3.0, 30.0), *usage[2:]]
    assert "billed until +23.3 s" in check.billing_matches_runs(records, longer, set(), TOL).detail
    gap = [bill(1, 10, 0.0, 2.0), *usage[1:]]
    assert "1.0 s of its run billed to nobody" in (
        check.billing_matches_runs(records, gap, set(), TOL).detail
    )
    ghost = [*usage, bill(5, 30, 0.0, 50.0)]
    assert "allocation 30 (job 5) billed 50.0 s, no workload ever ran" in (
        check.billing_matches_runs(records, ghost, set(), TOL).detail
    )
    unbilled = usage[:3]
    assert "ran 5.0 s, billed nothing" in (
        check.billing_matches_runs(records, unbilled, set(), TOL).detail
    )
    late = [bill(1, 10, 2.5, 6.7), *usage[2:]]
    assert "its workload ran 1.0 s before it was billed" in (
        check.billing_matches_runs(records, late, set(), TOL).detail
    )


def test_a_still_running_jobs_open_meter_is_left_out():
    _, records, _, usage = healthy()
    verdict = check.billing_matches_runs(records, usage[:2], {2}, TOL)
    assert verdict.held, verdict.detail


def test_a_late_reclaim_is_caught_and_the_reclaim_latency_reported():
    # research borrowed both cards of a 2-card cluster; training (owed 1) asks at 10 s
    records = [
        rec("r1", 1, 10, 0.0, 12.0, completed=False),  # reclaimed at 12 s
        rec("r2", 2, 11, 0.0, 30.0),
        rec("t1", 3, 12, 13.0, 20.0, tenant="training"),
    ]
    subs = [sub("r1", 1, -1.0), sub("r2", 2, -1.0), sub("t1", 3, 10.0, team="training")]
    owed = {"research": 1, "training": 1}
    served = check.guarantee_served(subs, records, owed, 2, bound_s=5.0)
    assert served.held, served.detail
    assert served.figures["reclaims"] == 1 and served.figures["reclaim_p99_s"] == 3.0
    late = [*records[:2], replace(records[2], start=T0 + 40.0, last=T0 + 45.0)]
    verdict = check.guarantee_served(subs, late, owed, 2, bound_s=5.0)
    assert not verdict.held
    assert "t1 (training, 0 of its 1 cards held) waited 30.0 s for its cards, over 5 s" in (
        verdict.detail
    )
    never = records[:2]
    assert not check.guarantee_served(subs, never, owed, 2, bound_s=5.0).held


def test_a_team_over_its_guarantee_is_not_owed():
    records = [rec("r1", 1, 10, 0.0, 10.0), rec("r2", 2, 11, 50.0, 55.0)]
    subs = [sub("r1", 1, -1.0), sub("r2", 2, 1.0)]  # r2 beyond research's one card
    verdict = check.guarantee_served(subs, records, {"research": 1}, 2, bound_s=5.0)
    assert verdict.held and verdict.figures["owed"] == 1


def test_records_are_read_as_the_workloads_wrote_them(tmp_path):
    head = {
        "start": 10.0,
        "key": "k",
        "job": 4,
        "allocation": 8,
        "node": "n",
        "tenant": "t",
        "gpus": "GPU-9",
    }
    lines = [json.dumps(head), json.dumps({"tick": 10.2}), json.dumps({"tick": 10.4}), '{"ti']
    (tmp_path / "k.4.8.321.rec").write_text("\n".join(lines))  # killed mid-line
    ended = [json.dumps(head | {"start": 20.0}), json.dumps({"end": 21.0, "completed": True})]
    (tmp_path / "k.4.9.322.rec").write_text("\n".join(ended) + "\n")
    killed, finished = sorted(read_records(tmp_path), key=lambda r: r.start)
    assert (killed.pid, killed.last, killed.completed) == (321, 10.4, None)
    assert (finished.last, finished.completed) == (21.0, True)


def test_the_openb_window_is_compressed_and_teams_come_from_qos(tmp_path):
    header = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    header += "creation_time,deletion_time,scheduled_time"
    rows = [
        "p0,1000,1024,1,1000,,LS,Running,0,1000,0",
        "p1,1000,1024,0,0,,BE,Running,10,20,10",  # CPU-only: not a GPU pod
        "p2,1000,1024,8,1000,,Burstable,Running,50,60,50",  # over 4 cards: left out
        "p3,1000,1024,2,1000,,BE,Running,100,400,100",
        "p4,1000,1024,1,300,,Burstable,Running,200,210,205",
    ]
    (tmp_path / "pods.csv").write_text("\n".join([header, *rows]) + "\n")
    plan = openb_plan(tmp_path / "pods.csv", 3, 20.0, 4, (1.0, 20.0))
    assert [(j.key, j.team, j.cards, j.submit_at_s) for j in plan.jobs] == [
        ("p0", "serving", 1, 0.0),
        ("p3", "research", 2, 10.0),
        ("p4", "training", 1, 20.0),
    ]
    assert [j.run_s for j in plan.jobs] == [20.0, 20.0, 1.0]  # 100, 30 and 0.5 s, held within
    assert plan.skipped == 1 and plan.factor == 10.0
    probed = with_reclaim_probe(plan, 16, 5.0, 10.0)
    assert sum(j.source == "burst" for j in probed.jobs) == 16
    assert sum(j.source == "claim" for j in probed.jobs) == guarantees(16)["training"] == 8


def test_a_workload_the_server_stopped_is_billed_to_the_release_never_past_its_end():
    _, records, _, usage = healthy()
    # b's first run went on 3 s after the preemption released it: the stop reaching it
    released = [*usage[:2], bill(2, 11, 1.0, 1.2), *usage[3:]]
    verdict = check.billing_matches_runs(records, released, set(), TOL)
    assert verdict.held and verdict.figures["ran_after_release_max_s"] == 3.0
    slow = [*usage[:2], bill(2, 11, 1.0, 1.1), *usage[3:]]  # no: the tenant ran 0.1 s
    slow_stop = check.BillingTolerance(start_s=3.0, end_s=1.0, stop_s=2.0)
    verdict = check.billing_matches_runs(records, slow, set(), slow_stop)
    assert "billed until -3.1 s" in verdict.detail
    # a workload that ended by itself is billed to its end, not to a release before it
    early = [bill(1, 10, 0.0, 3.0), bill(1, 10, 3.0, 4.0), *usage[2:]]
    assert "billed until -2.7 s" in check.billing_matches_runs(records, early, set(), TOL).detail


def test_without_the_trace_the_season_says_so_and_replays_a_seeded_synthetic_mix(tmp_path):
    plan = plan_for(SMALL, tmp_path, seed=3)
    assert plan.source == "synthetic"
    assert f"the openb trace was not found (looked in {tmp_path})" in plan.note
    assert plan == plan_for(SMALL, tmp_path, seed=3)  # seeded: the same season again
    teams = {j.team for j in plan.jobs if j.source == "synthetic"}
    assert len([j for j in plan.jobs if j.source == "synthetic"]) == SMALL.jobs
    assert teams <= {"serving", "research", "training"} and len(teams) >= 2
    low, high = SMALL.run_bounds_s
    assert all(low <= j.run_s <= high for j in plan.jobs if j.source == "synthetic")
    assert all(0 <= j.submit_at_s <= SMALL.replay_s for j in plan.jobs)


def test_a_wait_through_a_server_outage_counts_only_the_time_it_was_up():
    records = [rec("t1", 3, 12, 40.0, 45.0, tenant="training")]
    subs = [sub("t1", 3, 10.0, team="training")]
    owed = {"training": 1}
    down = [(T0 + 12.0, T0 + 38.0)]  # killed 2 s after the acknowledgement, back 2 s before
    assert not check.guarantee_served(subs, records, owed, 2, bound_s=5.0).held
    verdict = check.guarantee_served(subs, records, owed, 2, bound_s=5.0, outages=down)
    assert verdict.held and verdict.figures["owed_wait_p99_s"] == 4.0
    late = [replace(records[0], start=T0 + 50.0)]
    verdict = check.guarantee_served(subs, late, owed, 2, bound_s=5.0, outages=down)
    assert not verdict.held
    assert "waited 14.0 s for its cards with the server up (26.0 s more while it" in verdict.detail


def test_an_allocation_released_during_the_launchers_start_up_is_counted_not_hidden():
    _, records, _, usage = healthy()
    # job 2 had a first allocation stopped before its workload wrote a line: 1.2 s billed
    starting = [*usage, bill(2, 9, 0.5, 1.7)]
    verdict = check.billing_matches_runs(records, starting, set(), TOL)
    assert verdict.held, verdict.detail
    assert verdict.figures["billed_never_started"] == 1
    assert verdict.figures["billed_never_started_s"] == 1.2
    longer = [*usage, bill(2, 9, 0.5, 4.0)]  # more than the launcher's start-up: broken
    assert "allocation 9 (job 2) billed 3.5 s, no workload ever ran" in (
        check.billing_matches_runs(records, longer, set(), TOL).detail
    )
    stranger = [*usage, bill(8, 9, 0.5, 1.7)]  # a job that never ran anywhere: broken
    assert not check.billing_matches_runs(records, stranger, set(), TOL).held

"""The seed's stories as scheduling-cycle scenarios."""

from gpupool.model import Job, JobKind, parse_request
from gpupool.scheduler import ClusterState
from gpupool.scheduler.cycle import CycleConfig, RunningJob, run_cycle
from gpupool.scheduler.priorities import QueuePolicy
from gpupool.scheduler.reasons import Cause
from gpupool.scheduler.reservations import Reservation
from gpupool.scheduler.tenants import Quota, Tenant, TenantTree
from tests.support.builders import cluster, tree

DAY = 86400


def jobs(prefix: str, n: int, tenant: str, spec: str = "gpu=1", **kw) -> list[Job]:
    return [Job(f"{prefix}{i:02d}", parse_request(spec), tenant=tenant, **kw) for i in range(n)]


def carry(result, pending_jobs, start: float = 0.0) -> list[RunningJob]:
    by_id = {j.id: j for j in pending_jobs}
    return [RunningJob(by_id[b.job_id], b.placement, start, b.borrowed) for b in result.bindings]


def test_idle_guarantee_is_borrowed_then_reclaimed_in_one_cycle():
    nodes = cluster()  # 10 servers x 4 A100-80G = 40 cards
    b_jobs = jobs("b", 30, "team-b")
    first = run_cycle(ClusterState(nodes), [], b_jobs, tree(**{"team-a": 20, "team-b": 20}), 0)
    assert first.admitted == 30
    assert sum(b.borrowed for b in first.bindings) == 10  # 20 in guarantee + 10 borrowed
    assert {b.action for b in first.bindings} == {"allocate", "borrow"}

    running = carry(first, b_jobs)
    a_jobs = jobs("a", 15, "team-a", submit_time=10)
    second = run_cycle(
        ClusterState(nodes), running, a_jobs, tree(**{"team-a": 20, "team-b": 20}), 20
    )
    assert second.admitted == 15 and not second.pending
    victims = {p.job_id for p in second.preemptions}
    borrowed = {r.job.id for r in running if r.borrowed}
    assert len(victims) == 5 and victims <= borrowed  # only borrowed capacity is taken back
    assert all(p.action == "suspend" and p.grace_s == 30 for p in second.preemptions)
    assert sum(b.action == "reclaim" for b in second.bindings) == 5


def test_borrowing_limit_and_lending_limit_are_respected():
    nodes = cluster(4)  # 16 cards
    tenants = TenantTree(
        [
            Tenant("company"),
            Tenant("a", "company", {"gpu": Quota.cards(8, borrowing=2)}),
            Tenant("b", "company", {"gpu": Quota.cards(8, lending=1)}),
        ]
    )
    result = run_cycle(ClusterState(nodes), [], jobs("a", 16, "a"), tenants, 0)
    assert result.admitted == 9  # 8 guaranteed + 1 that b lends (a's limit would allow 2)
    reason = str(result.pending["a09"])
    assert reason == "quota: a gpu 9/8 guaranteed, no idle capacity to borrow in the cohort"
    limited = TenantTree(
        [
            Tenant("company"),
            Tenant("a", "company", {"gpu": Quota.cards(8, borrowing=2)}),
            Tenant("b", "company", {"gpu": Quota.cards(8)}),
        ]
    )
    again = run_cycle(ClusterState(nodes), [], jobs("a", 16, "a"), limited, 0)
    assert again.admitted == 10
    assert str(again.pending["a10"]) == "quota: a gpu 10/8 guaranteed, borrowing limit 2 reached"


def test_online_inference_preempts_dev_test_never_training_in_guarantee():
    nodes = cluster(2)  # 8 cards
    tenants = lambda: tree(platform=4, research=4, web=0)  # noqa: E731
    dev = jobs("dev", 2, "platform", priority_class="dev-test", kind=JobKind.DEV)
    train = jobs("train", 2, "platform", priority_class="training")
    research = jobs("res", 4, "research", priority_class="training")
    first = run_cycle(ClusterState(nodes), [], dev + train + research, tenants(), 0)
    assert first.admitted == 8
    running = carry(first, dev + train + research)
    online = jobs(
        "inf",
        2,
        "platform",
        priority_class="online-inference",
        kind=JobKind.INFERENCE,
        submit_time=5,
    )
    second = run_cycle(ClusterState(nodes), running, online, tenants(), 10)
    assert second.admitted == 2
    assert {p.job_id for p in second.preemptions} == {"dev00", "dev01"}
    # inference of another tenant finds only training in guarantee: nothing is preempted
    running = [r for r in running if not r.job.id.startswith("dev")] + carry(second, online, 10)
    other = jobs("x", 1, "web", priority_class="online-inference", submit_time=11)
    third = run_cycle(ClusterState(nodes), running, other, tenants(), 12)
    assert third.preemptions == [] and third.bindings == []
    assert str(third.pending["x00"]) == (
        "quota: web gpu 0/0 guaranteed, no idle capacity to borrow in the cohort"
    )


def test_preemption_takes_the_fewest_lowest_priority_most_recent_victims():
    nodes = cluster(1, 4)
    low_old = Job("low-old", parse_request("gpu=1"), tenant="t", priority_class="dev-test")
    low_new = Job("low-new", parse_request("gpu=1"), tenant="t", priority_class="dev-test")
    mid = Job("mid", parse_request("gpu=2"), tenant="t", priority_class="training")
    state = ClusterState(nodes)
    first = run_cycle(state, [], [low_old, low_new, mid], tree(t=4), 0)
    by = {b.job_id: b for b in first.bindings}
    running = [
        RunningJob(low_old, by["low-old"].placement, 0),
        RunningJob(low_new, by["low-new"].placement, 50),
        RunningJob(mid, by["mid"].placement, 10),
    ]
    urgent = Job("urgent", parse_request("gpu=1"), tenant="t", priority_class="online-inference")
    result = run_cycle(ClusterState(nodes), running, [urgent], tree(t=4), 60)
    assert [p.job_id for p in result.preemptions] == ["low-new"]
    huge = Job("huge", parse_request("gpu=8"), tenant="t", priority_class="online-inference")
    refused = run_cycle(ClusterState(nodes), running, [huge], tree(t=8), 60)
    assert refused.preemptions == [] and "huge" in refused.pending  # would still not fit


def test_a_reservation_for_next_week_lends_its_nodes_to_work_that_will_be_gone_in_time():
    """Issue 47: a reservation for next week took its nodes at once — every job without a
    time limit, the reserving team's own and service replicas included, lost them for the
    8 days before. Now before its window they run preemptible work, and online work that
    ends in time; online work that would not goes there only when no other node has room
    (issue 59: kept off altogether, a service had no place while dev/test work took the
    node), and is told so: it is moved when the window begins."""
    nodes = cluster(2, 4)
    r12 = Reservation("r-12", "team-a", ("s00",), start=7 * DAY, end=8 * DAY)
    r13 = Reservation("r-13", "team-c", ("s01",), start=9 * DAY, end=10 * DAY)
    train = Job("train", parse_request("gpu=3"), tenant="team-b", kind=JobKind.TRAINING)
    online = "online-inference"
    replica = Job("replica", parse_request("gpu=1"), tenant="team-b", priority_class=online)
    brief = Job("brief", parse_request("gpu=1"), tenant="team-b", priority_class=online,
                max_runtime_s=DAY)  # fmt: skip
    own = Job("own", parse_request("gpu=2"), tenant="team-a", priority_class=online)

    def teams() -> TenantTree:  # a fresh tree each cycle: it is charged with what runs
        return tree(**{"team-a": 4, "team-b": 5, "team-c": 0})

    today = run_cycle(
        ClusterState(nodes), [], [train, replica, brief, own], teams(), 0, reservations=[r12, r13]
    )
    placed = {b.job_id: b.placement.node_names[0] for b in today.bindings}
    assert set(placed) == {"train", "brief", "own", "replica"} and placed["own"] == "s00"
    (bound,) = [b for b in today.bindings if b.job_id == "replica"]
    assert bound.ahead == ("r-13",) and placed["replica"] == "s01"  # every node is reserved
    assert bound.note.startswith(
        "ahead of reservation r-13 of team-c (from 1970-01-10T00:00:00Z) on its nodes: no "
        "other node had room"
    )  # the reservation it will have to leave, and when
    running = carry(today, [train, replica, brief, own])
    assert not today.preemptions

    begins = 7 * DAY + 5
    mine = Job("mine", parse_request("gpu=2"), tenant="team-a", submit_time=begins)
    window = run_cycle(
        ClusterState(nodes), running, [mine], teams(), begins, reservations=[r12, r13]
    )
    on_s00 = {r.job.id for r in running if "s00" in r.placement.node_names} - {"own"}
    stopped = {p.job_id: p for p in window.preemptions}
    assert set(stopped) == on_s00 and on_s00  # others' work on s00; the owner's stays
    for p in stopped.values():
        assert p.cause is Cause.RESERVATION and p.by == "reservation r-12 of team-a"
        assert p.reason.startswith("its window began at 1970-01-08T00:00:00Z on s00")
    # brief is online work too, but s01 is full: no copy, it stops saying why
    assert stopped["brief"].reason.endswith("; no room elsewhere for a copy: 0/2 nodes: 1 no "
                                            "free gpu, 1 s00 reserved by r-12 of team-a until "
                                            "1970-01-09T00:00:00Z")  # fmt: skip
    assert window.replacements == []
    assert "mine" not in {b.job_id for b in window.bindings}  # room once they have stopped
    left = [r for r in running if r.job.id not in stopped]
    after = run_cycle(ClusterState(nodes), left, [mine], teams(), begins + 60, reservations=[r12])
    assert [(b.job_id, b.placement.node_names[0]) for b in after.bindings] == [("mine", "s00")]


def test_a_gang_never_starts_partially():
    nodes = cluster(3, 4)
    gang = Job("gang", parse_request("gpu=4"), tenant="t", gang_size=4)
    result = run_cycle(ClusterState(nodes), [], [gang], tree(t=16), 0)
    assert result.bindings == []
    assert str(result.pending["gang"]).startswith("gang 3/4 placed")


def test_a_starving_large_job_gets_backfill_protection():
    nodes = cluster(1, 8)
    state_jobs = jobs("run", 6, "t", max_runtime_s=None)
    ends = [3100, 3200, 3300, 3400, 3500, 3600]
    first = run_cycle(ClusterState(nodes), [], state_jobs, tree(t=8), 0)
    running = [
        RunningJob(j.__class__(**{**_fields(j), "max_runtime_s": e}), b.placement, 0)
        for j, b, e in zip(state_jobs, first.bindings, ends, strict=True)
    ]
    big = Job("big", parse_request("gpu=8"), tenant="t", submit_time=0)
    quick = Job("quick", parse_request("gpu=1"), tenant="t", submit_time=50, max_runtime_s=100)
    slow = Job("slow", parse_request("gpu=1"), tenant="t", submit_time=50, max_runtime_s=10000)
    config = CycleConfig(queue=QueuePolicy(starvation_s=3000, aging_s=0))
    fresh = run_cycle(
        ClusterState(nodes), running, [big, quick, slow], tree(t=8), 60, config=config
    )
    assert {b.job_id for b in fresh.bindings} == {"quick", "slow"}  # big is not starving yet
    starving = run_cycle(
        ClusterState(nodes), running, [big, quick, slow], tree(t=8), 3050, config=config
    )
    assert [b.job_id for b in starving.bindings] == ["quick"]  # ends before big can start
    assert starving.bindings[0].action == "backfill"
    assert str(starving.pending["slow"]) == "waiting behind big (starving; backfill only)"


def _fields(job: Job) -> dict:
    return {name: getattr(job, name) for name in job.__dataclass_fields__}


def test_unknown_tenant_and_priority_class_are_reported_not_raised():
    bad = [
        Job("who", parse_request("gpu=1"), tenant="nobody"),
        Job("what", parse_request("gpu=1"), tenant="t", priority_class="urgent"),
    ]
    result = run_cycle(ClusterState(cluster(1)), [], bad, tree(t=4), 0)
    assert str(result.pending["who"]) == "tenant: unknown tenant 'nobody'"
    assert "unknown priority class 'urgent'" in str(result.pending["what"])


def test_a_team_past_its_guarantee_is_told_why_it_cannot_reclaim_lent_cards():
    """Issue 47: a team a little over its guarantee cannot take back cards it lent; its job's
    reason said only what the placement saw, hiding that lent capacity was there."""
    nodes = cluster(2)  # 8 cards
    teams = lambda: tree(inf=4, train=2, idle=2)  # noqa: E731
    first_jobs = jobs("inf", 5, "inf") + jobs("tr", 3, "train", submit_time=1)
    first = run_cycle(ClusterState(nodes), [], first_jobs, teams(), 0)
    assert {b.job_id for b in first.bindings if b.borrowed} == {"inf04", "tr02"}
    more = jobs("new", 1, "inf", submit_time=5)
    second = run_cycle(ClusterState(nodes), carry(first, first_jobs), more, teams(), 10)
    assert not second.bindings and not second.preemptions  # train keeps its borrowed card
    assert str(second.pending["new00"]).endswith(
        "; cannot reclaim lent capacity: inf holds 5 gpu against a guarantee of 4, and this "
        "job's 1 more would pass it (reclaim takes back no more than a guarantee)"
    )


def test_a_reservation_of_cards_holds_that_many_and_lends_the_rest():
    """Issue 47: only whole nodes could be reserved. Four cards of two 4-card servers held for
    team-a (packed: on the first, where a 4-card job fits): others run on the other four, a
    fifth is told the hold leaves no room; the owner gets its four together. Before the window
    others' preemptible work takes them all, and at its start only what sits on the held
    cards is stopped."""
    nodes = cluster(2, 4)
    held = Reservation("r-5", "team-a", ("s00", "s01"), start=DAY, end=2 * DAY, cards=4)

    def teams() -> TenantTree:
        return tree(**{"team-a": 4, "team-b": 4})

    online = "online-inference"
    others = [Job(f"b{i}", parse_request("gpu=1"), tenant="team-b", priority_class=online,
                  submit_time=i) for i in range(5)]  # fmt: skip
    during = run_cycle(ClusterState(nodes), [], others, teams(), DAY + 1, reservations=[held])
    assert during.admitted == 4
    assert str(during.pending["b4"]).endswith(
        "4 cards of s00, s01 reserved by r-5 of team-a until 1970-01-03T00:00:00Z: 0 left "
        "beside them, this job takes 1"
    )
    own = [Job("a", parse_request("gpu=4"), tenant="team-a")]
    running = carry(during, others)
    then = run_cycle(ClusterState(nodes), running, own, teams(), DAY + 2, reservations=[held])
    assert [b.job_id for b in then.bindings] == ["a"]

    batch = [Job(f"t{i}", parse_request("gpu=1"), tenant="team-b", submit_time=i)
             for i in range(8)]  # fmt: skip
    before = run_cycle(ClusterState(nodes), [], batch, teams(), 0, reservations=[held])
    assert before.admitted == 8  # preemptible work may use the hold until the window
    placed = {b.job_id: b for b in before.bindings}
    started = [RunningJob(j, placed[j.id].placement, float(i), False) for i, j in enumerate(batch)]
    at_start = run_cycle(ClusterState(nodes), started, [], teams(), DAY, reservations=[held])
    stopped = {p.job_id for p in at_start.preemptions}
    on_first = {j for j, b in placed.items() if b.placement.node_names == ("s00",)}
    assert len(on_first) == 4 and stopped == on_first  # held packed, on its first node
    assert all(p.cause is Cause.RESERVATION for p in at_start.preemptions)

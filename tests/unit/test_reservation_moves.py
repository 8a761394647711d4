"""A reservation and the services on its nodes (issue 59, finding 1), on the pure cycle.

A reservation starting now stopped both replicas of a service; their replacements could not
go to the two free nodes, reserved from later by another reservation ("online work would run
past its start"), while in the same cycle a dev/test job without a time limit was placed
there. Now online work may use a reservation's nodes before its window when no other node
has room (it is moved when the window begins), and a reservation that begins copies the
replicas on its nodes elsewhere first (make-before-break), stopping them once the copies
run, instead of stopping them at once."""

from gpupool.model import Job, JobKind, parse_request
from gpupool.scheduler import ClusterState
from gpupool.scheduler.cycle import CycleConfig, RunningJob, run_cycle
from gpupool.scheduler.reasons import Cause
from gpupool.scheduler.reservations import Reservation
from gpupool.scheduler.types import DeviceGrant, NodeGrant, Placement
from tests.support.builders import cluster, tree

HOUR = 3600.0
ONLINE = "online-inference"


def teams():  # a fresh tree each cycle: it is charged with what runs
    return tree(algorithm=20, inference=10, devtest=10)


def replica(name: str, spec: str = "gpu=4", **kw) -> Job:
    return Job(name, parse_request(spec), tenant="inference", kind=JobKind.INFERENCE,
               priority_class=ONLINE, on_preempt="kill", **kw)  # fmt: skip


def devtest(name: str, spec: str = "gpu=4", **kw) -> Job:
    return Job(name, parse_request(spec), tenant="devtest", kind=JobKind.DEV,
               priority_class="dev-test", **kw)  # fmt: skip


def test_lower_priority_work_never_takes_the_node_a_service_could_not_go_to():
    """The rule that placed the dev/test job: before a reservation's window, its nodes took
    preemptible work but never online work — so the service, with nowhere else to go, waited
    while the dev/test job took the node."""
    nodes = cluster(3, 4)  # s00 reserved from later; s01, s02 reserved now
    ahead = Reservation("r-1", "algorithm", ("s00",), start=HOUR, end=24 * HOUR)
    now = Reservation("r-2", "algorithm", ("s01", "s02"), start=0, end=2 * HOUR)
    chat, dev = replica("chat-1"), devtest("dev-1", submit_time=-10)
    result = run_cycle(ClusterState(nodes), [], [dev, chat], teams(), 60, [ahead, now])
    placed = {b.job_id: b for b in result.bindings}
    assert set(placed) == {"chat-1"} and placed["chat-1"].placement.node_names == ("s00",)
    assert placed["chat-1"].ahead == ("r-1",)  # said: it moves when r-1 begins
    assert "ahead of reservation r-1 of algorithm" in placed["chat-1"].note
    assert "dev-1" in result.pending


def test_online_work_goes_to_a_reserved_node_only_when_no_other_has_room():
    nodes = cluster(4, 4)  # s03 is free of any reservation
    ahead = Reservation("r-1", "algorithm", ("s00",), start=HOUR, end=24 * HOUR)
    now = Reservation("r-2", "algorithm", ("s01", "s02"), start=0, end=2 * HOUR)
    chat, dev = replica("chat-1"), devtest("dev-1", submit_time=-10)
    result = run_cycle(ClusterState(nodes), [], [dev, chat], teams(), 60, [ahead, now])
    placed = {b.job_id: b for b in result.bindings}
    assert placed["chat-1"].placement.node_names == ("s03",) and placed["chat-1"].ahead == ()
    assert placed["dev-1"].placement.node_names == ("s00",)  # preemptible: stopped at r-1


def test_a_reservation_that_begins_copies_the_replicas_on_its_nodes_first():
    nodes = cluster(4, 4)
    start = 10 * HOUR
    r2 = Reservation("r-2", "algorithm", ("s01", "s02"), start=start, end=start + 2 * HOUR)
    serving, parked = replica("chat-1", "gpu=2"), replica("chat-2", "gpu=2")
    train = devtest("train-1", "gpu=2")
    # as on the day: both replicas and a training job sit on the reserved nodes
    running = [
        RunningJob(serving, _on(nodes, serving, "s01", 0), 0),
        RunningJob(parked, _on(nodes, parked, "s02", 0), 0),
        RunningJob(train, _on(nodes, train, "s01", 2), 0),
    ]
    late = devtest("dev-late", "gpu=4", submit_time=start - 5)  # would take the free room
    begins = run_cycle(ClusterState(nodes), running, [late], teams(), start, [r2])
    copies = {c.job_id: c for c in begins.replacements}
    assert set(copies) == {"chat-1", "chat-2"}
    for c in copies.values():
        assert c.cause is Cause.RESERVATION and c.by == "reservation r-2 of algorithm"
        assert not {"s01", "s02"} & set(c.placement.node_names)
        assert c.reason.startswith("moved for reservation r-2 of algorithm: its window began")
    assert [p.job_id for p in begins.preemptions] == ["train-1"]  # only the training stops
    assert begins.preemptions[0].cause is Cause.RESERVATION
    assert "dev-late" not in {b.job_id for b in begins.bindings}  # the copies came first
    # next cycle, the copies start: the replicas keep running until they run, nothing else
    config = CycleConfig(replacing=frozenset(copies))
    left = [r for r in running if r.job.id != "train-1"]
    later = run_cycle(ClusterState(nodes), left, [], teams(), start + 5, [r2], config)
    assert later.replacements == [] and later.preemptions == []


def test_a_replica_with_nowhere_to_go_is_stopped_saying_so():
    nodes = cluster(2, 4)
    r2 = Reservation("r-2", "algorithm", ("s01",), start=0, end=2 * HOUR)
    chat, other = replica("chat-1"), devtest("dev-1")
    running = [
        RunningJob(chat, _on(nodes, chat, "s01", 0), 0),
        RunningJob(other, _on(nodes, other, "s00", 0), 0),  # the only other node is full
    ]
    result = run_cycle(ClusterState(nodes), running, [], teams(), 60, [r2])
    assert result.replacements == []
    (stop,) = result.preemptions
    assert stop.job_id == "chat-1" and stop.cause is Cause.RESERVATION
    assert "no room elsewhere for a copy" in stop.reason


def _on(nodes, job: Job, node: str, first: int):
    """``job``'s whole cards on ``node`` from device ``first``."""
    n = next(n for n in nodes if n.name == node)
    devices = tuple(
        DeviceGrant(node, d, 100, n.devices[d].memory_mib, True)
        for d in range(first, first + job.request.gpu_count)
    )
    return Placement(job.id, (NodeGrant(node, job.request.cpu_millis, 0, devices),), "test")


def test_without_copies_a_reservation_stops_online_work_as_before():
    """Kubernetes mode evicts a pod instead (its controller makes it again): no copy."""
    nodes = cluster(2, 4)
    r2 = Reservation("r-2", "algorithm", ("s01",), start=0, end=2 * HOUR)
    chat = replica("chat-1")
    running = [RunningJob(chat, _on(nodes, chat, "s01", 0), 0)]
    config = CycleConfig(copy_for_reservations=False)
    result = run_cycle(ClusterState(nodes), running, [], teams(), 60, [r2], config)
    assert result.replacements == [] and [p.job_id for p in result.preemptions] == ["chat-1"]
    assert result.preemptions[0].reason == "its window began at 1970-01-01T00:00:00Z on s01"


def test_a_hold_of_cards_copies_a_replica_before_stopping_work_that_loses_progress():
    """Two of s01's four cards held: a replica (1 card) and a training job (2) of others
    leave it one short. Copying the replica, which loses no work, makes it whole."""
    nodes = cluster(2, 4)
    held = Reservation("r-3", "algorithm", ("s01",), start=0, end=2 * HOUR, cards=2)
    chat, train = replica("chat-1", "gpu=1"), devtest("train-1", "gpu=2")
    running = [
        RunningJob(chat, _on(nodes, chat, "s01", 0), 0),
        RunningJob(train, _on(nodes, train, "s01", 1), 10),  # the last started
    ]
    result = run_cycle(ClusterState(nodes), running, [], teams(), 60, [held])
    assert [(c.job_id, c.placement.node_names) for c in result.replacements] == [
        ("chat-1", ("s00",))
    ]
    assert result.preemptions == []

"""What a reservation will do, before it exists (issue 59, finding 1): the jobs it stops and
the replicas it moves when it begins, and the online work it would leave without a place —
at its start, or at the start of another reservation during its window (the issue's case:
the replicas' copies would go to nodes another reservation takes an hour later). The
engine's own cycle decides it, at each of those times."""

from gpupool.model import Job, JobKind, parse_request
from gpupool.scheduler import ClusterState
from gpupool.scheduler.cycle import RunningJob
from gpupool.scheduler.reservation_plan import plan_reservation
from gpupool.scheduler.reservations import Reservation
from gpupool.scheduler.types import DeviceGrant, NodeGrant, Placement
from tests.support.builders import cluster, tree

HOUR = 3600.0


def _job(name: str, tenant: str, spec: str, online: bool, **kw) -> Job:
    kind = JobKind.INFERENCE if online else JobKind.DEV
    cls = "online-inference" if online else "dev-test"
    return Job(name, parse_request(spec), tenant=tenant, kind=kind, priority_class=cls, **kw)


def _on(nodes, job: Job, node: str, first: int = 0) -> RunningJob:
    n = next(n for n in nodes if n.name == node)
    devices = tuple(
        DeviceGrant(node, d, 100, n.devices[d].memory_mib, True)
        for d in range(first, first + job.request.gpu_count)
    )
    return RunningJob(job, Placement(job.id, (NodeGrant(node, 0, 0, devices),), "test"), 0.0)


def _teams():
    return tree(algorithm=20, inference=10, devtest=10)


def _world():
    nodes = cluster(4, 4)  # s00 reserved from an hour on; replicas on s01, s02
    ahead = Reservation("r-1", "algorithm", ("s00",), start=HOUR, end=24 * HOUR)
    chat1 = _job("chat-1", "inference", "gpu=1", True, on_preempt="kill")
    chat2 = _job("chat-2", "inference", "gpu=1", True, on_preempt="kill")
    train = _job("train", "devtest", "gpu=3", False)
    brief = _job("brief", "devtest", "gpu=1", False, max_runtime_s=30)  # ends before
    running = [_on(nodes, chat1, "s01"), _on(nodes, train, "s01", 1), _on(nodes, chat2, "s02"),
               _on(nodes, brief, "s02", 1)]  # fmt: skip
    return nodes, ahead, running


def test_a_reservation_that_would_strand_a_service_an_hour_later_says_so():
    nodes, ahead, running = _world()
    state = ClusterState(nodes)
    for r in running:
        state.apply(r.placement)
    new = Reservation("r-2", "algorithm", ("s01", "s02", "s03"), start=60, end=2 * HOUR)
    plan = plan_reservation(state, running, _teams, [ahead], new, now=60)
    # at its start: the replicas are copied to s00 (the only node left, reserved ahead), the
    # training job stops; the brief job ended by then (its time limit)
    assert {m.job_id: m.to for m in plan.moves} == {"chat-1": ("s00",), "chat-2": ("s00",)}
    assert plan.stops == ("train",)
    # an hour later r-1 begins on s00: every other node is r-2's, so the replicas are
    # stopped with no place — which r-1 alone would never do
    assert {s.job_id for s in plan.stranded} == {"chat-1", "chat-2"}
    for s in plan.stranded:
        assert s.at == HOUR and s.by == "r-1"
        assert "no room elsewhere for a copy" in s.why
    assert state.placements.keys() == {r.job.id for r in running}  # the state is left as is


def test_a_reservation_that_leaves_room_for_the_replicas_moves_them():
    nodes, ahead, running = _world()
    state = ClusterState(nodes)
    new = Reservation("r-2", "algorithm", ("s01",), start=2 * HOUR, end=3 * HOUR)
    plan = plan_reservation(state, running, _teams, [ahead], new, now=0)
    assert [(m.job_id, m.to) for m in plan.moves] == [("chat-1", ("s03",))]
    assert plan.stops == ("train",) and plan.stranded == ()


def test_a_replica_stranded_by_the_pool_as_it_is_is_not_blamed_on_the_new_reservation():
    nodes, ahead, running = _world()
    everywhere = Reservation("r-0", "algorithm", ("s01", "s02", "s03"), start=HOUR, end=5 * HOUR)
    new = Reservation("r-2", "devtest", ("s03",), start=2 * HOUR, end=3 * HOUR)
    plan = plan_reservation(ClusterState(nodes), running, _teams, [ahead, everywhere], new, now=0)
    assert plan.stranded == () and plan.moves == () and plan.stops == ()

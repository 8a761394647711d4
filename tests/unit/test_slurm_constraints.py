"""Slurm's placement constraints and job-control gates as the engine decides them (issue 63):
``-w/--nodelist`` (the job holds every node it names, one worker each, and more where it
asks more), ``-x/--exclude`` (never those), ``--begin`` (not before) and
``--dependency=singleton`` (one job of a name and user at a time, in submission order)."""

from gpupool.model import Job, parse_request
from gpupool.scheduler import ClusterState, Placement, Placer, Unplaceable
from gpupool.scheduler.cycle import run_cycle
from gpupool.scheduler.gates import Gated, gate
from tests.support.builders import node, tree


def _state(n: int = 4) -> ClusterState:
    return ClusterState([node(f"n{i}") for i in range(n)]).use_default_memory()


def _job(job_id: str, spec: str = "gpu=1", **fields) -> Job:
    return Job(job_id, parse_request(spec), tenant="a", **fields)


def test_a_nodelist_puts_one_worker_on_each_node_it_names_and_the_rest_anywhere():
    state = _state()
    one = Placer("first-fit").place_and_apply(state, _job("one", required_nodes=("n2",)))
    assert isinstance(one, Placement) and one.node_names == ("n2",)
    gang = _job("g", "gpu=4", gang_size=3, one_per_node=True, required_nodes=("n3", "n1"))
    placed = Placer("first-fit").place_and_apply(state, gang)
    assert isinstance(placed, Placement)
    assert placed.node_names[:2] == ("n3", "n1") and placed.node_names[2] == "n0"


def test_a_named_node_without_room_makes_the_job_wait_naming_it():
    state = _state()
    Placer("first-fit").place_and_apply(state, _job("busy", "gpu=4", required_nodes=("n1",)))
    waits = Placer("first-fit").place(state, _job("w", required_nodes=("n1",)))
    assert isinstance(waits, Unplaceable)
    assert "1 fewer than 1 free gpu" in waits.reason or "no free gpu" in waits.reason
    assert "3 not the nodes it names (-w/--nodelist)" in waits.reason, waits.reason
    gone = Placer("first-fit").place(state, _job("x", required_nodes=("n9",)))
    assert isinstance(gone, Unplaceable) and "n9 (-w/--nodelist) is not in the pool" in gone.reason


def test_excluded_nodes_are_never_used_and_the_reason_says_why():
    state = _state(2)
    tenants = tree(a=8)
    job = _job("x", "gpu=4", excluded_nodes=frozenset({"n0"}))
    result = run_cycle(state, [], [job], tenants, 0, placer=Placer("first-fit"))
    (binding,) = result.bindings
    assert binding.placement.node_names == ("n1",)
    other = _job("y", "gpu=1", excluded_nodes=frozenset({"n1"}), submit_time=1)
    blocked = _job("z", "gpu=1", excluded_nodes=frozenset({"n0", "n1"}), submit_time=2)
    again = run_cycle(state.clone(), [], [other, blocked], tree(a=8), 1)
    assert [b.job_id for b in again.bindings] == ["y"]
    assert "2 excluded by the job (-x/--exclude)" in str(again.pending["z"])


def test_begin_time_and_singleton_are_gates():
    now = 1_000.0
    later = Gated(1, begin_at=now + 60)
    due = Gated(2, begin_at=now - 1)
    out = gate([later, due], {}, {}, now=now)
    assert list(out) == [1] and out[1].startswith("begin time: not before 1970-01-01T00:17:40Z")
    # singleton: one job of a name and user runs at a time; pending ones go in id order
    key = ("alice", "train")
    live = {key: [(10, "running"), (11, "pending"), (12, "pending")]}
    first, second = Gated(11, singleton=key), Gated(12, singleton=key)
    out = gate([first, second], {}, {}, now=now, singles=live)
    assert out[11] == "singleton: job 10 of the same name (train) and user (alice) is running"
    assert out[12] == "singleton: job 10 of the same name (train) and user (alice) is running"
    after = {key: [(11, "pending"), (12, "pending")]}
    out = gate([first, second], {}, {}, now=now, singles=after)
    assert 11 not in out
    assert (
        out[12]
        == "singleton: job 11 of the same name (train) and user (alice) is pending ahead of it"
    )

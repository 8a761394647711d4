"""A whole-node request (issue 63, sbatch --exclusive and --mem=0 with Slurm's meaning): the
job gets whole nodes — every card, every CPU, and the memory it asked (all of it with
``mem=all``) — nothing else is placed on them while it runs, and quotas count the whole node.
A typed property of the request (``node=whole``, ``mem=all``), decided by the engine."""

import pytest

from gpupool.model import Job, SpecError, job, parse_request
from gpupool.scheduler import ClusterState, Placement, Placer, Unplaceable
from gpupool.scheduler.cycle import RunningJob, run_cycle
from gpupool.scheduler.placement_json import placement_from_json, placement_to_json
from gpupool.scheduler.tenants import Quota, Tenant, TenantTree
from gpupool.sharing import SharingMode
from tests.support.builders import node


def test_the_grammar_has_whole_nodes_and_all_of_a_nodes_memory():
    r = parse_request("gpu=4,cpu=8,node=whole")
    assert r.whole_node and not r.mem_all and r.gpu == 4
    assert parse_request(r.to_spec()) == r and "node=whole" in r.to_spec()
    m = parse_request("gpu=2,mem=all")
    assert m.mem_all and m.mem_mib == 0 and parse_request(m.to_spec()) == m
    assert parse_request("cpu=1,node=whole").whole_node  # CPU-only: still every card
    assert parse_request("gpu=1,node=shared") == parse_request("gpu=1")


@pytest.mark.parametrize(
    "spec, words",
    [
        ("gpu_share=50%,node=whole", "node=whole takes whole cards"),
        ("mig=1g.10gb,node=whole", "node=whole takes whole cards"),
        ("gpu=8,topology=nvlink,node=whole", "node=whole: one node a worker"),
        ("node=all", "'all' is not one of shared|whole"),
        ("mem=everything", "mem"),
    ],
)
def test_what_a_whole_node_cannot_be_is_refused_naming_it(spec, words):
    with pytest.raises(SpecError) as refused:
        parse_request(spec)
    assert words in str(refused.value)


def _state():
    state = ClusterState([node("n0", cards=8), node("n1", cards=8), node("n2", cards=4)])
    return state.use_default_memory()


def test_a_whole_node_job_gets_every_card_and_cpu_and_the_memory_it_asked():
    state = _state()
    assert isinstance(Placer("first-fit").place_and_apply(state, job("small", "gpu=1")), Placement)
    asked = job("x", "gpu=4,cpu=2,mem=64GiB,node=whole")
    placed = Placer("first-fit").place_and_apply(state, asked)
    assert isinstance(placed, Placement)
    (grant,) = placed.nodes
    # n0 holds another job; n2 has 4 cards, the fewest that hold 4: the smallest node that fits
    assert grant.node == "n2" and grant.whole
    assert [d.device for d in grant.devices] == [0, 1, 2, 3]
    assert all(d.exclusive for d in grant.devices)
    assert grant.cpu_millis == 64_000 and grant.mem_mib == 64 * 1024
    eight = Placer("first-fit").place_and_apply(state, job("y", "gpu=5,node=whole"))
    assert isinstance(eight, Placement) and eight.node_names == ("n1",)
    assert len(eight.devices) == 8 and eight.nodes[0].mem_mib == 512 * 1024  # no mem=: all
    state.check_invariants()


def test_mem_all_takes_all_of_a_nodes_memory_and_needs_it_free():
    state = _state()
    Placer("first-fit").place_and_apply(state, job("small", "gpu=1,mem=1GiB"))
    placed = Placer("first-fit").place_and_apply(state, job("m", "gpu=2,mem=all"))
    assert isinstance(placed, Placement) and placed.node_names == ("n1",)
    assert placed.nodes[0].mem_mib == 512 * 1024 and len(placed.devices) == 2
    assert not placed.nodes[0].whole  # its node's other cards stay others' (no memory left)


def test_nothing_else_lands_on_a_whole_node_while_it_runs():
    state = ClusterState([node("n0", cards=4)]).use_default_memory()
    whole = Placer("first-fit").place_and_apply(state, job("x", "gpu=1,cpu=1,mem=1GiB,node=whole"))
    assert isinstance(whole, Placement)
    for spec in ("gpu=1", "cpu=1", "mem=1GiB", "gpu_mem=10GiB"):
        refused = Placer("first-fit").place(state, job(f"other-{spec}", spec))
        assert isinstance(refused, Unplaceable), spec
        assert "held whole by an exclusive job" in refused.reason, refused.reason
    state.release("x")
    assert isinstance(Placer("first-fit").place(state, job("after", "mem=1GiB")), Placement)


def test_a_whole_node_waits_for_a_node_with_nothing_on_it_and_says_so():
    state = ClusterState([node("n0"), node("n1", mode=SharingMode.MIG)]).use_default_memory()
    Placer("first-fit").place_and_apply(state, job("small", "cpu=1,mem=1GiB"))
    refused = Placer("first-fit").place(state, job("x", "gpu=1,node=whole"))
    assert isinstance(refused, Unplaceable)
    assert "0/2 nodes" in refused.reason and "not empty" in refused.reason, refused.reason
    assert "MIG" in refused.reason, refused.reason


def test_a_gang_of_whole_nodes_takes_distinct_nodes():
    state = _state()
    gang = Job("g", parse_request("gpu=8,node=whole"), gang_size=2, one_per_node=True)
    placed = Placer("first-fit").place_and_apply(state, gang)
    assert isinstance(placed, Placement) and sorted(placed.node_names) == ["n0", "n1"]
    assert all(n.whole for n in placed.nodes) and len(placed.devices) == 16


def test_the_whole_flag_survives_the_stored_placement():
    state = _state()
    placed = Placer("first-fit").place_and_apply(state, job("x", "gpu=1,node=whole"))
    assert isinstance(placed, Placement)
    again = placement_from_json("x", placement_to_json(placed))
    assert again == placed
    plain = Placer("first-fit").place_and_apply(state, job("p", "gpu=1"))
    assert "whole" not in placement_to_json(plain)["nodes"][0]  # stored as before


def test_quotas_count_the_whole_node_not_the_cards_asked():
    nodes = [node("n0", cards=8), node("n1", cards=8)]

    def tenants():  # a cycle charges the tree it is given: a fresh one each
        return TenantTree(
            [Tenant("company"), Tenant("a", "company", {"gpu": Quota.cards(4, 0, 0)}),
             Tenant("b", "company", {"gpu": Quota.cards(12)})]
        )  # fmt: skip

    asked = Job("x", parse_request("gpu=4,node=whole"), tenant="a")
    result = run_cycle(ClusterState(nodes), [], [asked], tenants(), 0)
    assert not result.bindings
    assert str(result.pending["x"]) == (
        "quota: a gpu 0/4 guaranteed, borrowing limit 0 reached; node=whole counts every card "
        "of its nodes: 8"
    )
    fits = Job("y", parse_request("gpu=4,node=whole"), tenant="b")
    admitted = run_cycle(ClusterState(nodes), [], [fits], tenants(), 0)
    (binding,) = admitted.bindings
    running = [RunningJob(fits, binding.placement, 0)]
    more = [Job(f"z{i}", parse_request("gpu=1"), tenant="b") for i in range(5)]
    later = run_cycle(ClusterState(nodes), running, more, tenants(), 1)
    assert len(later.bindings) == 4  # 12 guaranteed: 8 held by the whole node, 4 left

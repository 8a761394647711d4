import math

import numpy as np
import pytest

from gpupool.model import Job, JobKind, SharingMode, job
from gpupool.scheduler import ClusterState, Placement, Placer, Unplaceable, schedule
from gpupool.scheduler.fragmentation import FragmentationModel, ShapeMix
from gpupool.sharing import PoolSharing, SharePolicy
from tests.support.builders import node


def _place(state, policy, spec, **fields):
    return Placer(policy).place_and_apply(state, job(f"j{len(state.placements)}", spec, **fields))


def _preload(state, used: dict[str, int]):
    """Take ``used[node]`` whole cards on each node, with first-fit, before the test job."""
    for name, n in used.items():
        for _ in range(n):
            spec = "gpu=1"
            placed = Placer("first-fit").place_and_apply(
                state, job(f"pre-{name}-{len(state.placements)}", spec)
            )
            assert isinstance(placed, Placement)
            # first-fit fills from n0; move the grant to the wanted node instead
            state.release(placed.job_id)
            row = state.index[name]
            col = int(np.flatnonzero(state.idle[row])[0])
            dev = int(state.device_index[row, col])
            from gpupool.scheduler import DeviceGrant, NodeGrant

            grant = DeviceGrant(name, dev, 100, int(state.grantable_mem[row, col]), exclusive=True)
            state.apply(Placement(placed.job_id, (NodeGrant(name, 0, 0, (grant,)),), "test"))


@pytest.fixture
def three_nodes():
    state = ClusterState([node("n0"), node("n1"), node("n2")])
    _preload(state, {"n0": 1, "n1": 2})
    return state


def test_first_fit_takes_the_first_node_that_fits(three_nodes):
    assert _place(three_nodes, "first-fit", "gpu=1").node_names == ("n0",)


def test_best_fit_takes_the_fullest_node_that_fits(three_nodes):
    assert _place(three_nodes, "best-fit", "gpu=1").node_names == ("n1",)


def test_spread_takes_the_emptiest_node(three_nodes):
    assert _place(three_nodes, "spread", "gpu=1").node_names == ("n2",)


def test_a_packed_service_replica_takes_the_fullest_node_under_auto(three_nodes):
    """Online inference spreads under ``auto``; a service placed ``pack`` gives its replicas
    ``best-fit`` (few servers busy: training keeps whole ones for its gangs)."""
    fields = {"kind": JobKind.INFERENCE, "priority_class": "online-inference"}
    spread = Placer("auto").place(three_nodes, job("r1", "gpu=1", **fields))
    packed = Placer("auto").place(three_nodes, job("r2", "gpu=1", policy="best-fit", **fields))
    assert spread.node_names == ("n2",) and packed.node_names == ("n1",)


def test_whole_cards_go_to_the_first_free_indexes():
    state = ClusterState([node("n0", cards=8)])
    placed = _place(state, "first-fit", "gpu=3")
    assert [d.device for d in placed.devices] == [0, 1, 2]
    assert all(d.exclusive and d.compute_pct == 100 for d in placed.devices)


def test_topology_prefers_one_nvlink_island_over_a_fuller_node():
    state = ClusterState([node("n0", island_size=2), node("n1", island_size=2)])
    # n0 keeps one free card per island, n1 keeps a whole island free
    for name, dev in (("n0", 0), ("n0", 2), ("n1", 0)):
        row = state.index[name]
        from gpupool.scheduler import DeviceGrant, NodeGrant

        g = DeviceGrant(name, dev, 100, int(state.grantable_mem[row, dev]), exclusive=True)
        state.apply(Placement(f"pre{name}{dev}", (NodeGrant(name, 0, 0, (g,)),), "test"))
    assert _place(state, "best-fit", "gpu=2").node_names == ("n0",)  # fullest node
    state.release("j3")
    topo = _place(state, "topology", "gpu=2")
    assert topo.node_names == ("n1",)
    assert [d.device for d in topo.devices] == [2, 3]  # the island left whole
    nvlink = _place(state, "first-fit", "gpu=2,topology=nvlink")
    assert isinstance(nvlink, Unplaceable)
    assert "no NVLink island with 2 free gpu" in nvlink.reason


def test_span_nodes_uses_the_fewest_nodes():
    state = ClusterState([node("a", cards=4), node("b", cards=8), node("c", cards=8)])
    placed = _place(state, "first-fit", "gpu=12,topology=any,cpu=12")
    assert isinstance(placed, Placement)
    assert placed.node_names == (
        "b",
        "a",
    )  # 8 + 4: two nodes; the rest fits a exactly, c stays whole
    assert sum(n.cpu_millis for n in placed.nodes) >= 12000
    assert isinstance(_place(state, "first-fit", "gpu=12"), Unplaceable)  # topology=node


def test_fractional_shares_pack_onto_one_card_with_best_fit():
    state = ClusterState([node("n0", cards=2, mode=SharingMode.SHARE)], SharePolicy(10, 4))
    a = _place(state, "best-fit", "gpu_share=0.5,gpu_mem=10GiB")
    b = _place(state, "best-fit", "gpu_share=0.5,gpu_mem=10GiB")
    assert a.devices[0].device == b.devices[0].device
    c = _place(state, "best-fit", "gpu_share=0.25")
    assert c.devices[0].device != a.devices[0].device  # the first card is full
    assert c.devices[0].mem_mib == 81920 * 90 // 100 * 25 // 100  # proportional, headroom kept


def test_spread_puts_shares_on_different_cards():
    state = ClusterState([node("n0", cards=2, mode=SharingMode.SHARE)])
    a = _place(state, "spread", "gpu_share=0.25")
    b = _place(state, "spread", "gpu_share=0.25")
    assert a.devices[0].device != b.devices[0].device


def test_memory_headroom_and_sharer_limit_are_enforced():
    state = ClusterState([node("n0", cards=1, mode=SharingMode.SHARE)], SharePolicy(15, 3))
    usable = 81920 * 85 // 100
    assert isinstance(_place(state, "first-fit", f"gpu_mem={usable + 1}MiB"), Unplaceable)
    for _ in range(3):
        assert isinstance(_place(state, "first-fit", "gpu_mem=1GiB"), Placement)
    refused = _place(state, "first-fit", "gpu_mem=1GiB")
    assert "max sharers reached" in refused.reason


def test_hybrid_pool_serves_mig_and_shares_on_different_cards():
    hybrid = PoolSharing("hybrid", mig_per_node=1)
    state = ClusterState([hybrid.apply(node("n0", cards=2))])
    mig = _place(state, "best-fit", "mig=3g.40gb")
    share = _place(state, "best-fit", "gpu_share=0.5")
    assert mig.devices[0].device == 0 and mig.devices[0].mig_profile == "3g.40gb"
    assert share.devices[0].device == 1
    two = _place(state, "best-fit", "mig=1g.10gb:2")
    assert [d.device for d in two.devices] == [0, 0]
    starts = {d.mig_start for d in (*mig.devices, *two.devices)}
    assert len(starts) == 3
    whole = _place(state, "best-fit", "gpu=1")
    assert isinstance(whole, Unplaceable)  # the MIG card is not a whole card; the other is shared


def test_release_restores_the_snapshot():
    state = ClusterState([PoolSharing("hybrid", mig_per_node=1).apply(node("n0", cards=4))])
    before = {k: v.copy() for k, v in vars(state).items() if isinstance(v, np.ndarray)}
    placer = Placer("fgd")
    jobs = [job("a", "gpu=2,cpu=4"), job("b", "mig=2g.20gb"), job("c", "gpu_share=0.3")]
    placer.observe(jobs, state)
    for r in schedule(state, jobs, placer):
        assert isinstance(r, Placement)
    for j in jobs:
        state.release(j.id)
    for key, arr in before.items():
        if key != "version":
            assert np.array_equal(arr, getattr(state, key)), key


def test_gang_is_all_or_nothing():
    state = ClusterState([node("a"), node("b")])
    refused = Placer("first-fit").place_and_apply(
        state, Job("g", job("x", "gpu=4").request, gang_size=3)
    )
    assert isinstance(refused, Unplaceable) and refused.reason.startswith("gang 2/3 placed")
    assert state.placements == {} and state.idle.sum() == 8
    ok = Placer("first-fit").place_and_apply(
        state, Job("g2", job("x", "gpu=4").request, gang_size=2)
    )
    assert ok.node_names == ("a", "b")


def test_aggregated_reason_counts_each_node_once():
    nodes = [node(f"t{i}", "T4", 2) for i in range(3)] + [node("a0", cpu=8), node("a1", cpu=8)]
    state = ClusterState(nodes)
    refused = _place(state, "first-fit", "gpu=A100-80G:1,cpu=16")
    assert refused.reason == "0/5 nodes: 3 no A100-80G, 2 insufficient cpu"
    mem = _place(state, "first-fit", "gpu_mem=10GiB")
    assert mem.reason == "0/5 nodes: 5 no shared-mode gpu"


def test_unknown_mig_profile_and_policy_are_spec_errors():
    from gpupool.model import SpecError

    state = ClusterState([node("n0")])
    with pytest.raises(SpecError, match="not a profile of any MIG GPU"):
        _place(state, "first-fit", "mig=5g.50gb")
    with pytest.raises(SpecError, match="is not one of"):
        Placer("fastest")


def test_fgd_choice_minimises_fragmentation_increase():
    """FGD's pick equals the brute-force argmin of ΔF over every legal candidate."""
    state = ClusterState(
        [node(f"n{i}", "A100-80G", 2, cpu=16, mode=SharingMode.SHARE) for i in range(3)]
    )
    warm = [job("w1", "gpu_share=0.6,cpu=2"), job("w2", "gpu_share=0.3,cpu=2")]
    for j, target in zip(warm, ("n0", "n1"), strict=True):
        placed = Placer("first-fit").place(state, j)
        row, col = state.index[target], 0
        from gpupool.scheduler import DeviceGrant, NodeGrant

        g = DeviceGrant(target, 0, placed.devices[0].compute_pct, placed.devices[0].mem_mib)
        state.apply(Placement(j.id, (NodeGrant(target, 2000, 0, (g,)),), "test"))
        assert state.compute_free[row, col] < 100
    workload = ShapeMix()
    placer = Placer("fgd-exact", workload)
    mix = [job(f"m{i}", s) for i, s in enumerate(["gpu_share=0.5,cpu=2"] * 6 + ["gpu=1,cpu=4"] * 3)]
    placer.observe(mix, state)
    ask = job("x", "gpu_share=0.4,cpu=2")
    chosen = placer.place(state, ask)
    quantised = Placer("fgd", workload).place(state, ask)
    shapes, weights = workload.typical()
    best = None
    scored: list[tuple[float, str, int]] = []
    for row in range(state.size):
        for col in range(2):
            if state.compute_free[row, col] < 40:
                continue
            trial = ClusterState(state.nodes)
            trial.load(state.placements.values())
            before = FragmentationModel(trial, shapes, weights).cluster_fragmentation()
            from gpupool.scheduler import DeviceGrant, NodeGrant

            name = state.nodes[row].name
            g = DeviceGrant(name, col, 40, int(state.grantable_mem[row, col]) * 40 // 100)
            trial.apply(Placement("x", (NodeGrant(name, 2000, 0, (g,)),), "trial"))
            after = FragmentationModel(trial, shapes, weights).cluster_fragmentation()
            delta = after - before
            scored.append((delta, name, col))
            if best is None or delta < best[0] - 1e-9:
                best = (delta, name, col)
    assert best is not None
    assert (chosen.node_names[0], chosen.devices[0].device) == (best[1], best[2])
    # the paper's plugin: integer score int(sigmoid(-ΔF/1 GPU) * 100), first candidate on ties
    top = max(int(100 / (1 + math.exp(d / 100))) for d, _, _ in scored)
    first = next((n, c) for d, n, c in scored if int(100 / (1 + math.exp(d / 100))) == top)
    assert (quantised.node_names[0], quantised.devices[0].device) == first


def test_at_most_one_me_instance_per_gpu_in_placement():
    """``+me`` instances take a card's media engines: a second one goes to another card (or
    waits), though memory slices are free."""
    from gpupool.model import Device, Node, SharingMode, Vendor

    mig = SharingMode.MIG
    devices = tuple(
        Device(i, "A100-80G", Vendor.NVIDIA, 81920, uuid=f"GPU-{i}", mode=mig) for i in range(2)
    )
    state = ClusterState([Node("n0", 64000, 512 * 1024, devices)])
    placer = Placer("best-fit")
    grants = []
    for i in range(3):
        result = placer.place_and_apply(state, job(f"me{i}", "mig=1g.10gb+me"))
        grants.append(result)
    first, second, third = grants
    assert isinstance(first, Placement) and isinstance(second, Placement)
    cards = {first.devices[0].device, second.devices[0].device}
    assert cards == {0, 1}  # one +me on each card
    assert isinstance(third, Unplaceable) and "no free MIG slot" in third.reason
    plain = placer.place_and_apply(state, job("plain", "mig=1g.10gb"))
    assert isinstance(plain, Placement)  # memory slices are still free for plain 1g

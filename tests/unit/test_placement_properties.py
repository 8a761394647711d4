"""Property tests: no over-commit, legal MIG, honest refusals, determinism."""

from hypothesis import given
from hypothesis import strategies as st

from gpupool.bench.synthetic import synthetic_cluster, synthetic_jobs
from gpupool.model import (
    Job,
    Node,
    SharingMode,
    SliceKind,
    make_devices,
    model_matches,
    parse_request,
)
from gpupool.scheduler import POLICY_NAMES, ClusterState, Placement, Placer, Unplaceable
from gpupool.sharing import PoolSharing, SharePolicy, table_for
from tests.support.builders import fits_somewhere

SPECS = [
    "gpu=1,cpu=4,mem=16GiB",
    "gpu=2,cpu=8",
    "gpu=4,topology=nvlink",
    "gpu=3,topology=any,cpu=2",
    "gpu=A100-80G:1",
    "gpu=T4:2",
    "gpu=1,gpu_mem=40GiB",
    "vendor=ascend",
    "mig=1g.10gb",
    "mig=3g.40gb,cpu=2",
    "mig=1g.10gb:3",
    "mig=2g.35gb",
    "gpu_share=0.5,gpu_mem=10GiB,cpu=2",
    "gpu_share=0.3",
    "gpu_share=0.25,gpu=2",
    "gpu_mem=20GiB,cpu=4",
    "cpu=8,mem=64GiB",
]
MODELS = ["A100-80G", "H200-141G", "T4", "Ascend910B", "RTX4090"]
SHARINGS = [
    PoolSharing("whole"),
    PoolSharing("share"),
    PoolSharing("mig"),
    PoolSharing("hybrid", mig_per_node=1),
    PoolSharing("hybrid", mig_per_node=2),
]


@st.composite
def clusters(draw) -> list[Node]:
    nodes = []
    for i in range(draw(st.integers(1, 4))):
        model = draw(st.sampled_from(MODELS))
        cards = draw(st.sampled_from([1, 2, 4]))
        island = draw(st.sampled_from([None, 2]))
        name = f"n{i}"
        devices = make_devices(model, cards, node=name, island_size=island)
        base = Node(
            name, draw(st.integers(4, 64)) * 1000, draw(st.integers(8, 256)) * 1024, devices
        )
        nodes.append(draw(st.sampled_from(SHARINGS)).apply(base))
    return nodes


def _check_grant(state: ClusterState, job: Job, placement: Placement) -> None:
    r = job.request
    devices = placement.devices
    assert len(devices) == r.gpu_count * job.gang_size
    if r.kind is SliceKind.NONE:
        return
    if r.topology.value != "any":
        assert len(set(placement.node_names)) <= job.gang_size
    for d in devices:
        row = state.index[d.node]
        dev = next(x for x in state.nodes[row].devices if x.index == d.device)
        if r.gpu_model:
            assert model_matches(r.gpu_model, dev.model)
        if r.vendor is not None:
            assert dev.vendor == r.vendor
        if r.kind is SliceKind.WHOLE:
            assert d.exclusive and d.compute_pct == 100 and dev.mode is not SharingMode.MIG
            assert dev.memory_mib >= (r.gpu_mem_mib or 0)
        elif r.kind is SliceKind.SHARE:
            assert dev.mode is SharingMode.SHARE and not d.exclusive
            assert d.compute_pct == (r.gpu_share_pct or 0)
        else:
            table = table_for(dev.model)
            assert dev.mode is SharingMode.MIG and table is not None
            assert d.mig_profile == r.mig_profile
            assert d.mig_start in table.profile(r.mig_profile).starts


@given(
    nodes=clusters(),
    specs=st.lists(st.sampled_from(SPECS), min_size=1, max_size=25),
    releases=st.lists(st.integers(0, 30), max_size=6),
    policy=st.sampled_from(POLICY_NAMES),
    sharers=st.integers(1, 4),
)
def test_placements_never_overcommit_and_refusals_are_true(nodes, specs, releases, policy, sharers):
    state = ClusterState(nodes, SharePolicy(headroom_pct=10, max_sharers=sharers))
    placer = Placer(policy)
    jobs = [Job(f"j{i}", parse_request(s)) for i, s in enumerate(specs)]
    placer.observe(jobs, state)
    for i, j in enumerate(jobs):
        if i in releases and state.placements:
            state.release(sorted(state.placements)[0])
        result = placer.place_and_apply(state, j)
        state.check_invariants()
        if isinstance(result, Placement):
            _check_grant(state, j, result)
        else:
            assert isinstance(result, Unplaceable) and result.reason
            if j.request.topology.value != "any":
                assert not fits_somewhere(state, j.request), (j.request, result.reason)


@given(nodes=clusters(), specs=st.lists(st.sampled_from(SPECS), min_size=1, max_size=15))
def test_place_does_not_change_the_snapshot(nodes, specs):
    state = ClusterState(nodes)
    placer = Placer("best-fit")
    for i, s in enumerate(specs):
        before = (state.cpu_free.copy(), state.compute_free.copy(), state.mig_used.copy())
        placer.place(state, Job(f"j{i}", parse_request(s)))
        after = (state.cpu_free, state.compute_free, state.mig_used)
        assert all((a == b).all() for a, b in zip(before, after, strict=True))


def test_same_snapshot_and_queue_give_the_same_decisions():
    def run(policy: str) -> list:
        state = ClusterState(synthetic_cluster(40, 8, seed=3))
        jobs = synthetic_jobs(400, seed=3)
        placer = Placer(policy)
        placer.observe(jobs, state)
        return [placer.place_and_apply(state, j) for j in jobs]

    for policy in POLICY_NAMES:
        assert run(policy) == run(policy)

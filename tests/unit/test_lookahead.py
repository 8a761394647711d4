"""FGD with look-ahead (``fgd-lookahead``): it leaves the snapshot as it found it, it avoids
the greedy choice that strands capacity the next job needs, and the server's cycle uses it
with the queue as the look-ahead."""

from gpupool.model import Job, SharingMode, job, parse_request
from gpupool.scheduler import ClusterState, Placement, Placer
from gpupool.scheduler.cycle import CycleConfig, run_cycle
from gpupool.scheduler.fragmentation import ShapeMix
from gpupool.scheduler.tenants import Quota, Tenant, TenantTree
from tests.support.builders import node

# a mix whose FGD puts a half-card share on the only node with two cards
MIX = [("gpu_share=0.7", 200), ("gpu_share=0.5", 500), ("gpu=1", 300)]


def _nodes():
    return [
        node("n0", cards=2, cpu=64, mode=SharingMode.SHARE),
        node("n1", cards=1, cpu=64, mode=SharingMode.SHARE),
        node("n2", cards=1, cpu=64, mode=SharingMode.SHARE),
    ]


def _placers(state, policy):
    workload = ShapeMix()
    placer = Placer(policy, workload)
    for spec, n in MIX:
        workload.observe(placer.ask(state, job("t", spec).request), weight=n)
    return placer


def test_look_ahead_leaves_the_snapshot_as_it_was():
    state = ClusterState([node(f"n{i}", cards=4, cpu=32, mode=SharingMode.SHARE) for i in range(3)])
    ahead = _placers(state, "fgd-lookahead")
    before = (state.compute_free.copy(), state.cpu_free.copy(), dict(state.placements))
    upcoming = [job("u", s).request for s in ("gpu_share=0.5", "gpu=2", "gpu=1")]
    result = ahead.place(state, job("a", "gpu_share=0.5"), upcoming=upcoming)
    assert isinstance(result, Placement)
    assert (state.compute_free == before[0]).all() and (state.cpu_free == before[1]).all()
    assert state.placements == before[2]


def test_look_ahead_keeps_the_only_two_card_node_for_the_next_job():
    state = ClusterState(_nodes())
    share, two = job("a", "gpu_share=0.5"), job("b", "gpu=2")
    greedy = _placers(state, "fgd").place(state, share)
    assert isinstance(greedy, Placement) and greedy.node_names == ("n0",)
    ahead = _placers(state, "fgd-lookahead")
    assert ahead.place(state, share).node_names == ("n0",)  # no queue to read: plain FGD
    chosen = ahead.place(state, share, upcoming=[two.request])
    assert isinstance(chosen, Placement) and chosen.node_names != ("n0",)
    state.apply(chosen)
    assert isinstance(ahead.place(state, two), Placement)


def test_the_cycle_reads_its_queue_as_the_look_ahead():
    tree = TenantTree([Tenant("company"), Tenant("team", "company", {"gpu": Quota.cards(4)})])
    queue = [
        Job("a", parse_request("gpu_share=0.5"), tenant="team", submit_time=0),
        Job("b", parse_request("gpu=2"), tenant="team", submit_time=1),
    ]
    admitted = {}
    for policy in ("fgd", "fgd-lookahead"):
        state = ClusterState(_nodes())
        result = run_cycle(
            state, [], queue, tree, 10, config=CycleConfig(policy=policy),
            placer=_placers(state, policy),
        )  # fmt: skip
        admitted[policy] = sorted(b.job_id for b in result.bindings)
    assert admitted == {"fgd": ["a"], "fgd-lookahead": ["a", "b"]}

"""FGD with look-ahead: it leaves the snapshot as it found it, and it avoids the greedy choice
that strands capacity the next arrival needs."""

from gpupool.model import SharingMode, job
from gpupool.scheduler import ClusterState, Placement, Placer
from gpupool.scheduler.fragmentation import FragmentationModel, Workload
from gpupool.sim.lookahead import LookAhead
from tests.helpers import node


def _setup(nodes, typical_specs):
    state = ClusterState(nodes)
    workload = Workload()
    fgd = Placer("fgd", workload)
    for spec, n in typical_specs:
        workload.observe(fgd.ask(state, job("t", spec).request), weight=n)
    shapes, weights = workload.typical()
    measure = FragmentationModel(state, shapes, weights, group=False)
    return state, fgd, LookAhead(fgd, [Placer("best-fit", workload)], measure)


def test_look_ahead_leaves_the_snapshot_as_it_was():
    nodes = [node(f"n{i}", cards=4, cpu=32, mode=SharingMode.SHARE) for i in range(3)]
    state, _, ahead = _setup(nodes, [("gpu_share=0.5", 3), ("gpu=2", 1)])
    before = (state.compute_free.copy(), state.cpu_free.copy(), dict(state.placements))
    upcoming = [(job("u", s).request, 500) for s in ("gpu_share=0.5", "gpu=2", "gpu=1")]
    result = ahead.place(state, job("a", "gpu_share=0.5"), upcoming)
    assert isinstance(result, Placement)
    assert (state.compute_free == before[0]).all() and (state.cpu_free == before[1]).all()
    assert state.placements == before[2]


def test_look_ahead_keeps_the_only_two_card_node_for_the_next_pod():
    """Three shared nodes: n0 with two cards, n1 and n2 with one. Greedy FGD puts a half-card
    share on n0; the next arrival needs two cards on one node, which only n0 has. Looking one
    arrival ahead, the share goes elsewhere and the two-card pod fits."""
    nodes = [
        node("n0", cards=2, cpu=64, mode=SharingMode.SHARE),
        node("n1", cards=1, cpu=64, mode=SharingMode.SHARE),
        node("n2", cards=1, cpu=64, mode=SharingMode.SHARE),
    ]
    mix = [("gpu_share=0.7", 2), ("gpu_share=0.5", 5), ("gpu=1", 3)]
    state, fgd, ahead = _setup(nodes, mix)
    share = job("a", "gpu_share=0.5")
    greedy = fgd.place(state, share)
    assert isinstance(greedy, Placement) and greedy.node_names == ("n0",)
    chosen = ahead.place(state, share, [(job("b", "gpu=2").request, 2000)])
    assert isinstance(chosen, Placement) and chosen.node_names != ("n0",)
    state.apply(chosen)
    assert isinstance(fgd.place(state, job("b", "gpu=2")), Placement)

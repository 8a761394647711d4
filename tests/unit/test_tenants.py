import pytest

from gpupool.model import Job, Node, SpecError, make_devices, parse_request
from gpupool.scheduler import ClusterState
from gpupool.scheduler.cycle import MIG_PERCENT, run_cycle
from gpupool.scheduler.tenants import Quota, Tenant, TenantTree
from gpupool.sharing import PoolSharing


def nodes(count: int = 2, cards: int = 8) -> list[Node]:
    return [
        Node(f"n{i}", 128000, 1 << 20, make_devices("A100-80G", cards, node=f"n{i}"))
        for i in range(count)
    ]


def test_tree_validation():
    with pytest.raises(SpecError, match="unknown parent 'nowhere'"):
        TenantTree([Tenant("a", "nowhere")])
    with pytest.raises(SpecError, match="parent cycle"):
        TenantTree([Tenant("a", "b"), Tenant("b", "a")])
    with pytest.raises(SpecError, match="defined twice"):
        TenantTree([Tenant("a"), Tenant("a")])
    with pytest.raises(SpecError, match="must not be negative"):
        Quota(nominal=-1)


def test_a_parent_quota_caps_its_subtree():
    tree = TenantTree(
        [
            Tenant("company"),
            Tenant("org", "company", {"gpu": Quota.cards(6, borrowing=0)}),
            Tenant("p1", "org", {"gpu": Quota.cards(4)}),
            Tenant("p2", "org", {"gpu": Quota.cards(4)}),
        ]
    )
    jobs = [
        Job(f"{t}-{i}", parse_request("gpu=1"), tenant=t) for t in ("p1", "p2") for i in range(4)
    ]
    result = run_cycle(ClusterState(nodes()), [], jobs, tree, 0)
    assert result.admitted == 6
    assert str(result.pending["p2-2"]) == "quota: org gpu 6/6 for its subtree"


def test_borrowers_share_idle_capacity_fairly():
    tree = TenantTree(
        [
            Tenant("company"),
            Tenant("owner", "company", {"gpu": Quota.cards(8)}),
            Tenant("a", "company", {"gpu": Quota.cards(0)}),
            Tenant("b", "company", {"gpu": Quota.cards(0)}),
        ]
    )
    jobs = [Job(f"a{i}", parse_request("gpu=1"), tenant="a", submit_time=i) for i in range(8)]
    jobs += [Job(f"b{i}", parse_request("gpu=1"), tenant="b", submit_time=10 + i) for i in range(8)]
    result = run_cycle(ClusterState(nodes(1)), [], jobs, tree, 100)
    got = [b.job_id[0] for b in result.bindings]
    assert got.count("a") == 4 and got.count("b") == 4  # DRF alternates, not first-come


def test_mig_and_shares_draw_card_percent_from_one_quota():
    assert MIG_PERCENT["3g.40gb"] == 43 and MIG_PERCENT["1g.10gb"] == 14
    tree = TenantTree([Tenant("t", None, {"gpu": Quota.cards(1)})])
    hybrid = [PoolSharing("hybrid", mig_per_node=1).apply(n) for n in nodes(1, 2)]
    jobs = [
        Job("mig", parse_request("mig=3g.40gb"), tenant="t"),
        Job("half", parse_request("gpu_share=0.5"), tenant="t"),
        Job("more", parse_request("gpu_share=0.1"), tenant="t"),
    ]
    result = run_cycle(ClusterState(hybrid), [], jobs, tree, 0)
    assert sorted(b.job_id for b in result.bindings) == ["half", "mig"]
    assert str(result.pending["more"]).startswith("quota: t gpu 0.93/1 guaranteed")

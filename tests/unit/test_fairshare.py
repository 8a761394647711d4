"""Fair share over time (issue 64), pure: the decay formula and the Fair Tree's order with
values computed by hand, and what a cycle does with them (who borrows next, the order within
a priority class)."""

import math

import pytest

from gpupool.model import Job, Node, make_devices, parse_request
from gpupool.scheduler import ClusterState
from gpupool.scheduler.cycle import run_cycle
from gpupool.scheduler.fairshare import (
    FairShare,
    UsageHistory,
    decay,
    decayed_card_hours,
    mean_life_h,
)
from gpupool.scheduler.tenants import Quota, Tenant, TenantTree

H = 3600.0  # one hour


def test_usage_halves_every_half_life():
    assert decay(8.0, 2 * H, H) == 2.0
    assert decay(8.0, 0.0, H) == 8.0
    assert decay(8.0, 10 * H, math.inf) == 8.0  # no half-life: no decay


def test_a_record_counts_its_card_hours_aged_second_by_second():
    now = 100 * H
    # one card over the hour that ended an hour ago, half-life one hour:
    # 1 x (1 h / ln 2) x (2^-1 - 2^-2) = 0.25 / ln 2 = 0.360674 card-hours
    got = decayed_card_hours(3600, now - 2 * H, now - H, now, H)
    assert got == pytest.approx(0.25 / math.log(2)) and got == pytest.approx(0.360674, abs=1e-6)
    # two cards over the last hour: 2 x (1 / ln 2) x (1 - 1/2) = 1 / ln 2 = 1.442695
    assert decayed_card_hours(7200, now - H, now, now, H) == pytest.approx(1.442695, abs=1e-6)
    # without decay, plain card-hours; a record of no length counts at its age
    assert decayed_card_hours(7200, now - H, now, now, math.inf) == 2.0
    assert decayed_card_hours(7200, now - H, now - H, now, H) == pytest.approx(1.0)
    # what is held on counts one mean life: H / ln 2 hours
    assert mean_life_h(H * math.log(2)) == pytest.approx(1.0)


def _tree(*tenants: Tenant) -> TenantTree:
    return TenantTree(tenants)


def test_fair_tree_ranks_by_usage_per_share_with_slurm_columns():
    tree = _tree(
        Tenant("org"), Tenant("a", "org", weight=2), Tenant("b", "org"), Tenant("c", "org")
    )
    history = UsageHistory(7 * 86400, borrowed={"a": 40.0, "b": 10.0, "c": 30.0})
    fs = FairShare(tree, history, present={})
    # usage per weight: a 40/2 = 20, b 10, c 30 -> b, a, c; org (no siblings) first
    rows = {r.tenant: r for r in fs.rows()}
    assert [r.tenant for r in fs.rows()] == ["org", "b", "a", "c"]
    assert {t: r.fairshare for t, r in rows.items()} == {
        "org": 1.0,
        "b": 0.75,
        "a": 0.5,
        "c": 0.25,
    }  # (n - ranked before) / n, n = 4
    assert rows["a"].norm_shares == 0.5 and rows["a"].norm_usage == 0.5
    assert rows["a"].level_fs == pytest.approx(1.0)
    assert rows["b"].level_fs == pytest.approx(0.25 / 0.125)  # 2.0: used half its share
    assert rows["c"].level_fs == pytest.approx(0.25 / 0.375)  # 0.667
    assert rows["org"].raw_usage == 80.0 and rows["org"].level_fs == 1.0  # its own level


def test_nobody_has_borrowed_every_factor_is_one():
    tree = _tree(Tenant("org"), Tenant("a", "org"), Tenant("b", "org", weight=3))
    fs = FairShare(tree, UsageHistory(H), present={})
    assert fs.factors() == {"org": 1.0, "a": 1.0, "b": 1.0}
    assert all(math.isinf(r.level_fs) for r in fs.rows())


def test_the_tree_is_walked_depth_first_a_subtree_before_its_next_sibling():
    # org1 used 10 (all p's), org2 6: org2 first; inside org1 q (0) before p (10)
    tree = _tree(
        Tenant("top"),
        Tenant("org1", "top"),
        Tenant("org2", "top"),
        Tenant("p", "org1"),
        Tenant("q", "org1"),
        Tenant("r", "org2"),
    )
    fs = FairShare(tree, UsageHistory(H, borrowed={"p": 10.0, "r": 6.0}), present={})
    assert [r.tenant for r in fs.rows()] == ["top", "org2", "r", "org1", "q", "p"]
    f = fs.factors()
    assert f["r"] > f["q"] > f["p"]  # q used nothing, but its organisation used more


def test_present_borrowing_counts_one_mean_life():
    tree = _tree(Tenant("org"), Tenant("a", "org"), Tenant("b", "org"))
    half_life = 2 * H * math.log(2)  # mean life two hours
    fs = FairShare(tree, UsageHistory(half_life, borrowed={"a": 1.0}), present={"b": 1.0})
    rows = {r.tenant: r for r in fs.rows()}
    assert rows["a"].raw_usage == pytest.approx(1.0)
    assert rows["b"].raw_usage == pytest.approx(2.0)  # one card x two hours
    assert [r.tenant for r in fs.rows()][1:] == ["a", "b"]


NODE = Node("n1", 64000, 512 * 1024, make_devices("A100-80G", 4, node="n1"))


def _borrowers() -> TenantTree:
    """``lender`` owns the 4 idle cards; a, b, c have no guarantee and borrow them."""
    return _tree(
        Tenant("org"),
        Tenant("lender", "org", {"gpu": Quota.cards(4)}),
        *(Tenant(t, "org", {"gpu": Quota.cards(0)}) for t in "abc"),
    )


def _jobs() -> list[Job]:
    return [
        Job(f"{t}{i}", parse_request("gpu=1"), tenant=t, submit_time=i)
        for t in "abc"
        for i in range(3)
    ]


def test_borrowers_follow_their_past_usage_not_only_their_present_share():
    # mean life one hour: a borrowed card counts 1 card-hour at once
    history = UsageHistory(H * math.log(2), borrowed={"b": 5.0, "c": 10.0})
    result = run_cycle(ClusterState([NODE]), [], _jobs(), _borrowers(), 0.0, history=history)
    # a (0 -> 1 -> 2 -> 3) has used least until its queue is empty, then b (5) before c (10)
    assert [b.job_id for b in result.bindings] == ["a0", "a1", "a2", "b0"]
    # without a history, today's rule: the smallest present dominant share, a, b, c, a
    today = run_cycle(ClusterState([NODE]), [], _jobs(), _borrowers(), 0.0)
    assert [b.job_id for b in today.bindings] == ["a0", "b0", "c0", "a1"]


def test_what_a_tenant_borrows_in_the_cycle_counts_at_once():
    # mean life four hours: a's first card makes it 4, still below b's 5; its second 8
    history = UsageHistory(4 * H * math.log(2), borrowed={"b": 5.0, "c": 10.0})
    result = run_cycle(ClusterState([NODE]), [], _jobs(), _borrowers(), 0.0, history=history)
    assert [b.job_id for b in result.bindings] == ["a0", "a1", "b0", "a2"]  # 0, 4, 5, 8


def test_within_a_class_the_less_served_tenant_goes_first_never_across_classes():
    tree = _tree(
        Tenant("org"),
        Tenant("x", "org", {"gpu": Quota.cards(2)}),
        Tenant("y", "org", {"gpu": Quota.cards(2)}),
    )
    one = Node("n1", 64000, 512 * 1024, make_devices("A100-80G", 1, node="n1"))
    jobs = [
        Job("x1", parse_request("gpu=1"), tenant="x", submit_time=0.0),
        Job("y1", parse_request("gpu=1"), tenant="y", submit_time=1.0),
    ]
    history = UsageHistory(H, borrowed={"x": 50.0})  # x borrowed a lot; y nothing
    fair = run_cycle(ClusterState([one]), [], jobs, tree, 10.0, history=history)
    assert [b.job_id for b in fair.bindings] == ["y1"]  # y's factor 1, x's 1/3
    plain = run_cycle(ClusterState([one]), [], jobs, tree, 10.0)
    assert [b.job_id for b in plain.bindings] == ["x1"]  # first come
    higher = [
        Job("x1", parse_request("gpu=1"), tenant="x", priority_class="online-inference"),
        Job("y1", parse_request("gpu=1"), tenant="y", priority_class="training"),
    ]
    classes = run_cycle(ClusterState([one]), [], higher, tree, 10.0, history=history)
    assert [b.job_id for b in classes.bindings] == ["x1"]  # the class first, whatever usage

import pytest

from gpupool.model import Node, SharingMode, SpecError, make_devices
from gpupool.sharing import PoolSharing, SharePolicy


def test_hybrid_partitions_the_first_cards_and_shares_the_rest():
    base = Node("n", 64000, 524288, make_devices("A100-80G", 4, node="n"))
    modes = [d.mode for d in PoolSharing("hybrid", mig_per_node=1).apply(base).devices]
    assert modes == [SharingMode.MIG, SharingMode.SHARE, SharingMode.SHARE, SharingMode.SHARE]


def test_cards_without_mig_are_shared_in_hybrid_and_whole_in_mig_pools():
    t4 = Node("t", 16000, 65536, make_devices("T4", 2, node="t"))
    assert {d.mode for d in PoolSharing("hybrid", 2).apply(t4).devices} == {SharingMode.SHARE}
    assert {d.mode for d in PoolSharing("mig").apply(t4).devices} == {SharingMode.WHOLE}


def test_share_policy_keeps_headroom():
    policy = SharePolicy(headroom_pct=15, max_sharers=4)
    assert policy.usable_mib(81920) == 69632
    assert policy.proportional_mib(81920, 50) == 34816


@pytest.mark.parametrize(
    ("build", "needle"),
    [
        (lambda: PoolSharing("slices"), "not one of whole|mig|share|hybrid"),
        (lambda: SharePolicy(headroom_pct=100), "headroom_pct"),
        (lambda: SharePolicy(max_sharers=0), "max_sharers"),
        (lambda: make_devices("T4", 1, mode=SharingMode.MIG), "does not support MIG"),
        (lambda: make_devices("Z9000", 1), "not in the catalog"),
        (lambda: Node("", 1, 1), "name must not be empty"),
    ],
)
def test_bad_configuration_is_refused_clearly(build, needle):
    with pytest.raises(SpecError, match=needle):
        build()

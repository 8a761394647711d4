import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpupool.model import SpecError
from gpupool.sharing import free_starts, place, plan_repartition, table_for
from gpupool.sharing.mig import MEDIA_BIT
from gpupool.sharing.mig import MIG_TABLES as TABLES

# "Number of Instances Available" per profile, NVIDIA MIG user guide, Supported MIG Profiles.
INSTANCES = {
    "A100-40G": {"1g.5gb": 7, "1g.10gb": 4, "2g.10gb": 3, "3g.20gb": 2, "4g.20gb": 1, "7g.40gb": 1},
    "A100-80G": {
        "1g.10gb": 7,
        "1g.20gb": 4,
        "2g.20gb": 3,
        "3g.40gb": 2,
        "4g.40gb": 1,
        "7g.80gb": 1,
    },
    "H100-80G": {
        "1g.10gb": 7,
        "1g.20gb": 4,
        "2g.20gb": 3,
        "3g.40gb": 2,
        "4g.40gb": 1,
        "7g.80gb": 1,
    },
    "H200-141G": {
        "1g.18gb": 7,
        "1g.35gb": 4,
        "2g.35gb": 3,
        "3g.71gb": 2,
        "4g.71gb": 1,
        "7g.141gb": 1,
    },
    "A30-24G": {"1g.6gb": 4, "2g.12gb": 2, "4g.24gb": 1},
}


@pytest.mark.parametrize("model", sorted(INSTANCES))
def test_instance_counts_match_the_mig_user_guide(model):
    table = table_for(model)
    assert table is not None
    for profile, expected in INSTANCES[model].items():
        occupied, count = 0, 0
        while True:
            try:
                _, occupied = place(table, occupied, profile)
            except SpecError:
                break
            count += 1
        assert count == expected, (model, profile)


def test_full_gpu_profiles_take_every_position():
    for model, name in (("A100-80G", "7g.80gb"), ("H100-80G", "7g.80gb"), ("A30-24G", "4g.24gb")):
        table = table_for(model)
        assert table is not None and table.profile(name).size == table.positions


def test_profile_memory_grows_with_size():
    for table in TABLES.values():
        full = table.profiles[-1]
        assert full.size == table.positions
        for p in table.profiles:
            assert 0 < p.memory_mib <= full.memory_mib


def test_plan_mixed_layouts():
    layout = plan_repartition("A100-80G", {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2})
    assert sorted(name for name, _ in layout) == ["1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"]
    assert plan_repartition("A100-80G", {"4g.40gb": 1, "3g.40gb": 1}) == [
        ("4g.40gb", 0),
        ("3g.40gb", 4),
    ]
    assert len(plan_repartition("H100-80G", {"1g.10gb": 7})) == 7


def test_plan_keeps_running_instances_in_place():
    layout = plan_repartition("A100-80G", {"1g.10gb": 3}, keep=(("3g.40gb", 0),))
    assert ("3g.40gb", 0) in layout
    assert all(start >= 4 for name, start in layout if name == "1g.10gb")


@pytest.mark.parametrize(
    ("wanted", "needle"),
    [
        ({"3g.40gb": 2, "1g.10gb": 1}, "no legal layout"),  # 3g+3g fills all 8 positions
        ({"7g.80gb": 1, "1g.10gb": 1}, "more than 7 slices"),
        ({"4g.40gb": 2}, "more than 7 slices"),
        ({"1g.20gb": 4, "1g.10gb": 1}, "no legal layout"),  # 4x1g.20gb take all 8 positions
        ({"1g.10gb+me": 2}, "at most one +me"),
        ({"5g.50gb": 1}, "has no profile '5g.50gb'"),
    ],
)
def test_impossible_layouts_are_refused_with_a_reason(wanted, needle):
    with pytest.raises(SpecError, match=needle.replace("+", r"\+")):
        plan_repartition("A100-80G", wanted)


@pytest.mark.parametrize("model", ["A100-40G", "A100-80G", "H100-80G", "H200-141G"])
def test_me_profiles_take_the_media_engines_once_per_gpu(model):
    table = TABLES[model]
    me = next(p for p in table.profiles if p.media)
    plain = next(p for p in table.profiles if p.compute_slices == 1 and not p.media)
    _, occupied = place(table, 0, me.name)
    assert free_starts(occupied, me) == []  # the second +me has nowhere to go
    assert len(free_starts(occupied, plain)) == len(plain.starts) - 1  # plain 1g still fit
    occupied = place(table, occupied, plain.name)[1]
    with pytest.raises(SpecError, match="no free legal start"):
        place(table, occupied, me.name)


def test_model_without_mig_is_refused():
    assert table_for("T4") is None
    with pytest.raises(SpecError, match="does not support MIG"):
        plan_repartition("T4", {"1g.10gb": 1})


@given(
    st.sampled_from(sorted(TABLES)),
    st.lists(st.integers(0, 6), min_size=1, max_size=12),
)
def test_sequential_placement_is_always_legal_and_never_overlaps(model, picks):
    table = TABLES[model]
    occupied = 0
    instances: list[tuple[int, int]] = []
    for pick in picks:
        profile = table.profiles[pick % len(table.profiles)]
        before = free_starts(occupied, profile)
        try:
            start, occupied = place(table, occupied, profile.name)
        except SpecError:
            assert before == []  # refused only when no legal free start exists
            continue
        assert start in profile.starts
        mask = profile.mask(start)
        for other_start, other_mask in instances:
            assert not mask & other_mask, (start, other_start)
        instances.append((start, mask))
        assert occupied & ~MEDIA_BIT < (1 << table.positions)
    media = [s for s, m in instances if m & MEDIA_BIT]
    assert len(media) <= 1  # one +me instance a GPU: it holds the media engines

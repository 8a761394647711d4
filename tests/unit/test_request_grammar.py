import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpupool.model import (
    SliceKind,
    SpecError,
    Topology,
    Vendor,
    parse_cpu_millis,
    parse_memory_mib,
    parse_request,
    request_from_mapping,
)


def test_whole_cards_with_model_cpu_and_memory():
    r = parse_request("gpu=A100-80G:2,cpu=4,mem=32GiB")
    assert (r.kind, r.gpu, r.gpu_model, r.cpu_millis, r.mem_mib) == (
        SliceKind.WHOLE,
        2,
        "A100-80G",
        4000,
        32768,
    )


def test_seed_example_20gb_gpu_memory_and_4_cpus_is_a_memory_share():
    r = parse_request("gpu_mem=20GiB,cpu=4")
    assert r.kind is SliceKind.SHARE and r.memory_only
    assert (r.gpu, r.gpu_mem_mib, r.gpu_share_pct, r.cpu_millis) == (1, 20480, None, 4000)


def test_fractional_share_with_memory():
    r = parse_request("gpu_share=0.5,gpu_mem=10GiB")
    assert (r.kind, r.gpu_share_pct, r.gpu_mem_mib) == (SliceKind.SHARE, 50, 10240)
    assert parse_request("gpu_share=25%").gpu_share_pct == 25


def test_mig_profile_and_count():
    assert parse_request("mig=3g.40gb").kind is SliceKind.MIG
    r = parse_request("mig=1g.10gb:3")
    assert (r.mig_profile, r.gpu) == ("1g.10gb", 3)


def test_topology_and_vendor():
    r = parse_request("gpu=8,topology=nvlink")
    assert (r.gpu, r.topology) == (8, Topology.NVLINK)
    v = parse_request("vendor=ascend")
    assert (v.kind, v.gpu, v.vendor) == (SliceKind.WHOLE, 1, Vendor.ASCEND)


def test_model_names_are_normalised():
    assert parse_request("gpu=a100_80gb:1").gpu_model == "A100-80G"
    assert parse_request("gpu=H200-141GB").gpu_model == "H200-141G"
    assert parse_request("gpu=T4").gpu == 1


def test_whole_card_with_minimum_memory():
    r = parse_request("gpu=2,gpu_mem=40GiB")
    assert (r.kind, r.gpu, r.gpu_mem_mib) == (SliceKind.WHOLE, 2, 40960)


def test_cpu_only():
    r = parse_request("cpu=500m,mem=1Gi")
    assert (r.kind, r.cpu_millis, r.mem_mib, r.gpu_count) == (SliceKind.NONE, 500, 1024, 0)


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("gpu=two", "'two' is neither a count nor a model name"),
        ("foo=1", "unknown key 'foo'"),
        ("gpu=1,,cpu=2", "empty item at position 2"),
        ("mem=3parsecs", "unknown unit 'parsecs'"),
        ("gpu_share=1.5", "at most 1 (100%)"),
        ("gpu_share=0.001", "finer than 1%"),
        ("mig=3g", "is not a MIG profile"),
        ("mig=3g.40gb,gpu_share=0.5", "cannot be combined"),
        ("gpu=A100-80G:1,vendor=ascend", "made by nvidia, not ascend"),
        ("gpu", "is not key=value"),
        ("cpu=1,cpu=2", "'cpu' given twice"),
        ("topology=ring,gpu=2", "'ring' is not one of nvlink|node|any"),
        ("gpu=A100:x", "has count 'x'"),
        ("gpu=99999", "out of range"),
        ("gpu_share=0.5,topology=nvlink", "only applies to whole-card"),
        ("cpu=-1", "is negative"),
        ("", "empty spec"),
    ],
)
def test_bad_specs_name_the_token_and_what_was_expected(spec, needle):
    with pytest.raises(SpecError) as err:
        parse_request(spec)
    assert needle in str(err.value)


def test_structured_input_uses_the_same_keys():
    r = request_from_mapping({"gpu": "A100-80G:2", "cpu": 4, "mem": "32GiB"})
    assert r == parse_request("gpu=A100-80G:2,cpu=4,mem=32GiB")
    assert request_from_mapping({"gpu": 2}).gpu == 2
    with pytest.raises(SpecError, match="unknown key 'gpus'"):
        request_from_mapping({"gpus": 2})
    with pytest.raises(SpecError, match="is not a count"):
        request_from_mapping({"gpu": [1, 2]})


def test_units():
    assert parse_memory_mib("20GB") == 19074  # decimal GB, rounded up to whole MiB
    assert parse_memory_mib("1.5GiB") == 1536
    assert parse_memory_mib(512) == 512
    assert parse_cpu_millis("0.25") == 250
    with pytest.raises(SpecError, match="finer than one millicore"):
        parse_cpu_millis("0.0001")


_models = st.sampled_from(["A100-80G", "H100-80G", "T4", "RTX4090", "Ascend910B", None])
_requests = st.one_of(
    st.builds(
        lambda n, m, c, mem: f"gpu={m + ':' if m else ''}{n},cpu={c}m,mem={mem}MiB",
        st.integers(1, 16),
        _models,
        st.integers(0, 64000),
        st.integers(0, 10**6),
    ),
    st.builds(
        lambda s, g: f"gpu_share={s}%,gpu_mem={g}MiB",
        st.integers(1, 100),
        st.integers(1, 80000),
    ),
    st.builds(lambda g: f"gpu_mem={g}MiB,cpu=2", st.integers(1, 80000)),
    st.builds(
        lambda p, n: f"mig={p}:{n}",
        st.sampled_from(["1g.10gb", "3g.40gb", "2g.35gb", "1g.5gb+me"]),
        st.integers(1, 7),
    ),
)


@given(_requests)
def test_canonical_form_round_trips(spec):
    r = parse_request(spec)
    assert parse_request(r.to_spec()) == r

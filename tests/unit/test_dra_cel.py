"""DRA selectors beyond equality: the CEL subset gpupool evaluates as Kubernetes does, and
claims of NVIDIA's DRA classes read as aliases of gpupool's (pure; issue 63)."""

import pytest

from gpupool.kube.dra.cel import CelError, Device, Names, Quantity, Unsupported, compile_selector
from gpupool.kube.dra.claims import claim_ask
from gpupool.kube.quantity import quantity
from gpupool.model import SpecError

D = "driver.example.com"
GPU = Device(
    D,
    {D: Names({"type": "gpu", "model": "LATEST-GPU-MODEL", "count": 4, "nvlink": True},
              {"uuid": "per card"})},
    {D: Names({"memory": Quantity(quantity("64Gi", "m"))}, what="capacity")},
)  # fmt: skip


def ev(text: str) -> bool:
    return compile_selector(text).matches(GPU)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        # the Kubernetes docs' ResourceClaimTemplate selector
        (f'device.attributes["{D}"].type == "gpu" && '
         f'device.capacity["{D}"].memory == quantity("64Gi")', True),
        (f'device.capacity["{D}"].memory.compareTo(quantity("40Gi")) >= 0', True),
        (f'device.capacity["{D}"].memory.compareTo(quantity("80Gi")) >= 0', False),
        (f'device.capacity["{D}"].memory.compareTo(quantity("64Gi")) == 0', True),
        (f'device.capacity["{D}"].memory.compareTo(quantity("68719476736")) == 0', True),
        (f'device.capacity["{D}"].memory.compareTo(quantity("68.719476736G")) == 0', True),
        (f'device.capacity["{D}"].memory.compareTo(quantity("0.0625Ti")) == 0', True),
        (f'device.capacity["{D}"].memory.isGreaterThan(quantity("64G"))', True),  # 64Gi > 64G
        (f'device.capacity["{D}"].memory.isLessThan(quantity("1Pi"))', True),
        ('quantity("1k").compareTo(quantity("1e3")) == 0', True),
        ('quantity("500m").compareTo(quantity("1")) < 0', True),
        ('quantity("1Ei").compareTo(quantity("1E")) > 0', True),
        ('quantity("1n").compareTo(quantity("1u")) < 0', True),
        ('quantity("1Mi").compareTo(quantity("1M")) == 1', True),
        (f"device.attributes['{D}'].model.matches('^LATEST')", True),
        (f"device.attributes['{D}'].model.lowerAscii().matches('^.*gpu.*$')", True),
        (f"device.attributes['{D}'].model.matches('^GPU')", False),
        (f'device.attributes["{D}"].model in ["A", "LATEST-GPU-MODEL"]', True),
        (f'device.attributes["{D}"].count in [1, 2]', False),
        (f'device.attributes["{D}"]["count"] >= 4 && device.attributes["{D}"].count < 5', True),
        (f'!(device.attributes["{D}"].type == "nic") || false', True),
        (f'device.driver == "{D}" && (device.attributes["{D}"].nvlink || false)', True),
        (f'device.driver != "{D}"', False),
        (f'"type" in device.attributes["{D}"] && !("color" in device.attributes["{D}"])', True),
        (f'has(device.attributes["{D}"].type)', True),
        (f'device.attributes["{D}"].model.startsWith("LATEST") && '
         f'device.attributes["{D}"].model.endsWith("MODEL")', True),
        ('semver("9.0.0").compareTo(semver("8.9.0")) > 0', True),
        # CEL's commutative && / ||: the other side decides past an error
        (f'device.attributes["{D}"].missing == "x" && false', False),
        (f'true || device.attributes["{D}"].missing == "x"', True),
        ('device.attributes["other.example.com"].type == "gpu" && false', False),
    ],
)  # fmt: skip
def test_selectors_as_the_kubernetes_docs_write_them(text, want):
    assert ev(text) is want


@pytest.mark.parametrize(
    ("text", "error", "words"),
    [
        (f'device.attributes["{D}"].missing == "x"', CelError, "no such key"),
        (f'device.attributes["{D}"].missing == "x" && true', CelError, "no such key"),
        (f'device.capacity["{D}"].memory > quantity("1Gi")', CelError, "use compareTo"),
        (f'device.attributes["{D}"].count + 1 == 5', Unsupported, "arithmetic"),
        (f'device.attributes["{D}"].count == 4 ? true : false', Unsupported, "conditional"),
        ("[1, 2].exists(x, x == 1)", Unsupported, "exists"),
        (f'cel.bind(c, device.capacity["{D}"], true)', Unsupported, "cel.bind"),
        (f'device.attributes["{D}"].uuid == "GPU-1"', Unsupported, "uuid"),
        (f'device.attributes["{D}"].model.matches("(A+)+$")', Unsupported, "repeat inside"),
        (f'device.attributes["{D}"].model.matches("(A)\\\\1")', Unsupported, "GROUPREF"),
        (f'device.attributes["{D}"].model.matches("(?=L)")', Unsupported, "ASSERT"),
        (f'device.attributes["{D}"].model.matches("{"a" * 300}")', Unsupported, "256"),
        (f'device.attributes["{D}"].model.matches("(")', CelError, "regular expression"),
        ('quantity("12Mo").compareTo(quantity("1")) == 0', CelError, "not a Kubernetes quantity"),
        (f'device.attributes["{D}"].model', CelError, "not a bool"),
        (f'device.attributes["{D}"].model ==', CelError, "syntax error"),
        ("1.5 == 1.5", Unsupported, "1.5"),
    ],
)
def test_what_gpupool_does_not_evaluate_or_kubernetes_fails_on_is_said(text, error, words):
    with pytest.raises(error, match=words):
        ev(text)


def claim(klass: str, *cels: str, count: int = 1, **more) -> dict:
    exactly: dict = {"deviceClassName": klass, "count": count, **more}
    if cels:
        exactly["selectors"] = [{"cel": {"expression": c}} for c in cels]
    return {
        "metadata": {"namespace": "team-a", "name": "c", "uid": "claim-c"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
    }


OURS = 'device.attributes["gpu.gpupool.io"]'
NV = "device.attributes['gpu.nvidia.com']"
CAP = 'device.capacity["gpu.gpupool.io"]'
NVCAP = 'device.capacity["gpu.nvidia.com"]'


@pytest.mark.parametrize(
    ("c", "spec"),
    [
        (claim("gpu.gpupool.io", f'{CAP}.memory.compareTo(quantity("80Gi")) >= 0'),
         "gpu=A100-80G|H100-80G|H200-141G:1"),
        (claim("gpu.gpupool.io", f'{OURS}.model in ["T4", "A10"]', count=2), "gpu=A10|T4:2"),
        (claim("gpu.gpupool.io", f'{OURS}.model.matches("^V100")'),
         "gpu=V100S|V100-32G|V100-16G:1"),
        (claim("gpu.gpupool.io", f'!({OURS}.vendor == "nvidia")',
               f'{OURS}.model.startsWith("Ascend")'),
         "gpu=Ascend910B|Ascend910B-B2|Ascend910B-B3|Ascend910B-B4|Ascend310P:1"),
        (claim("gpu.gpupool.io", 'device.driver == "gpu.gpupool.io"'), "gpu=1"),
        (claim("mig.gpupool.io", f'{OURS}.profile == "1g.10gb"'), "mig=1g.10gb:1"),
        # NVIDIA's classes and names, as its DRA driver's examples write them
        (claim("gpu.nvidia.com"), "gpu=1,vendor=nvidia"),
        (claim("gpu.nvidia.com", f"{NV}.productName.lowerAscii().matches('^.*h100.*$')"),
         "gpu=H100-80G:1"),
        (claim("gpu.nvidia.com", f'{NVCAP}.memory.isGreaterThan(quantity("40Gi"))'),
         "gpu=A100-80G|H100-80G|H200-141G|L40S:1"),
        (claim("gpu.nvidia.com", f'{NV}.architecture == "Hopper"', count=8),
         "gpu=H100-80G|H200-141G:8"),
        (claim("gpu.nvidia.com",
               f'{NV}.cudaComputeCapability.compareTo(semver("9.0.0")) >= 0 && '
               f'{NVCAP}.memory.compareTo(quantity("100Gi")) >= 0'),
         "gpu=H200-141G:1"),
        (claim("mig.nvidia.com", f"{NV}.profile == '3g.40gb'"), "mig=3g.40gb:1"),
        (claim("share.gpupool.io", f'{OURS}.model == "A100-80G"',
               capacity={"requests": {"memory": "10Gi"}}),
         "gpu=A100-80G:1,gpu_mem=10240MiB"),
    ],
)  # fmt: skip
def test_claims_with_cel_beyond_equality_and_nvidias_names_read_as_requests(c, spec):
    assert claim_ask(c).spec == spec


@pytest.mark.parametrize(
    ("c", "words"),
    [
        (claim("gpu.nvidia.com", f"{NV}.uuid == 'GPU-0f1e'"), "'uuid' .*card to card"),
        (claim("gpu.nvidia.com", f"{NV}.driverVersion.compareTo(semver('550.0.0')) >= 0"),
         "node to node"),
        (claim("gpu.nvidia.com", 'device.attributes["gpu.gpupool.io"].model == "T4"'),
         "no such key"),  # a device of NVIDIA's class has NVIDIA's names
        (claim("gpu.gpupool.io", f'{OURS}.model == "B200"'), "match no device"),
        (claim("mig.nvidia.com", f"{NV}.profile == '3g.40gb' && {NV}.productName.matches('H100')"),
         "3g.40gb of H100-80G only"),
        (claim("mig.gpupool.io", f'{OURS}.profile == "1g.10gb" && {OURS}.model == "A100-80G"'),
         "1g.10gb of A100-80G only"),  # A100-40G has 1g.10gb too
        (claim("share.gpupool.io",
               f'{CAP}.memory.compareTo(quantity("40Gi")) >= 0'),
         "capacity.requests"),
        (claim("gpu.gpupool.io", f'{OURS}.model.matches("^(T|A)+4$")'), None),  # fine: 1 level
        (claim("gpu.gpupool.io", f'{OURS}.model.matches("^(T+)+4$")'), "repeat inside"),
    ],
)  # fmt: skip
def test_selectors_gpupool_cannot_honour_are_refused_naming_them(c, words):
    if words is None:
        assert claim_ask(c).spec == "gpu=T4:1"
        return
    with pytest.raises(SpecError, match=words):
        claim_ask(c)


def test_an_nvidia_claims_opaque_config_is_refused_not_ignored():
    c = claim("gpu.nvidia.com")
    c["spec"]["devices"]["config"] = [
        {"requests": ["gpu"], "opaque": {"driver": "gpu.nvidia.com", "parameters": {
            "apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
            "sharing": {"strategy": "MPS"}}}}
    ]  # fmt: skip
    with pytest.raises(SpecError, match=r"config for driver gpu\.nvidia\.com"):
        claim_ask(c)


def test_a_cards_memory_is_what_its_node_says_and_a_model_split_by_it_is_refused():
    at_least_16g = claim("gpu.gpupool.io", f'{CAP}.memory.compareTo(quantity("16Gi")) >= 0')
    assert claim_ask(at_least_16g).spec == "gpu=1"  # every model: the catalog's T4 has 16 GiB
    # GPU feature discovery says 15360 MiB for a T4: kube-scheduler would not take it
    spec = claim_ask(at_least_16g, (("T4", 15360),)).spec
    assert spec.startswith("gpu=A100-80G|") and "T4" not in spec
    at_least_80g = claim("gpu.gpupool.io", f'{CAP}.memory.compareTo(quantity("80Gi")) >= 0')
    with pytest.raises(SpecError, match="A100-80G cards of 81920 MiB and not those of 81000"):
        claim_ask(at_least_80g, (("A100-80G", 81000), ("A100-80G", 81920)))


@pytest.mark.parametrize(
    "text",
    ["(" * 4000 + "true" + ")" * 4000, " && ".join(["true"] * 1200), "!" * 5000 + "true"],
)
def test_a_hostile_expression_is_refused_not_a_crash_of_the_scheduling_cycle(text):
    """A tenant's claim is read every cycle: an expression deep enough to exhaust Python's
    stack must be a refusal naming it, never an exception out of the cycle."""
    with pytest.raises(Unsupported, match="nested this deeply"):
        ev(text)
    with pytest.raises(CelError, match="10240 characters"):
        ev("true && " * 1500 + "true")


def test_a_claim_of_nvidias_class_is_placed_and_allocated_from_gpupools_cards():
    from gpupool.kube.config import parse_config
    from gpupool.kube.decide import decide
    from gpupool.kube.grants import GrantKey
    from tests.support.kube_objects import node_obj, pod_obj

    tenants = [{"name": "team-a", "quotas": {"gpu": {"nominal": 8}}}]
    config = parse_config({"namespaces": {"team-a": "team-a"}, "tenants": tenants})
    pod = pod_obj("p", cpu="1", memory="1Gi")
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "c"}]
    d = decide([node_obj("n1", 2)], [pod], config, 0, key=GrantKey.generate(),
               claims={"team-a/c": claim("gpu.nvidia.com", count=2)})  # fmt: skip
    (b,) = d.binds
    results = b.claim.status["allocation"]["devices"]["results"]
    assert sorted(r["device"] for r in results) == ["gpu-0", "gpu-1"]
    assert {r["driver"] for r in results} == {"gpu.gpupool.io"}

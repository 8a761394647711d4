"""ResourceClaims of gpupool's classes read as gpupool requests, placed by the same engine, and
the allocation written from the grant (pure; issue 48)."""

import json

import pytest

from gpupool.kube.config import parse_config
from gpupool.kube.decide import decide
from gpupool.kube.dra.claims import claim_ask, stale
from gpupool.kube.grants import GrantKey
from gpupool.model import SpecError
from tests.support.kube_objects import node_obj, pod_obj

CONFIG = parse_config(
    {
        "namespaces": {"team-a": "team-a"},
        "tenants": [{"name": "team-a", "quotas": {"gpu": {"nominal": 64}}}],
    }
)
KEY = GrantKey.generate()
ATTR = 'device.attributes["gpu.gpupool.io"]'


def claim(name: str, klass: str = "gpu.gpupool.io", count: int = 1, cel: str = "", **more) -> dict:
    exactly: dict = {"deviceClassName": klass, "count": count, **more}
    if cel:
        exactly["selectors"] = [{"cel": {"expression": cel}}]
    return {
        "metadata": {"namespace": "team-a", "name": name, "uid": f"claim-{name}"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
    }


def claiming(name: str, claim_name: str, **kw) -> dict:
    pod = pod_obj(name, **kw)
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim_name}]
    return pod


@pytest.mark.parametrize(
    ("c", "spec"),
    [
        (claim("a", count=2), "gpu=2"),
        (claim("b", cel=f'{ATTR}.model == "A100-80G"'), "gpu=A100-80G:1"),
        (claim("c", "mig.gpupool.io", cel=f'{ATTR}.profile == "3g.40gb"'), "mig=3g.40gb:1"),
        (
            claim(
                "d", "share.gpupool.io", capacity={"requests": {"memory": "20Gi", "compute": "30"}}
            ),
            "gpu=1,gpu_share=30%,gpu_mem=20480MiB",
        ),
        (claim("e", "share.gpupool.io"), "gpu=1,gpu_share=100%"),
        (claim("f", "mig-3g-40gb.gpupool.io"), "mig=3g.40gb:1"),  # a profile's own class
    ],
)
def test_claims_of_gpupools_classes_read_as_requests(c, spec):
    assert claim_ask(c).spec == spec


@pytest.mark.parametrize(
    ("c", "words"),
    [
        (claim("x", "vfio.gpu.nvidia.com"), "is not gpupool's"),
        (  # memory is a capacity, not an attribute: kube-scheduler fails the claim too
            claim("y", cel=f"{ATTR}.memory.compareTo(quantity('40Gi')) >= 0"),
            "no such key: attribute 'memory'",
        ),
        (claim("z", allocationMode="All"), "allocationMode All"),
        (claim("m", "mig.gpupool.io"), "chooses one profile"),
    ],
)
def test_what_a_claim_asks_that_gpupool_cannot_read_is_refused_naming_it(c, words):
    with pytest.raises(SpecError, match=words):
        claim_ask(c)


def test_a_claimed_pod_is_placed_by_the_engine_and_its_claim_allocated_from_the_grant():
    claims = {
        "team-a/two": claim("two", count=2),
        "team-a/mig": claim("mig", "mig.gpupool.io", cel=f'{ATTR}.profile == "3g.40gb"'),
    }
    nodes = [node_obj("whole", 2), node_obj("migs", 1, labels={"gpupool.io/sharing": "mig"})]
    pods = [claiming("p2", "two"), claiming("pm", "mig")]
    d = decide(nodes, pods, CONFIG, 0, key=KEY, claims=claims)
    binds = {b.pod: b for b in d.binds}
    two = binds["team-a/p2"]
    assert two.node == "whole" and two.claim is not None and two.claim.name == "two"
    results = two.claim.status["allocation"]["devices"]["results"]
    assert sorted(r["device"] for r in results) == ["gpu-0", "gpu-1"]
    assert two.claim.status["reservedFor"] == [
        {"resource": "pods", "name": "p2", "uid": "uid-team-a-p2"}
    ]
    grant = json.loads(two.annotations["gpupool.io/grant"])
    assert len(grant["devices"]) == 2
    (mig,) = binds["team-a/pm"].claim.status["allocation"]["devices"]["results"]
    assert mig["device"] == "gpu-0-mig-3g-40gb-4" and mig["pool"] == "migs"


def test_a_card_another_allocator_gave_is_given_to_no_one_else():
    taken = claim("theirs")
    taken["status"] = {
        "allocation": {
            "devices": {
                "results": [
                    {"driver": "gpu.gpupool.io", "pool": "n1", "device": "gpu-0", "request": "gpu"}
                ]
            }
        },
        "reservedFor": [{"resource": "pods", "name": "web", "uid": "uid-web"}],
    }
    claims = {"team-a/theirs": taken, "team-a/mine": claim("mine")}
    d = decide([node_obj("n1", 2)], [claiming("p", "mine")], CONFIG, 0, key=KEY, claims=claims)
    (b,) = d.binds
    assert b.claim.status["allocation"]["devices"]["results"][0]["device"] == "gpu-1"
    d = decide([node_obj("n1", 1)], [claiming("p", "mine")], CONFIG, 0, key=KEY, claims=claims)
    assert not d.binds and "team-a/p" in d.waiting


def test_claims_missing_or_unreadable_make_the_pod_wait_or_refuse_saying_so():
    d = decide([node_obj("n1", 2)], [claiming("p", "nope")], CONFIG, 0, key=KEY, claims={})
    assert d.waiting["team-a/p"] == "ResourceClaim nope does not exist yet"
    claims = {"team-a/x": claim("x", "example-device-class")}
    d = decide([node_obj("n1", 2)], [claiming("p", "x")], CONFIG, 0, key=KEY, claims=claims)
    assert "is not gpupool's" in d.problems["team-a/p"] and not d.binds
    both = claiming("q", "y", gpus=1)
    d = decide([node_obj("n1", 2)], [both], CONFIG, 0, key=KEY, claims={"team-a/y": claim("y")})
    assert "ask one way" in d.problems["team-a/q"]


def test_claims_of_pods_all_gone_are_to_deallocate():
    mine = claim("mine")
    mine["status"] = {
        "allocation": {
            "devices": {"results": [{"driver": "gpu.gpupool.io", "pool": "n1", "device": "gpu-0"}]}
        },
        "reservedFor": [{"resource": "pods", "name": "p", "uid": "uid-p"}],
    }
    assert stale([mine], {"uid-p"}) == [] and stale([mine], set()) == [mine]
    assert stale([claim("unallocated")], set()) == []


def test_a_whole_card_claim_never_gets_a_shared_cards_device():
    """The engine may give an idle shared card whole; a claim of gpu.gpupool.io names a device
    the node's slices publish as whole (a shared node's device is a share's)."""
    shared = node_obj("s1", 2, labels={"gpupool.io/sharing": "share"})
    claims = {"team-a/c": claim("c")}
    d = decide([shared], [claiming("p", "c")], CONFIG, 0, key=KEY, claims=claims)
    assert not d.binds and "no whole cards for its ResourceClaim" in d.waiting["team-a/p"]
    d = decide([shared, node_obj("w1", 1)], [claiming("p", "c")], CONFIG, 0, key=KEY, claims=claims)
    assert [b.node for b in d.binds] == ["w1"]


def prioritized(name: str, *models: str) -> dict:
    subs = [
        {"name": m.lower().replace("-", ""), "deviceClassName": "gpu.gpupool.io",
         "selectors": [{"cel": {"expression": f'{ATTR}.model == "{m}"'}}]}
        for m in models
    ]  # fmt: skip
    return {
        "metadata": {"namespace": "team-a", "name": name, "uid": f"claim-{name}"},
        "spec": {"devices": {"requests": [{"name": "gpu", "firstAvailable": subs}]}},
    }


def test_a_prioritized_list_takes_the_first_option_some_node_can_give_now():
    claims = {"team-a/pl": prioritized("pl", "A100-80G", "T4")}
    nodes = [node_obj("a100", 1), node_obj("t4", 1, "T4")]
    d = decide(nodes, [claiming("p", "pl")], CONFIG, 0, key=KEY, claims=claims)
    ((b,),) = [d.binds]
    assert b.node == "a100"
    assert b.claim.status["allocation"]["devices"]["results"][0]["request"] == "gpu/a10080g"
    busy = pod_obj("busy", scheduler="default-scheduler", node="a100", gpus=1)  # holds the A100
    d = decide(nodes, [busy, claiming("p", "pl")], CONFIG, 0, key=KEY, claims=claims)
    (b,) = [b for b in d.binds if b.pod == "team-a/p"]
    assert b.node == "t4"
    assert b.claim.status["allocation"]["devices"]["results"][0]["request"] == "gpu/t4"
    d = decide(
        [node_obj("a100", 1)], [busy, claiming("p", "pl")], CONFIG, 0, key=KEY, claims=claims
    )
    assert not [b for b in d.binds if b.pod == "team-a/p"] and "team-a/p" in d.waiting


def _allocated(c: dict, node: str, device: str, *users: tuple[str, str]) -> dict:
    c["status"] = {
        "allocation": {"devices": {"results": [
            {"request": "gpu", "driver": "gpu.gpupool.io", "pool": node, "device": device}
        ]}},
        "reservedFor": [{"resource": "pods", "name": n, "uid": u} for n, u in users],
    }  # fmt: skip
    return c


def test_pods_sharing_one_claim_join_it_on_its_node_holding_no_card_of_their_own():
    """One claim named by two pods (a shared ResourceClaim): the first allocates it, the
    second waits until it is allocated, then goes to its node and is added to reservedFor —
    no second card is taken for it."""
    nodes = [node_obj("n1", 1), node_obj("n2", 1)]
    pods = [claiming("a", "shared"), claiming("b", "shared")]
    d = decide(nodes, pods, CONFIG, 0, key=KEY, claims={"team-a/shared": claim("shared")})
    (b,) = d.binds
    assert b.pod == "team-a/a" and b.claim.status["allocation"]
    assert d.waiting["team-a/b"] == "ResourceClaim shared is being allocated for pod team-a/a"
    node = b.node
    device = b.claim.status["allocation"]["devices"]["results"][0]["device"]
    allocated = _allocated(claim("shared"), node, device, ("a", "uid-team-a-a"))
    first = claiming("a", "shared", node=node)
    first["metadata"]["annotations"].update(b.annotations)
    d = decide(nodes, [first, claiming("b", "shared")], CONFIG, 0, key=KEY,
               claims={"team-a/shared": allocated})  # fmt: skip
    (j,) = d.binds
    assert (j.pod, j.node) == ("team-a/b", node) and j.claim.join
    assert j.claim.status == {
        "reservedFor": [{"resource": "pods", "name": "b", "uid": "uid-team-a-b"}]
    }
    assert json.loads(j.annotations["gpupool.io/grant"])["devices"] == []  # no card of its own


def test_a_claim_whose_first_pod_is_gone_still_holds_its_card_for_those_that_joined():
    nodes = [node_obj("n1", 1)]
    held = _allocated(claim("shared"), "n1", "gpu-0", ("gone", "uid-gone"), ("b", "uid-team-a-b"))
    joined = claiming("b", "shared", node="n1")
    other = {"team-a/shared": held, "team-a/mine": claim("mine")}
    d = decide(nodes, [joined, claiming("c", "mine")], CONFIG, 0, key=KEY, claims=other)
    assert not [x for x in d.binds if x.pod == "team-a/c"] and "team-a/c" in d.waiting


def test_an_old_mig_pod_on_a_dra_only_node_gets_its_instance_through_the_profiles_class():
    """nvidia.com/mig-3g.40gb (the device plugin's mixed strategy), on a MIG node whose kubelet
    advertises no such resource: the extended-resource claim asks the profile's class and is
    allocated the grant's instance; on a node whose device plugin advertises it, none."""
    node = node_obj("m1", 1, labels={"gpupool.io/sharing": "mig"})
    node["status"]["allocatable"] = {"cpu": "64", "memory": "512Gi"}
    pod = pod_obj("mig", cpu="1")
    pod["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/mig-3g.40gb": "1"}
    node["metadata"]["annotations"] = {"gpupool.io/devices": json.dumps(
        [{"index": 0, "model": "A100-80G", "memory_mib": 81920, "uuid": "GPU-0"}])}  # fmt: skip
    d = decide([node], [pod], CONFIG, 0, key=KEY, claims={})
    (b,) = d.binds
    assert b.claim is not None and b.claim.create is not None
    (request,) = b.claim.create["spec"]["devices"]["requests"]
    assert request["exactly"]["deviceClassName"] == "mig-3g-40gb.gpupool.io"
    (result,) = b.claim.status["allocation"]["devices"]["results"]
    assert result["device"] == "gpu-0-mig-3g-40gb-4" and result["request"] == request["name"]
    assert b.claim.pod_status["requestMappings"][0]["resourceName"] == "nvidia.com/mig-3g.40gb"
    node["status"]["allocatable"]["nvidia.com/mig-3g.40gb"] = "2"  # a device plugin serves it
    d = decide([node], [pod], CONFIG, 0, key=KEY, claims={})
    assert [b.claim for b in d.binds] == [None]


def test_the_nodes_gpupool_publishes_leave_out_those_of_device_plugin_replicas():
    """NVIDIA's device plugin hands out a replica node's cards: gpupool's slices must not
    offer them too (they were published as shared cards of gpu.gpupool.io)."""
    replicas = node_obj("rep", 2, labels={"nvidia.com/gpu.replicas": "4"})
    replicas["metadata"]["labels"]["nvidia.com/gpu.sharing-strategy"] = "time-slicing"
    replicas["status"]["allocatable"] = {
        "cpu": "64",
        "memory": "512Gi",
        "nvidia.com/gpu.shared": "8",
    }
    d = decide([replicas, node_obj("whole", 2)], [], CONFIG, 0, key=KEY, claims={})
    assert [n.name for n in d.nodes] == ["whole"]
    assert decide([node_obj("whole", 2)], [], CONFIG, 0, key=KEY).nodes == []  # DRA off

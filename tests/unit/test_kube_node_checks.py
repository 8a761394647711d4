"""Nodes as their device plugins advertise them (tests/data/k8s-corpus/nodes, sources in
SOURCES.md): left out with a cause and the fix named, or read, and never bound past what
they advertise (pure: kube.inventory, kube.advertised, kube.left_out, kube.decide)."""

import copy
import json

import pytest
import yaml

from gpupool.kube.config import parse_config
from gpupool.kube.decide import decide
from gpupool.kube.grants import GrantKey
from gpupool.kube.inventory import node_from_object
from gpupool.kube.left_out import LeftOut, LeftOutCause, NodeLeftOut, changes, node_event
from gpupool.model import SharingMode
from tests.support.kube_objects import K8S_CORPUS, node_obj, pod_obj

CONFIG = parse_config(
    {
        "namespaces": {"team-a": "team-a"},
        "tenants": [{"name": "team-a", "quotas": {"gpu": {"nominal": 64}}}],
    }
)
KEY = GrantKey.generate()


def corpus_node(name: str) -> dict:
    return yaml.safe_load((K8S_CORPUS / "nodes" / name).read_text())


def left_out(obj: dict) -> NodeLeftOut:
    with pytest.raises(NodeLeftOut) as refused:
        node_from_object(obj)
    return refused.value


def limits(pod: dict, **resources: str) -> dict:
    pod["spec"]["containers"][0]["resources"]["limits"] = dict(resources)
    return pod


def mig_pod(name: str, profile: str) -> dict:
    return limits(pod_obj(name), **{f"nvidia.com/mig-{profile}": "1"})


@pytest.mark.parametrize(
    ("file", "cause", "words"),
    [
        ("02-gpu-operator-time-slicing-default.yaml", LeftOutCause.REPLICAS_AS_CARDS,
         "renameByDefault: true"),
        ("04-hami-device-plugin.yaml", LeftOutCause.HAMI,
         "2 card(s), each split 10 ways, advertised as nvidia.com/gpu: 20"),
        ("05-mig-mixed-strategy.yaml", LeftOutCause.MIG_UNLABELLED,
         "kubectl label node a100-mig-mixed gpupool.io/sharing=mig"),
        ("06-mig-single-strategy.yaml", LeftOutCause.MIG_SINGLE, "use the mixed strategy"),
        ("07-mps-replicas-as-cards.yaml", LeftOutCause.REPLICAS_AS_CARDS,
         "(mps, nvidia.com/gpu.replicas=10)"),
    ],
)  # fmt: skip
def test_nodes_the_device_plugin_advertises_otherwise_are_left_out_naming_the_fix(
    file, cause, words
):
    refused = left_out(corpus_node(file))
    assert refused.cause is cause and words in str(refused), str(refused)


def test_hamis_newer_json_register_is_counted_too_and_a_node_it_left_is_read():
    hami = node_obj("h", 80)
    cards = [{"id": f"GPU-{i}", "count": 10, "devmem": 81920} for i in range(8)]
    hami["metadata"]["annotations"] = {"hami.io/node-nvidia-register": json.dumps(cards)}
    assert "8 card(s), each split 10 ways, advertised as nvidia.com/gpu: 80" in str(left_out(hami))
    gone = copy.deepcopy(hami)  # HAMi's plugin removed, its annotation left behind
    gone["status"]["allocatable"] = {"cpu": "64", "memory": "512Gi"}
    assert node_from_object(gone).node.devices == ()


def test_the_mixed_mig_node_labelled_is_its_card_in_mig_mode():
    obj = corpus_node("05-mig-mixed-strategy.yaml")
    obj["metadata"]["labels"]["gpupool.io/sharing"] = "mig"
    kn = node_from_object(obj)
    assert [(d.model, d.mode) for d in kn.node.devices] == [("A100-40G", SharingMode.MIG)]


def test_a_pod_waiting_for_room_names_the_nodes_left_out_and_why():
    nodes = [node_obj("n1", 1), corpus_node("05-mig-mixed-strategy.yaml")]
    d = decide(nodes, [mig_pod("m", "1g.5gb")], CONFIG, 0, key=KEY)
    assert not d.binds and d.node_problems["a100-mig-mixed"].cause is LeftOutCause.MIG_UNLABELLED
    why = d.waiting["team-a/m"]
    assert "1 node(s) left out by gpupool: a100-mig-mixed (advertises MIG instances but" in why
    assert "gpupool.io/sharing=mig" in why


def test_a_mig_profile_missing_from_the_advertised_layout_is_not_bound_there():
    mixed = corpus_node("05-mig-mixed-strategy.yaml")
    mixed["metadata"]["labels"]["gpupool.io/sharing"] = "mig"
    # the engine could cut a 4g.20gb from the card; the device plugin's layout has none
    d = decide([mixed], [mig_pod("big", "4g.20gb")], CONFIG, 0, key=KEY)
    assert not d.binds
    why = d.waiting["team-a/big"]
    assert "a100-mig-mixed's MIG layout advertises nvidia.com/mig-1g.5gb: 1" in why, why
    assert "not nvidia.com/mig-4g.20gb" in why
    # the layout's one 1g.5gb instance goes to one pod, the second waits for it
    d = decide([mixed], [mig_pod("a", "1g.5gb"), mig_pod("b", "1g.5gb")], CONFIG, 0, key=KEY)
    assert len(d.binds) == 1 and len(d.waiting) == 1
    (waiting,) = d.waiting.values()
    assert "advertises nvidia.com/mig-1g.5gb: 1" in waiting, waiting


def test_cards_are_never_bound_past_what_the_node_advertises():
    """gpupool's devices annotation says 8 cards, NVIDIA's device plugin advertises 6 (two
    unhealthy): 8 one-card pods, 6 bound; the other two wait naming the count."""
    devices = [
        {"index": i, "model": "A100-80G", "memory_mib": 81920, "uuid": f"GPU-{i}"} for i in range(8)
    ]
    node = node_obj("n1", 6, annotations={"gpupool.io/devices": json.dumps(devices)})
    pods = [pod_obj(f"p{i}", gpus=1) for i in range(8)]
    d = decide([node], pods, CONFIG, 0, key=KEY)
    assert len(d.binds) == 6 and len(d.waiting) == 2
    assert all("advertises nvidia.com/gpu: 6, 6 held" in w for w in d.waiting.values())
    # bound, they keep the next cycle off that node: the two go to a node with room
    placed = {b.pod: b for b in d.binds}
    for p in pods:
        if (b := placed.get(f"team-a/{p['metadata']['name']}")) is not None:
            p["spec"]["nodeName"] = b.node
            p["metadata"]["annotations"].update(b.annotations)
    d = decide([node, node_obj("n2", 2)], pods, CONFIG, 0, key=KEY)
    assert [b.node for b in d.binds] == ["n2", "n2"], d.waiting


def test_slices_of_gpupools_device_plugin_are_counted_against_its_slots():
    node = node_obj("n1", 8, labels={"gpupool.io/sharing": "share"})
    node["status"]["allocatable"] = {**node["status"]["allocatable"], "gpupool.io/slice": "3"}
    pods = []
    for i in range(5):
        p = limits(pod_obj(f"s{i}", request="gpu=1,gpu_share=10%"), **{"gpupool.io/slice": "1"})
        pods.append(p)
    d = decide([node], pods, CONFIG, 0, key=KEY)
    assert len(d.binds) == 3
    assert all("gpupool.io/slice: 3" in w for w in d.waiting.values()), d.waiting


def hami_pod(name: str, slice_: bool) -> dict:
    asked = {"nvidia.com/gpu": "2", "nvidia.com/gpumem": "3000", "nvidia.com/gpucores": "30"}
    return limits(pod_obj(name), **asked, **({"gpupool.io/slice": "1"} if slice_ else {}))


def gpupool_plugin_node(name: str, cards: int) -> dict:
    """A node served by gpupool's device plugin alone: its cards in gpupool.io/devices, no
    nvidia.com/gpu listed."""
    devices = [
        {"index": i, "model": "A100-80G", "memory_mib": 81920, "uuid": f"GPU-{name}-{i}"}
        for i in range(cards)
    ]
    obj = node_obj(name, cards, labels={"gpupool.io/sharing": "share"})
    obj["metadata"]["annotations"] = {"gpupool.io/devices": json.dumps(devices)}
    obj["status"]["allocatable"] = {"cpu": "64", "memory": "512Gi", "gpupool.io/slice": "16"}
    return obj


def test_hami_shares_are_refused_without_the_slice_and_with_it_kept_off_nvidias_cards():
    nvidia = node_obj("nvidia-shared", 8, labels={"gpupool.io/sharing": "share"})
    d = decide([nvidia], [hami_pod("bare", False)], CONFIG, 0, key=KEY)
    assert not d.binds
    assert "gpupool.io/slice: 1 and the annotation gpupool.io/request: gpu=2,gpu_share=30%," \
        "gpu_mem=3000MiB" in d.problems["team-a/bare"]  # fmt: skip
    # asked with gpupool's slice: never where NVIDIA's device plugin would hand whole cards
    d = decide([nvidia], [hami_pod("sliced", True)], CONFIG, 0, key=KEY)
    assert not d.binds and "lists nvidia.com/gpu: 8" in d.waiting["team-a/sliced"]
    nodes = [nvidia, gpupool_plugin_node("ours", 8)]
    pods = [hami_pod(f"r{i}", True) for i in range(9)]  # scaled to 9 replicas
    d = decide(nodes, pods, CONFIG, 0, key=KEY)
    assert {b.node for b in d.binds} == {"ours"} and len(d.binds) == 9
    grant = json.loads(d.binds[0].annotations["gpupool.io/grant"])
    assert [(x["compute_pct"], x["mem_mib"]) for x in grant["devices"]] == [(30, 3000)] * 2


def test_a_gang_past_what_its_nodes_advertise_is_not_bound_in_part():
    devices = [
        {"index": i, "model": "A100-80G", "memory_mib": 81920, "uuid": f"GPU-{i}"} for i in range(8)
    ]
    node = node_obj("n1", 3, annotations={"gpupool.io/devices": json.dumps(devices)})
    gang = {"gpupool.io/gang": "g", "gpupool.io/gang-size": "2"}
    pods = [pod_obj(f"g{i}", gpus=2, annotations=dict(gang)) for i in range(2)]
    d = decide([node], pods, CONFIG, 0, key=KEY)
    assert not d.binds and set(d.waiting) == {"team-a/g0", "team-a/g1"}
    assert "advertises nvidia.com/gpu: 3" in d.waiting["team-a/g1"]


def test_a_reason_is_said_once_per_change_and_a_node_taken_back_is_said_too():
    a = LeftOut("a", LeftOutCause.HAMI, "served by HAMi")
    new, back = changes({}, {"a": a})
    assert new == [a] and back == []
    assert changes({"a": a}, {"a": a}) == ([], [])  # the next cycle says nothing
    other = LeftOut("a", LeftOutCause.MIG_UNLABELLED, "label it")
    assert changes({"a": a}, {"a": other}) == ([other], [])
    assert changes({"a": other}, {}) == ([], ["a"])
    event = node_event(a, "uid-1", "gpupool-0")
    assert event["involvedObject"] == {"apiVersion": "v1", "kind": "Node", "name": "a",
                                       "uid": "uid-1"}  # fmt: skip
    assert event["metadata"]["namespace"] == "default" and event["reason"] == "GpupoolNodeLeftOut"


def test_with_dra_a_sliced_share_gets_no_whole_card_claim_where_a_card_pod_does():
    """On a node no device plugin lists nvidia.com/gpu on, gpupool makes the extended-resource
    claim kube-scheduler would for a pod asking cards; for a share asked with gpupool's slice
    it must not: the claim would hand the kubelet whole cards."""
    node = gpupool_plugin_node("ours", 8)
    d = decide([node], [hami_pod("share", True), pod_obj("card", gpus=1)], CONFIG, 0,
               key=KEY, claims={})  # fmt: skip
    claims = {b.pod: b.claim for b in d.binds}
    assert set(claims) == {"team-a/share", "team-a/card"}, d.waiting
    assert claims["team-a/share"] is None and claims["team-a/card"] is not None

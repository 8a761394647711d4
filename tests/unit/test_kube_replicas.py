"""Nodes whose NVIDIA device plugin shares cards as time-slicing or MPS replicas: read as
shares of 1/R of a card, served only to pods asking ``nvidia.com/gpu.shared``, never handed
to a pod asking cards (pure: kube.inventory, kube.replicas, kube.decide)."""

import copy
import json

import pytest
import yaml

from gpupool.kube.config import parse_config
from gpupool.kube.decide import decide
from gpupool.kube.grants import GrantKey
from gpupool.kube.inventory import node_from_object
from gpupool.kube.ledger import bound_report
from gpupool.kube.pods import request_of
from gpupool.model import SharingMode, SpecError
from tests.support.kube_objects import K8S_CORPUS, node_obj, pod_obj

CONFIG = parse_config(
    {
        "namespaces": {"team-a": "team-a"},
        "tenants": [{"name": "team-a", "quotas": {"gpu": {"nominal": 64}}}],
    }
)
KEY = GrantKey.generate()
NODES = K8S_CORPUS / "nodes"


def corpus_node(name: str) -> dict:
    return yaml.safe_load((NODES / name).read_text())


def replica_node(name: str, cards: int, replicas: int, strategy: str = "mps") -> dict:
    obj = node_obj(name, cards, labels={"nvidia.com/gpu.replicas": str(replicas)})
    obj["metadata"]["labels"]["nvidia.com/gpu.sharing-strategy"] = strategy
    obj["status"]["allocatable"] = dict(obj["status"]["allocatable"])
    obj["status"]["allocatable"].pop("nvidia.com/gpu")
    obj["status"]["allocatable"]["nvidia.com/gpu.shared"] = str(cards * replicas)
    return obj


def shared_pod(name: str, n: int = 1, **kw) -> dict:
    pod = pod_obj(name, **kw)
    pod["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu.shared": str(n)}
    return pod


def test_the_gpu_operators_renamed_time_slicing_node_is_its_cards_cut_in_replicas():
    kn = node_from_object(corpus_node("01-gpu-operator-time-slicing-renamed.yaml"))
    assert kn.replicas == 4
    assert [(d.model, d.mode) for d in kn.node.devices] == [("T4", SharingMode.SHARE)] * 4
    kn = node_from_object(corpus_node("03-gfd-renamed-replicas.yaml"))
    assert kn.replicas == 2 and len(kn.node.devices) == 1


def test_replicas_advertised_as_cards_are_refused_naming_the_device_plugins_fix():
    with pytest.raises(SpecError) as refused:
        node_from_object(corpus_node("02-gpu-operator-time-slicing-default.yaml"))
    assert "renameByDefault: true" in str(refused.value)
    assert "nvidia.com/gpu.replicas=4" in str(refused.value)


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda o: o["metadata"]["labels"].pop("nvidia.com/gpu.replicas"), "without a replica"),
        (
            lambda o: o["status"]["allocatable"].update({"nvidia.com/gpu.shared": "15"}),
            "15 is not 4 cards x 4 replicas",
        ),
        (
            lambda o: (
                o["metadata"]["labels"].update({"nvidia.com/gpu.replicas": "13"}),
                o["status"]["allocatable"].update({"nvidia.com/gpu.shared": "52"}),
            ),
            "whole percents",
        ),
        (lambda o: o["metadata"]["labels"].update({"gpupool.io/sharing": "mig"}), "sharing=mig"),
    ],
)
def test_a_replica_node_that_does_not_add_up_is_refused_naming_what(change, words):
    obj = copy.deepcopy(corpus_node("01-gpu-operator-time-slicing-renamed.yaml"))
    change(obj)
    with pytest.raises(SpecError) as refused:
        node_from_object(obj)
    assert words in str(refused.value)


def test_replica_pods_fill_the_replica_node_and_card_pods_never_land_there():
    nodes = [replica_node("shared", 2, 4), node_obj("whole", 2)]
    pods = [shared_pod(f"r{i}") for i in range(9)] + [pod_obj(f"w{i}", gpus=1) for i in range(3)]
    d = decide(nodes, pods, CONFIG, 0, key=KEY)
    placed = {b.pod: b.node for b in d.binds}
    on_shared = [p for p, n in placed.items() if n == "shared"]
    on_whole = [p for p, n in placed.items() if n == "whole"]
    assert len(on_shared) == 8 and all(p.startswith("team-a/r") for p in on_shared)  # 2 x 4
    assert len(on_whole) == 2 and all(p.startswith("team-a/w") for p in on_whole)
    grants = [json.loads(b.annotations["gpupool.io/grant"]) for b in d.binds if b.node == "shared"]
    per_card: dict[int, int] = {}
    for g in grants:
        (dev,) = g["devices"]
        assert dev["compute_pct"] == 25  # a quarter card: quotas and bills count that
        per_card[dev["index"]] = per_card.get(dev["index"], 0) + 1
    assert per_card == {0: 4, 1: 4}
    waiting_card = next(p for p in ("team-a/w0", "team-a/w1", "team-a/w2") if p not in placed)
    assert "device-plugin replicas" in d.waiting[waiting_card]  # why the shared node is not it
    waiting_replica = next(f"team-a/r{i}" for i in range(9) if f"team-a/r{i}" not in placed)
    assert waiting_replica in d.waiting


def test_a_hami_share_does_not_go_to_a_replica_node_it_cannot_be_served_on():
    hami = pod_obj("hami", gpus=1)
    hami["spec"]["containers"][0]["resources"]["limits"].update(
        {"nvidia.com/gpucores": "30", "gpupool.io/slice": "1"}
    )
    d = decide([replica_node("shared", 2, 4)], [hami], CONFIG, 0, key=KEY)
    assert not d.binds
    assert "sharing cards as device-plugin replicas" in d.waiting["team-a/hami"]


def test_replicas_are_refused_beyond_one_and_where_no_node_serves_them():
    with pytest.raises(SpecError) as refused:
        request_of(shared_pod("two", 2), 25)
    assert "failRequestsGreaterThanOne" in str(refused.value)
    d = decide([node_obj("whole", 2)], [shared_pod("lonely")], CONFIG, 0, key=KEY)
    assert not d.binds and "no node gpupool reads serves" in d.problems["team-a/lonely"]
    mixed = pod_obj("mixed", gpus=1)
    mixed["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu.shared"] = "1"
    with pytest.raises(SpecError, match="not asked beside other devices"):
        request_of(mixed, 25)


def test_one_replica_size_per_cluster_the_others_left_out_saying_so():
    nodes = [replica_node("a", 1, 4), replica_node("b", 1, 4), replica_node("c", 1, 2)]
    d = decide(nodes, [shared_pod(f"r{i}") for i in range(3)], CONFIG, 0, key=KEY)
    assert "one replica size per cluster" in d.node_problems["c"].message
    assert {b.node for b in d.binds} <= {"a", "b"} and len(d.binds) == 3


def test_ten_replicas_a_card_are_all_served():
    d = decide(
        [replica_node("s", 1, 10, "time-slicing")],
        [shared_pod(f"r{i:02d}") for i in range(11)],
        CONFIG,
        0,
        key=KEY,
    )
    assert len(d.binds) == 10  # beyond gpupool's own 8 sharers: the node says 10


def test_a_bound_replica_pod_is_recorded_as_the_share_it_holds():
    first = decide([replica_node("s", 1, 4)], [shared_pod("r")], CONFIG, 0, key=KEY)
    (bind,) = first.binds
    pod = shared_pod("r", node="s")
    pod["metadata"]["annotations"].update(bind.annotations)
    report = bound_report(pod, CONFIG, KEY)
    assert report is not None and report["request"].startswith("gpu=1,gpu_share=25%,")
    again = decide([replica_node("s", 1, 4)], [pod, shared_pod("r2")], CONFIG, 0, key=KEY)
    (bind2,) = again.binds  # the bound one counted: the second takes another replica
    assert json.loads(bind2.annotations["gpupool.io/grant"])["devices"][0]["compute_pct"] == 25

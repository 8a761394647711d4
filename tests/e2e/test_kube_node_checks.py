"""Nodes as their device plugins advertise them, against a real kube-apiserver: each node
gpupool leaves out gets one Warning Event saying why and what to set, pods waiting for room
say which nodes are left out, and nothing is bound past what a node advertises (the node
shapes are the corpus's: tests/data/k8s-corpus/nodes, sources in SOURCES.md)."""

import json
import time

import yaml

from tests.support.agents import wait_for
from tests.support.kube_objects import K8S_CORPUS, node_obj, pod_obj, pod_of

LEFT_OUT = "GpupoolNodeLeftOut"


def corpus_node(name: str) -> dict:
    return yaml.safe_load((K8S_CORPUS / "nodes" / name).read_text())


def bound(kube, name: str) -> str:
    return kube.pod("team-a", name)["spec"].get("nodeName") or ""


def said(kube, name: str, *reasons: str) -> list[str]:
    return [e["message"] for e in kube.events("team-a", name) if e["reason"] in reasons]


def node_events(kube, node: str) -> list[dict]:
    uid = kube.api.request("GET", f"/api/v1/nodes/{node}")["metadata"]["uid"]
    items = kube.api.list("/api/v1/namespaces/default/events")["items"]
    return [
        e
        for e in items
        if e["involvedObject"].get("kind") == "Node"
        and e["involvedObject"]["name"] == node
        and e["involvedObject"].get("uid") == uid
        and e["reason"] == LEFT_OUT
    ]


def limits(pod: dict, **resources: str) -> dict:
    pod["spec"]["containers"][0]["resources"]["limits"] = dict(resources)
    return pod


def gpupool_plugin_node(name: str, cards: int) -> dict:
    """Served by gpupool's device plugin alone: cards in gpupool.io/devices, no
    nvidia.com/gpu listed, gpupool.io/slice slots."""
    devices = [
        {"index": i, "model": "A100-80G", "memory_mib": 81920, "uuid": f"GPU-{name}-{i}"}
        for i in range(cards)
    ]
    obj = node_obj(name, cards, labels={"gpupool.io/sharing": "share"})
    obj["metadata"]["annotations"] = {"gpupool.io/devices": json.dumps(devices)}
    slots = {"cpu": "64", "memory": "512Gi", "pods": "110", "gpupool.io/slice": "16"}
    obj["status"]["capacity"] = obj["status"]["allocatable"] = slots
    return obj


def test_nodes_left_out_are_reported_once_and_pods_say_which(kube, start_scheduler):
    """An MPS node advertised the old way, a MIG node without gpupool.io/sharing=mig and a
    node of HAMi's device plugin each get one Event naming the fix; a pod that finds no
    room says which nodes are left out; labelled, the MIG node takes MIG pods, never past its
    advertised layout."""
    kube.apply(node_obj("a100-1", 1))
    for file in ("04-hami-device-plugin.yaml", "05-mig-mixed-strategy.yaml",
                 "07-mps-replicas-as-cards.yaml"):  # fmt: skip
        kube.apply(corpus_node(file))
    s = start_scheduler()
    kube.apply(pod_obj("two", gpus=2))
    kube.apply(limits(pod_obj("mig-a"), **{"nvidia.com/mig-1g.5gb": "1"}))
    fixes = {
        "node67-4v100": "HAMi's device plugin serves it",
        "a100-mig-mixed": "kubectl label node a100-mig-mixed gpupool.io/sharing=mig",
        "h200-mps": "set renameByDefault: true",
    }
    for node, words in fixes.items():
        events = wait_for(f"{node}'s event", lambda node=node: node_events(kube, node))
        assert words in events[0]["message"] and events[0]["type"] == "Warning", events
    why = wait_for("two's reason", lambda: said(kube, "two", "FailedScheduling"))[0]
    assert "3 node(s) left out by gpupool: a100-mig-mixed (advertises MIG instances" in why
    assert "h200-mps (device-plugin replicas advertised as nvidia.com/gpu)" in why, why
    assert "node67-4v100 (served by HAMi's device plugin)" in why
    mig = wait_for("mig-a's reason", lambda: said(kube, "mig-a", "FailedScheduling"))[0]
    assert "no gpupool.io/sharing=mig label" in mig, mig
    cycles = s.stats["cycles"]
    kube.apply(pod_obj("three", gpus=3))  # more cycles: nothing said again
    wait_for("more cycles", lambda: s.stats["cycles"] >= cycles + 2)
    time.sleep(0.5)  # an Event written by a cycle's worker lands
    assert all(len(node_events(kube, node)) == 1 for node in fixes)

    kube.api.request(
        "PATCH",
        "/api/v1/nodes/a100-mig-mixed",
        {"metadata": {"labels": {"gpupool.io/sharing": "mig"}}},
        content_type="application/merge-patch+json",
    )
    wait_for("mig-a bound", lambda: bound(kube, "mig-a") == "a100-mig-mixed")
    kube.apply(limits(pod_obj("mig-b"), **{"nvidia.com/mig-1g.5gb": "1"}))
    kube.apply(limits(pod_obj("mig-4g"), **{"nvidia.com/mig-4g.20gb": "1"}))
    full = wait_for("mig-b's reason", lambda: said(kube, "mig-b", "FailedScheduling"))
    assert any("advertises nvidia.com/mig-1g.5gb: 1, 1 held" in m for m in full), full
    layout = wait_for("mig-4g's reason", lambda: said(kube, "mig-4g", "FailedScheduling"))
    assert any("not nvidia.com/mig-4g.20gb" in m for m in layout), layout
    assert not bound(kube, "mig-b") and not bound(kube, "mig-4g")
    assert len(node_events(kube, "a100-mig-mixed")) == 1 and s.stats["bind_errors"] == 0


def test_hami_shares_get_gpupools_slice_or_are_told_what_to_add(kube, start_scheduler):
    """HAMi's own example (2 cards x 30% + 3000 MiB) is refused naming what to write; asked
    with gpupool.io/slice, its replicas go only to the node gpupool's device plugin serves —
    never where NVIDIA's would hand them whole cards — and each holds its share."""
    kube.apply(node_obj("nvidia-shared", 8, labels={"gpupool.io/sharing": "share"}))
    kube.apply(gpupool_plugin_node("ours", 8))
    start_scheduler()
    hami = pod_of(yaml.safe_load((K8S_CORPUS / "01-hami-default-use.yaml").read_text()))
    hami["metadata"] = {**hami["metadata"], "name": "hami", "namespace": "team-a"}
    hami["spec"] = {**hami["spec"], "schedulerName": "gpupool"}
    kube.apply({"apiVersion": "v1", "kind": "Pod", **hami})
    asked = {"nvidia.com/gpu": "2", "nvidia.com/gpumem": "3000", "nvidia.com/gpucores": "30"}
    for i in range(5):
        kube.apply(limits(pod_obj(f"r{i}"), **asked, **{"gpupool.io/slice": "1"}))
    refused = wait_for("hami's event", lambda: said(kube, "hami", "InvalidRequest"))[0]
    assert "the limit gpupool.io/slice: 1 and the annotation gpupool.io/request: " \
        "gpu=2,gpu_share=30%,gpu_mem=3000MiB" in refused, refused  # fmt: skip
    wait_for("replicas bound", lambda: all(bound(kube, f"r{i}") for i in range(5)))
    assert {bound(kube, f"r{i}") for i in range(5)} == {"ours"}
    for i in range(5):
        grant = json.loads(
            kube.pod("team-a", f"r{i}")["metadata"]["annotations"]["gpupool.io/grant"]
        )
        assert [(d["compute_pct"], d["mem_mib"]) for d in grant["devices"]] == [(30, 3000)] * 2
    assert not bound(kube, "hami")

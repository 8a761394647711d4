"""A node's cards as DRA ResourceSlices of driver gpu.gpupool.io (pure; issue 48). That the
API server accepts them and its own allocator reads them as gpupool means them:
tests/e2e/test_kube_dra_slices.py."""

import itertools
import re
from dataclasses import replace

from gpupool.kube.dra.classes import device_classes
from gpupool.kube.dra.slices import DRIVER, devices_of, resource_slices
from gpupool.model import Node, SharingMode, make_devices
from gpupool.sharing.mig import table_for

LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def node(mode: SharingMode, n: int = 8, model: str = "A100-80G") -> Node:
    devices = make_devices(model, n, mode=mode, node="n1")
    return Node(name="n1", cpu_millis=64000, memory_mib=512 * 1024, devices=devices)


def test_whole_cards_are_one_device_each_in_one_slice_of_the_nodes_pool():
    (s,) = resource_slices(node(SharingMode.WHOLE), generation=3)
    spec = s["spec"]
    assert spec["driver"] == DRIVER and spec["nodeName"] == "n1"
    assert spec["pool"] == {"name": "n1", "generation": 3, "resourceSliceCount": 1}
    assert devices_of([s]) == [f"gpu-{i}" for i in range(8)]
    first = spec["devices"][0]
    assert first["attributes"]["model"] == {"string": "A100-80G"}
    assert first["attributes"]["mode"] == {"string": "whole"}
    assert first["capacity"]["memory"] == {"value": "80Gi"}


def test_an_unhealthy_card_is_not_offered():
    n = node(SharingMode.WHOLE, 2)
    sick = replace(n, devices=(n.devices[0], replace(n.devices[1], healthy=False)))
    assert devices_of(resource_slices(sick, 1)) == ["gpu-0"]


def test_a_shared_card_is_consumed_by_capacity_whole_by_default():
    (s,) = resource_slices(node(SharingMode.SHARE, 1), 1)
    (dev,) = s["spec"]["devices"]
    assert dev["allowMultipleAllocations"] is True
    memory, compute = dev["capacity"]["memory"], dev["capacity"]["compute"]
    assert memory["value"] == "72Gi"  # 80 GiB less the 10% sharing headroom
    assert memory["requestPolicy"]["default"] == memory["value"]  # no amount: all of it
    assert compute == {
        "value": "100",
        "requestPolicy": {"default": "100", "validRange": {"min": "1", "step": "1"}},
    }


def test_mig_placements_conflict_in_counters_exactly_where_the_mig_table_says_they_overlap():
    slices = resource_slices(node(SharingMode.MIG, 2), 1)
    assert len(slices) == 2 and all(s["spec"]["pool"]["resourceSliceCount"] == 2 for s in slices)
    table = table_for("A100-80G")
    spec = slices[0]["spec"]
    (counters,) = spec["sharedCounters"]
    devices = spec["devices"]
    assert len(devices) == sum(len(p.starts) for p in table.profiles) <= 64
    by_name = {(p.name, s): p.mask(s) for p in table.profiles for s in p.starts}
    for a, b in itertools.combinations(devices, 2):
        used_a = set(a["consumesCounters"][0]["counters"])
        used_b = set(b["consumesCounters"][0]["counters"])
        key_a = (a["attributes"]["profile"]["string"], a["attributes"]["migStart"]["int"])
        key_b = (b["attributes"]["profile"]["string"], b["attributes"]["migStart"]["int"])
        assert bool(used_a & used_b) == bool(by_name[key_a] & by_name[key_b]), (key_a, key_b)
        assert set(used_a) <= set(counters["counters"])
    threes = [d["attributes"]["migStart"]["int"] for d in devices if "3g" in d["name"]]
    assert threes == [4, 0]  # a first-fit allocator keeps 0-3 for a 4g


def test_every_name_is_one_the_api_validates():
    for mode in SharingMode:
        for s in resource_slices(node(mode, 2), 1):
            assert LABEL.match(s["metadata"]["name"])
            for d in s["spec"]["devices"]:
                assert LABEL.match(d["name"]) and len(d["name"]) <= 63
                assert all(re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", a) for a in d["attributes"])
            for cs in s["spec"].get("sharedCounters", []):
                assert LABEL.match(cs["name"]) and all(LABEL.match(c) for c in cs["counters"])


def test_a_node_with_nothing_to_give_publishes_an_empty_pool():
    (s,) = resource_slices(Node(name="cpu", cpu_millis=1000, memory_mib=1024), 1)
    assert s["spec"]["devices"] == []


def test_the_device_classes_select_by_the_mode_the_slices_publish():
    classes = {c["metadata"]["name"]: c for c in device_classes()}
    assert {"gpu.gpupool.io", "mig.gpupool.io", "share.gpupool.io"} <= set(classes)
    expr = classes["mig.gpupool.io"]["spec"]["selectors"][0]["cel"]["expression"]
    assert 'device.attributes["gpu.gpupool.io"].mode == "mig"' in expr
    # old manifests' resource names, each served by one class
    served = {c["spec"].get("extendedResourceName"): n for n, c in classes.items()}
    assert served["nvidia.com/gpu"] == "gpu.gpupool.io"
    assert served["nvidia.com/mig-3g.40gb"] == "mig-3g-40gb.gpupool.io"
    three = classes["mig-3g-40gb.gpupool.io"]["spec"]["selectors"][0]["cel"]["expression"]
    assert three.endswith('.profile == "3g.40gb"')
    assert not any("+" in (r or "") for r in served)  # no resource name has a "+"

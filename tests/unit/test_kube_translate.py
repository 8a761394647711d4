"""Kubernetes objects as gpupool nodes, jobs and grants, and one decision over them (pure)."""

import json
from collections.abc import Mapping

import pytest

from gpupool.kube.config import parse_config
from gpupool.kube.decide import Memo, decide
from gpupool.kube.grants import (
    GRANT_ANNOTATION,
    SIGNATURE_ANNOTATION,
    GrantKey,
    UnsignedGrant,
    grant_json,
    grant_of,
    read_grant,
)
from gpupool.kube.inventory import node_from_object
from gpupool.kube.pods import group_pods, request_of
from gpupool.model import SharingMode, SpecError
from gpupool.scheduler.types import DeviceGrant, NodeGrant
from tests.support.kube_objects import node_obj, pod_obj

CONFIG = parse_config(
    {
        "namespaces": {"team-a": "team-a", "team-b": "team-b"},
        "tenants": [
            {"name": "co"},
            {"name": "team-a", "parent": "co", "quotas": {"gpu": {"nominal": 16}}},
            {"name": "team-b", "parent": "co", "quotas": {"gpu": {"nominal": 16}}},
        ],
    }
)
KEY = GrantKey.generate()
GRANT, SIGNATURE = GRANT_ANNOTATION, SIGNATURE_ANNOTATION
GANG = {"gpupool.io/gang": "g", "gpupool.io/gang-size": "2"}


def test_gpu_feature_discovery_labels_make_catalog_cards():
    kn = node_from_object(node_obj("n1", 8))
    assert kn.closed == ""
    assert [d.model for d in kn.node.devices] == ["A100-80G"] * 8
    assert kn.node.devices[0].memory_mib == 81920 and kn.node.cpu_millis == 64000
    assert kn.node.memory_mib == 512 * 1024
    t4 = node_from_object(node_obj("t", 4, "T4"))
    assert [d.model for d in t4.node.devices] == ["T4"] * 4 and t4.node.devices[
        0
    ].memory_mib == 15360


def test_sharing_mode_ascend_resources_and_the_agents_device_list():
    mig = node_from_object(node_obj("m", 2, labels={"gpupool.io/sharing": "mig"}))
    assert {d.mode for d in mig.node.devices} == {SharingMode.MIG}
    npu = node_obj("npu", 0)
    npu["status"]["allocatable"]["huawei.com/Ascend910B"] = "8"
    del npu["metadata"]["labels"]["nvidia.com/gpu.product"]
    assert [d.model for d in node_from_object(npu).node.devices] == ["Ascend910B"] * 8
    listed = [{"index": 3, "model": "A100-80G", "memory_mib": 81920, "uuid": "GPU-abc"}]
    agent = node_obj("a", 8, annotations={"gpupool.io/devices": json.dumps(listed)})
    devices = node_from_object(agent).node.devices
    assert [(d.index, d.uuid) for d in devices] == [(3, "GPU-abc")]


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda o: o["status"]["allocatable"].update(cpu="lots"), "cpu"),
        (
            lambda o: o["metadata"]["labels"].update({"nvidia.com/gpu.product": "Mystery-9000"}),
            "catalog",
        ),
        (
            lambda o: o["metadata"]["labels"].update({"gpupool.io/sharing": "halves"}),
            "gpupool.io/sharing",
        ),
        (
            lambda o: o["metadata"]["annotations"].update({"gpupool.io/devices": "[{"}),
            "gpupool.io/devices",
        ),
        (lambda o: o["status"]["allocatable"].update({"nvidia.com/gpu": "1.5"}), "whole"),
        (  # the device plugin's time-slicing: 8 cards advertised as 32 (GFD's labels)
            lambda o: (
                o["status"]["allocatable"].update({"nvidia.com/gpu": "32"}),
                o["metadata"]["labels"].update(
                    {"nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.sharing-strategy": "mps"}
                ),
            ),
            "shares its cards (mps, nvidia.com/gpu.replicas=4)",
        ),
        (  # an older GFD: no strategy label, the count is cards x replicas
            lambda o: (
                o["status"]["allocatable"].update({"nvidia.com/gpu": "32"}),
                o["metadata"]["labels"].update({"nvidia.com/gpu.replicas": "4"}),
            ),
            "shares its cards (replicas, nvidia.com/gpu.replicas=4)",
        ),
        (lambda o: o["metadata"].pop("name"), "metadata.name"),
    ],
)
def test_a_garbled_node_is_refused_naming_what_is_wrong(change, words):
    obj = node_obj("n1", 8)
    change(obj)
    with pytest.raises(SpecError) as err:
        node_from_object(obj)
    assert words in str(err.value)


def test_nodes_closed_by_cordon_and_readiness_and_taints_kept_for_the_pods():
    assert node_from_object(node_obj("a", unschedulable=True)).closed == "cordoned"
    assert node_from_object(node_obj("b", ready=False)).closed == "not Ready"
    taint = [{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]
    assert node_from_object(node_obj("c", taints=taint)).closed == ""  # per pod: selectors


TAINT = {"key": "dedicated", "value": "infra", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("spec", "labels", "taints", "expected"),
    [
        ({}, {}, [], True),
        ({"nodeSelector": {"pool": "a"}}, {"pool": "a"}, [], True),
        ({"nodeSelector": {"pool": "a"}}, {"pool": "b"}, [], False),
        ({}, {}, [TAINT], False),
        (
            {"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "infra"}]},
            {},
            [TAINT],
            True,
        ),
        ({"tolerations": [{"key": "dedicated", "value": "other"}]}, {}, [TAINT], False),
        ({"tolerations": [{"operator": "Exists"}]}, {}, [TAINT], True),
        (
            {"tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}]},
            {},
            [TAINT],
            False,
        ),
        ({}, {}, [{"key": "soft", "effect": "PreferNoSchedule"}], True),
        ({}, {}, [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}], True),
        (
            {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "zone", "operator": "In", "values": ["z1", "z2"]}
                                    ]
                                }
                            ]
                        }
                    }
                }
            },
            {"zone": "z2"},
            [],
            True,
        ),
        (
            {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "zone", "operator": "NotIn", "values": ["z2"]}
                                    ]
                                },
                                {
                                    "matchExpressions": [
                                        {"key": "gpus", "operator": "Gt", "values": ["4"]}
                                    ]
                                },
                            ]
                        }
                    }
                }
            },
            {"zone": "z2", "gpus": "8"},
            [],
            True,
        ),
        (
            {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {"matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]}
                            ]
                        }
                    }
                }
            },
            {"zone": "z2"},
            [],
            False,
        ),
    ],
)
def test_node_selector_affinity_and_tolerations_as_kubernetes_reads_them(
    spec, labels, taints, expected
):
    from gpupool.kube.inventory import DEFAULT_TOLERATED
    from gpupool.kube.selectors import node_allows

    pod = {"spec": spec}
    node = {"metadata": {"labels": labels}, "spec": {"taints": taints}}
    assert node_allows(pod, node, DEFAULT_TOLERATED) is expected


def test_constrained_pods_go_only_where_they_may_and_say_why_they_wait():
    nodes = [node_obj("a1", 8, labels={"pool": "a"}), node_obj("b1", 8, labels={"pool": "b"}),
             node_obj("t1", 8, taints=[TAINT])]  # fmt: skip
    to_b = pod_obj("to-b", gpus=8)
    to_b["spec"]["nodeSelector"] = {"pool": "b"}
    tolerant = pod_obj("tolerant", gpus=8)
    tolerant["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "t1"}
    tolerant["spec"]["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
    first = decide(nodes, [to_b, tolerant], CONFIG, 0, key=KEY)
    placed = {b.pod: b for b in first.binds}
    assert placed["team-a/to-b"].node == "b1" and placed["team-a/tolerant"].node == "t1"
    _bound(to_b, "b1", placed["team-a/to-b"].annotations)
    _bound(tolerant, "t1", placed["team-a/tolerant"].annotations)
    plain = [pod_obj(f"plain-{i}", gpus=8) for i in range(2)]
    d = decide(nodes, [to_b, tolerant, *plain], CONFIG, 0, key=KEY)
    assert [b.node for b in d.binds] == ["a1"]  # t1 is tainted, b1 full
    waiting = next(iter(d.waiting.values()))
    assert "not allowed by its node selector, affinity or tolerations" in waiting


def test_a_pods_request_from_the_annotation_or_its_resources():
    r = request_of(pod_obj("p", request="gpu=A100-80G:1,gpu_share=50%", cpu="500m", memory="2Gi"))
    assert (r.gpu_model, r.gpu_share_pct, r.cpu_millis, r.mem_mib) == ("A100-80G", 50, 500, 2048)
    r = request_of(pod_obj("p", request="gpu=2,cpu=4,mem=20Gi", cpu="1"))
    assert (r.gpu, r.cpu_millis, r.mem_mib) == (2, 4000, 20480)
    r = request_of(pod_obj("p", gpus=3, cpu="0.25", memory="1G"))
    assert (r.gpu, r.cpu_millis, r.mem_mib) == (3, 250, 954)
    with pytest.raises(SpecError, match="topology=any"):
        request_of(pod_obj("p", request="gpu=16,topology=any"))
    with pytest.raises(SpecError, match="cpu"):
        request_of(pod_obj("p", gpus=1, cpu="fast"))


def test_pods_group_into_jobs_and_bad_ones_say_why():
    pods = [
        pod_obj("solo", gpus=1),
        pod_obj("g-1", gpus=1, annotations=GANG),
        pod_obj("g-0", gpus=1, annotations=GANG),
        pod_obj(
            "half-0", gpus=1, annotations={"gpupool.io/gang": "h", "gpupool.io/gang-size": "3"}
        ),
        pod_obj("nosize", gpus=1, annotations={"gpupool.io/gang": "n"}),
        pod_obj("kind", gpus=1, annotations={"gpupool.io/kind": "party"}),
        pod_obj("mixed-0", gpus=1, annotations={**GANG, "gpupool.io/gang": "m"}),
        pod_obj("mixed-1", gpus=2, annotations={**GANG, "gpupool.io/gang": "m"}),
        pod_obj("vip", gpus=1, priority_class="gold", priority=5000),
    ]
    grouped = group_pods(pods, CONFIG)
    jobs, problems = grouped.jobs, grouped.problems
    assert set(jobs) == {"team-a/solo", "team-a/gang/g", "team-a/vip"}
    assert jobs["team-a/gang/g"].pods == ["team-a/g-0", "team-a/g-1"]
    assert jobs["team-a/gang/g"].job.gang_size == 2
    assert jobs["team-a/vip"].job.priority_class == "gold"
    assert "1 of 3 pods" in problems["team-a/half-0"]
    assert "nor annotation gpupool.io/gang-size" in problems["team-a/nosize"]  # nor a PodGroup
    assert "party" in problems["team-a/kind"]
    assert "different resources" in problems["team-a/mixed-0"]


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        ({"namespaces": {"x": "nobody"}}, "namespaces.x: unknown tenant"),
        (
            {"tenants": [{"name": "a", "quotas": {"disk": {"nominal": 1}}}]},
            "unknown resource 'disk'",
        ),
        (
            {"tenants": [{"name": "a", "quotas": {"gpu": {"nominal": "many"}}}]},
            "not a number of cards",
        ),
        ({"default_priority_class": "gold"}, "default_priority_class"),
        ({"tenants": [{"name": "a", "parent": "ghost"}]}, "unknown parent"),
        ({"grace_s": -1}, "grace_s"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_configuration_errors_name_the_field(raw, words):
    with pytest.raises(SpecError) as err:
        parse_config(raw)
    assert words in str(err.value)


def test_a_grant_round_trips_and_a_corrupt_one_is_an_error():
    piece = NodeGrant("n1", 1000, 2048, (DeviceGrant("n1", 2, 50, 20480, False),))
    node = node_from_object(node_obj("n1")).node
    job, policy, back = read_grant(grant_json("team-a/p", piece, node, "fgd"))
    assert (job, policy, back) == ("team-a/p", "fgd", piece)
    assert (
        json.loads(grant_json("team-a/p", piece, node, "fgd"))["devices"][0]["uuid"] == "GPU-n1-2"
    )
    with pytest.raises(SpecError, match=r"gpupool\.io/grant"):
        read_grant('{"job": 1}')


def _bound(pod: dict, node: str, granted: Mapping[str, str]) -> dict:
    pod["spec"]["nodeName"] = node
    pod["metadata"]["annotations"].update(granted)
    return pod


def test_other_schedulers_pods_and_ungranted_pods_hold_their_cards():
    nodes = [node_obj("n1", 4)]
    foreign = pod_obj("web", scheduler="default-scheduler", node="n1", gpus=3)
    d = decide(nodes, [foreign, pod_obj("two", gpus=2)], CONFIG, 0, key=KEY)
    assert not d.binds and "team-a/two" in d.waiting
    d = decide(nodes, [foreign, pod_obj("one", gpus=1)], CONFIG, 0, key=KEY)
    assert [(b.pod, b.node) for b in d.binds] == [("team-a/one", "n1")]
    grant = json.loads(d.binds[0].annotations["gpupool.io/grant"])
    assert grant["devices"][0]["index"] == 0  # the last cards are held


def test_a_half_bound_gang_is_finished_on_its_granted_nodes_not_placed_again():
    nodes = [node_obj("n1", 8), node_obj("n2", 8)]
    pods = [pod_obj(f"g-{i}", gpus=4, annotations=dict(GANG)) for i in range(2)]
    first = decide(nodes, pods, CONFIG, 0, key=KEY)
    grants = {b.pod: b for b in first.binds}
    assert len(grants) == 2 and all(b.gang for b in grants.values())
    for p in pods:  # grants written on both, only g-0 bound: the scheduler stopped there
        p["metadata"]["annotations"].update(grants[f"team-a/{p['metadata']['name']}"].annotations)
    _bound(pods[0], grants["team-a/g-0"].node, {})
    again = decide(nodes, pods, CONFIG, 0, key=KEY)
    assert [(b.pod, b.node, b.action) for b in again.binds] == [
        ("team-a/g-1", grants["team-a/g-1"].node, "resume")
    ]


def test_preempting_a_gang_evicts_every_pod_of_it():
    nodes = [node_obj("n1", 2)]
    pods = [
        pod_obj(f"g-{i}", gpus=1, priority_class="dev-test", annotations=dict(GANG))
        for i in range(2)
    ]
    first = decide(nodes, pods, CONFIG, 0, key=KEY)
    for b, p in zip(sorted(first.binds, key=lambda b: b.pod), pods, strict=True):
        _bound(p, b.node, b.annotations)
    urgent = pod_obj("urgent", gpus=1, priority_class="online-inference")
    d = decide(nodes, [*pods, urgent], CONFIG, 0, key=KEY)
    assert sorted(e.pod for e in d.evictions) == ["team-a/g-0", "team-a/g-1"]
    assert "team-a/urgent" in d.waiting


def test_a_preemption_and_a_bind_in_one_cycle_both_happen():
    """The cycle's preemption named its waiting pods with the loop variable that also held
    the grant key, so a bind after it in the same cycle signed with a pod's name and raised
    AttributeError every second (issue 43): nothing was written, scheduling stayed stuck."""
    nodes = [node_obj("n1", 2), node_obj("n2", 1)]
    gang = [
        pod_obj(f"g-{i}", gpus=1, priority_class="dev-test", annotations=dict(GANG))
        for i in range(2)
    ]
    first = decide([nodes[0]], gang, CONFIG, 0, key=KEY)
    for b, p in zip(sorted(first.binds, key=lambda b: b.pod), gang, strict=True):
        _bound(p, b.node, b.annotations)
    urgent = pod_obj("urgent", gpus=2, priority_class="online-inference")
    small = pod_obj("small", gpus=1)
    small["spec"]["activeDeadlineSeconds"] = 600  # it may be backfilled
    # a day later the urgent pod is starving: its tenant's small pod waits behind it and is
    # backfilled after the preemption, in the same cycle
    d = decide(nodes, [*gang, urgent, small], CONFIG, 86400, key=KEY)
    assert sorted(e.pod for e in d.evictions) == ["team-a/g-0", "team-a/g-1"]
    assert "team-a/urgent" in d.waiting
    (bind,) = d.binds
    assert (bind.pod, bind.node, bind.action) == ("team-a/small", "n2", "backfill")
    _bound(small, bind.node, bind.annotations)
    assert grant_of(small, KEY) is not None  # signed with the key, for this pod


def test_the_memo_gives_the_same_decision_and_follows_new_versions():
    nodes = [node_obj("n1", 8)]
    nodes[0]["metadata"]["resourceVersion"] = "1"
    pods = [pod_obj(f"p{i}", gpus=1) for i in range(3)]
    for i, p in enumerate(pods):
        p["metadata"]["resourceVersion"] = str(10 + i)
    memo = Memo()
    plain = decide(nodes, pods, CONFIG, 0, key=KEY)
    memoised = [decide(nodes, pods, CONFIG, 0, memo, key=KEY) for _ in range(2)]
    again = [b.annotations for m in memoised for b in m.binds]
    assert [b.annotations for b in plain.binds] == again[:3]
    cordoned = node_obj("n1", 8, unschedulable=True)
    cordoned["metadata"]["resourceVersion"] = "2"
    assert not decide([cordoned], pods, CONFIG, 0, memo, key=KEY).binds


def test_a_grant_verifies_only_unchanged_on_the_pod_it_was_signed_for():
    pod = pod_obj("p", gpus=1)
    (b,) = decide([node_obj("n1", 2)], [pod], CONFIG, 0, key=KEY).binds
    assert b.uid == "uid-team-a-p" and set(b.annotations) == {GRANT, SIGNATURE}
    assert grant_of(_bound(pod, "n1", b.annotations), KEY)[0] == "team-a/p"
    with pytest.raises(UnsignedGrant, match="does not match"):
        grant_of(pod, GrantKey.generate())  # another cluster's key
    other = _bound(pod_obj("q", gpus=1), "n1", b.annotations)  # copied onto another pod
    with pytest.raises(UnsignedGrant):
        grant_of(other, KEY)
    changed = json.loads(b.annotations[GRANT])
    changed["devices"][0]["index"] = 1
    pod["metadata"]["annotations"][GRANT] = json.dumps(changed, separators=(",", ":"))
    with pytest.raises(UnsignedGrant):
        grant_of(pod, KEY)
    rotated = GrantKey((GrantKey.generate().keys[0], *KEY.keys))  # a new key first, old kept
    pod["metadata"]["annotations"][GRANT] = b.annotations[GRANT]
    assert grant_of(pod, rotated) is not None


def test_a_running_pod_whose_grant_was_changed_is_evicted_and_blocks_its_node():
    nodes = [node_obj("n1", 2)]
    pod = pod_obj("p", gpus=1)
    (b,) = decide(nodes, [pod], CONFIG, 0, key=KEY).binds
    _bound(pod, "n1", b.annotations)
    forged = json.loads(b.annotations[GRANT])
    forged["devices"] = []  # "I hold nothing": the tenant's card would look free
    pod["metadata"]["annotations"][GRANT] = json.dumps(forged)
    d = decide(nodes, [pod, pod_obj("next", gpus=1)], CONFIG, 0, key=KEY)
    assert [(e.pod, e.event) for e in d.evictions] == [("team-a/p", "GrantAltered")]
    assert "does not match" in d.evictions[0].reason
    assert not d.binds  # until it has gone, none of n1's cards is given to anyone
    pod["metadata"]["deletionTimestamp"] = "2026-12-04T10:00:00Z"
    assert not decide(nodes, [pod], CONFIG, 0, key=KEY).evictions  # evicted once


@pytest.mark.parametrize(
    ("text", "words"),
    [("", "no key"), ("short", "shorter than 32"), ("a" * 40 + "\nb", "line 2")],
)
def test_a_bad_grant_key_is_named(text, words):
    with pytest.raises(SpecError, match=words):
        GrantKey.parse(text, "key-file")


def test_no_grant_key_says_how_to_give_one(monkeypatch, tmp_path):
    monkeypatch.delenv("GPUPOOL_GRANT_KEY", raising=False)
    with pytest.raises(SpecError, match="--grant-key"):
        GrantKey.load(None)
    with pytest.raises(SpecError, match="cannot read"):
        GrantKey.load(str(tmp_path / "missing"))
    (tmp_path / "key").write_text("k" * 64 + "\n")
    assert GrantKey.load(str(tmp_path / "key")).keys == (b"k" * 64,)


def test_a_node_whose_plugin_does_not_share_reads_as_its_cards_whatever_its_replicas_label():
    plain = node_obj("n1", 8)
    plain["metadata"]["labels"].update(
        {"nvidia.com/gpu.replicas": "1", "nvidia.com/gpu.sharing-strategy": "none"}
    )
    assert len(node_from_object(plain).node.devices) == 8


def test_a_reservation_from_the_server_holds_its_cluster_nodes_for_its_tenant():
    """The server's reservations (GET /api/v1/kubernetes/policy) reach the cycle: a pod of
    another tenant is not placed on the held node while the window is open; nodes of the
    reservation outside this cluster are not this scheduler's to hold."""
    from gpupool.kube.policy import Policy

    answer = {
        "tenants": [
            {"name": "team-a", "quotas": {"gpu": [1600, None, None]}},
            {"name": "team-b", "quotas": {"gpu": [1600, None, None]}},
        ],
        "priority_classes": {"training": 500},
        "reservations": [
            {"id": "r-1", "tenant": "team-b", "nodes": ["n1", "standalone-9"],
             "start": 0.0, "end": 1000.0, "cards": None}
        ],
    }  # fmt: skip
    rules = Policy.from_server(answer)
    assert [r.nodes for r in rules.reservations_on(["n1", "n2"])] == [("n1",)]
    nodes = [node_obj("n1", 2), node_obj("n2", 2)]
    d = decide(nodes, [pod_obj("a", gpus=2)], CONFIG, 10.0, policy=rules, key=KEY)
    assert [(b.pod, b.node) for b in d.binds] == [("team-a/a", "n2")]
    d = decide([node_obj("n1", 2)], [pod_obj("a", gpus=2)], CONFIG, 10.0, policy=rules, key=KEY)
    assert not d.binds and "team-a/a" in d.waiting
    d = decide([node_obj("n1", 2)], [pod_obj("a", gpus=2)], CONFIG, 2000.0, policy=rules, key=KEY)
    assert [b.node for b in d.binds] == ["n1"]  # the window over


def test_what_a_tenants_standalone_jobs_hold_counts_against_its_guarantee_here():
    from gpupool.kube.policy import Policy

    answer = {
        "tenants": [{"name": "team-a", "quotas": {"gpu": [300, 0, None]}}],
        "priority_classes": {"training": 500},
        "usage_elsewhere": {"team-a": {"gpu": 200}},  # 2 of its 3 cards, on standalone nodes
    }
    pods = [pod_obj(f"p{i}", gpus=1) for i in range(3)]
    d = decide([node_obj("n1", 8)], pods, CONFIG, 0, policy=Policy.from_server(answer), key=KEY)
    assert len(d.binds) == 1 and len(d.waiting) == 2
    answer["usage_elsewhere"] = {}
    d = decide([node_obj("n1", 8)], pods, CONFIG, 0, policy=Policy.from_server(answer), key=KEY)
    assert len(d.binds) == 3


def _owned(pod: dict) -> dict:
    pod["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": "rs",
            "uid": "rs-1",
            "controller": True,
        }
    ]
    pod["metadata"]["creationTimestamp"] = "1970-01-01T00:00:00Z"
    return pod


def test_defragmentation_moves_a_pod_its_controller_makes_again_never_a_bare_one():
    """Two 4-card nodes, a 2-card pod on each; a 4-card pod within its guarantee waits. With
    moves allowed, the pod a ReplicaSet owns is evicted (its controller makes it again, and it
    lands beside the other) so the waiting pod gets a node whole; a bare pod is never moved."""
    config = parse_config(
        {**CONFIG.model_dump(), "defrag_moves_per_hour": 10, "defrag_after_s": 60}
    )
    nodes = [node_obj("n1", 4), node_obj("n2", 4)]
    running = []
    for i, node in enumerate(nodes):  # one on each node: fragmented
        (b,) = decide([node], [_owned(pod_obj(f"r{i}", gpus=2))], config, 0, key=KEY).binds
        running.append(_bound(_owned(pod_obj(f"r{i}", gpus=2)), b.node, b.annotations))
    big = _owned(pod_obj("big", gpus=4))
    d = decide(nodes, [*running, big], config, 1000.0, key=KEY, defrag_moves=10)
    assert d.moves == 1 and len(d.evictions) == 1 and d.evictions[0].event == "Defragmented"
    assert "team-a/big" in d.waiting and not d.binds
    bare = [
        _bound(pod_obj(p["metadata"]["name"], gpus=2), p["spec"]["nodeName"], dict(annotations))
        for p in running
        if (annotations := p["metadata"]["annotations"])
    ]
    d = decide(nodes, [*bare, big], config, 1000.0, key=KEY, defrag_moves=10)
    assert d.moves == 0 and not d.evictions
    assert "no defragmentation move" in d.waiting["team-a/big"], d.waiting
    d = decide(nodes, [*running, big], config, 1000.0, key=KEY, defrag_moves=0)
    assert d.moves == 0 and not d.evictions  # the hour's moves spent

"""Kueue's scheduling gates (issue 63): a gated pod is not placed (the API server refuses
to bind it) and is said to be gated; ungated, it is placed (pure; the real API server in
tests/e2e/test_kube_scheduling_gates.py)."""

import copy

import yaml

from gpupool.kube.config import parse_config
from gpupool.kube.decide import decide
from gpupool.kube.grants import GrantKey
from tests.support.kube_objects import K8S_CORPUS, node_obj, pod_obj, pod_of

CONFIG = parse_config(
    {
        "namespaces": {"team-a": "team-a"},
        "tenants": [{"name": "team-a", "quotas": {"gpu": {"nominal": 8}}}],
    }
)
KEY = GrantKey.generate()


def test_kueues_gated_pod_waits_said_gated_and_is_placed_once_ungated():
    pod = pod_of(yaml.safe_load((K8S_CORPUS / "20-kueue-gated-pod.yaml").read_text()))
    pod["spec"]["schedulerName"] = "gpupool"
    d = decide([node_obj("n1", 8)], [pod], CONFIG, 0, key=KEY)
    assert not d.binds and "team-a/p" not in d.problems
    assert "kueue.x-k8s.io/admission" in d.gated["team-a/p"]
    ungated = copy.deepcopy(pod)
    del ungated["spec"]["schedulingGates"]
    d = decide([node_obj("n1", 8)], [ungated], CONFIG, 0, key=KEY)
    assert [b.pod for b in d.binds] == ["team-a/p"] and not d.gated


def test_a_gang_half_ungated_waits_for_the_rest_instead_of_being_refused():
    """Kueue removes a workload's gates pod by pod: the ungated ones wait, saying so, where
    they were refused as "1 of 2 pods exist"."""
    gang = {"gpupool.io/gang": "train", "gpupool.io/gang-size": "2"}
    pods = [pod_obj(f"w-{i}", gpus=4, annotations=gang) for i in range(2)]
    pods[1]["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]
    d = decide([node_obj("n1", 8)], pods, CONFIG, 0, key=KEY)
    assert not d.binds and not d.problems
    assert "1 of its pods still scheduling-gated" in d.waiting["team-a/w-0"]
    del pods[1]["spec"]["schedulingGates"]
    d = decide([node_obj("n1", 8)], pods, CONFIG, 0, key=KEY)
    assert sorted(b.pod for b in d.binds) == ["team-a/w-0", "team-a/w-1"]

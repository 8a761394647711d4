"""gpupool's Kubernetes-mode scheduler against a real kube-apiserver (RBAC on), running as
the ServiceAccount of deploy/kubernetes/rbac.yaml."""

import json
import threading

import httpx
import pytest
import yaml

from gpupool.kube.api import ApiError, KubeApi
from tests.support.agents import wait_for
from tests.support.kube_objects import K8S_CORPUS, node_obj, pod_obj


def bound(kube, ns: str, name: str) -> str:
    return kube.pod(ns, name)["spec"].get("nodeName") or ""


def grant(kube, ns: str, name: str) -> dict:
    return json.loads(kube.pod(ns, name)["metadata"]["annotations"]["gpupool.io/grant"])


def messages(kube, ns: str, name: str, reason: str) -> list[str]:
    return [e["message"] for e in kube.events(ns, name) if e["reason"] == reason]


def test_pods_bind_where_the_engine_places_them_with_their_grant(kube, start_scheduler):
    kube.apply(node_obj("a100-1", 8))
    kube.apply(node_obj("t4-1", 4, "T4"))
    start_scheduler()
    kube.apply(pod_obj("two", gpus=2))
    kube.apply(pod_obj("t4", request="gpu=T4:1"))
    kube.apply(pod_obj("plain", cpu="2"))
    wait_for("pods bound", lambda: all(bound(kube, "team-a", p) for p in ("two", "t4", "plain")))
    assert bound(kube, "team-a", "two") == "a100-1"
    assert bound(kube, "team-a", "t4") == "t4-1"
    g = grant(kube, "team-a", "two")
    assert g["node"] == "a100-1" and len(g["devices"]) == 2
    assert all(d["exclusive"] and d["uuid"].startswith("GPU-a100-1-") for d in g["devices"])
    pod = kube.pod("team-a", "two")
    scheduled = [c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert scheduled and scheduled[0]["status"] == "True"


def test_cordoned_and_not_ready_nodes_take_nothing_and_taints_only_the_tolerant(
    kube, start_scheduler
):
    kube.apply(node_obj("cordoned", 8, unschedulable=True))
    kube.apply(node_obj("down", 8, ready=False))
    taint = [{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]
    kube.apply(node_obj("tainted", 8, taints=taint))
    gpu_taint = [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]
    kube.apply(node_obj("gpu-tainted", 1, taints=gpu_taint))
    start_scheduler()
    kube.apply(pod_obj("one", gpus=1))
    kube.apply(pod_obj("two", gpus=1))
    wait_for("one bound", lambda: bound(kube, "team-a", "one") or bound(kube, "team-a", "two"))
    waiting = "two" if bound(kube, "team-a", "one") else "one"
    why = wait_for("a reason", lambda: messages(kube, "team-a", waiting, "FailedScheduling"))
    assert "4 nodes" in why[0] and "not allowed by its node selector" in why[0], why
    placed = {bound(kube, "team-a", "one"), bound(kube, "team-a", "two")} - {""}
    assert placed == {"gpu-tainted"}  # the GPU resource taint is tolerated, others are not
    tolerant = pod_obj("tolerant", gpus=1)
    tolerant["spec"]["tolerations"] = [{"key": "dedicated", "operator": "Equal", "value": "infra"}]
    kube.apply(tolerant)
    wait_for("tolerant bound", lambda: bound(kube, "team-a", "tolerant") == "tainted")


def test_a_gang_binds_all_or_nothing(kube, start_scheduler):
    kube.apply(node_obj("n1", 8))
    start_scheduler()
    big = {"gpupool.io/gang": "big", "gpupool.io/gang-size": "3"}
    for i in range(3):
        kube.apply(pod_obj(f"big-{i}", gpus=4, annotations=big))
    small = {"gpupool.io/gang": "small", "gpupool.io/gang-size": "2"}
    for i in range(2):
        kube.apply(pod_obj(f"small-{i}", gpus=4, annotations=small))
    wait_for("small gang bound", lambda: all(bound(kube, "team-a", f"small-{i}") for i in range(2)))
    wait_for(
        "big gang's reason",
        lambda: any("gang" in m for m in messages(kube, "team-a", "big-0", "FailedScheduling")),
    )
    assert not any(bound(kube, "team-a", f"big-{i}") for i in range(3))
    devices = [d["index"] for i in range(2) for d in grant(kube, "team-a", f"small-{i}")["devices"]]
    assert sorted(devices) == list(range(8))
    cond = next(
        c
        for c in kube.pod("team-a", "big-0")["status"]["conditions"]
        if c["type"] == "PodScheduled"
    )
    assert cond["status"] == "False" and cond["reason"] == "Unschedulable" and cond["message"]


def test_a_higher_priority_pod_preempts_and_the_victim_learns_why(kube, start_scheduler):
    kube.apply(node_obj("n1", 2))
    start_scheduler()
    for i in range(2):
        kube.apply(pod_obj(f"low-{i}", gpus=1, priority_class="dev-test"))
    wait_for("low pods bound", lambda: all(bound(kube, "team-a", f"low-{i}") for i in range(2)))
    kube.apply(pod_obj("urgent", gpus=1, priority_class="online-inference"))
    wait_for("urgent bound", lambda: bound(kube, "team-a", "urgent") == "n1")
    names = {
        p["metadata"]["name"] for p in kube.admin.list("/api/v1/namespaces/team-a/pods")["items"]
    }
    assert len(names & {"low-0", "low-1"}) == 1  # exactly one victim
    victim = ({"low-0", "low-1"} - names).pop()
    preempted = messages(kube, "team-a", victim, "Preempted")
    assert preempted and "team-a/urgent" in preempted[0]


def test_a_namespace_over_quota_waits_with_its_reason_in_an_event(kube, start_scheduler):
    kube.apply(node_obj("n1", 8))
    start_scheduler()
    kube.apply(pod_obj("first", "team-b", gpus=1))
    kube.apply(pod_obj("second", "team-b", gpus=1))
    wait_for(
        "first bound", lambda: bound(kube, "team-b", "first") or bound(kube, "team-b", "second")
    )
    waiting = "second" if bound(kube, "team-b", "first") else "first"
    msg = wait_for("a reason", lambda: messages(kube, "team-b", waiting, "FailedScheduling"))
    assert "quota" in msg[0] or "guarantee" in msg[0] or "borrow" in msg[0], msg[0]
    assert not bound(kube, "team-b", waiting)


def test_bad_pods_get_a_clear_event_and_the_scheduler_goes_on(kube, start_scheduler):
    kube.apply(node_obj("n1", 8))
    s = start_scheduler()
    kube.apply(pod_obj("garbled", request="gpu=lots,mem=20Gi"))
    kube.apply(pod_obj("no-such-slice", request="mig=9g.99gb"))
    kube.apply(pod_obj("stranger", "lab", gpus=1))
    kube.apply(
        pod_obj(
            "odd-gang", gpus=1, annotations={"gpupool.io/gang": "g", "gpupool.io/gang-size": "many"}
        )
    )
    kube.apply(pod_obj("fine", gpus=1))
    wait_for("the good pod bound", lambda: bound(kube, "team-a", "fine"))
    expect = {
        ("team-a", "garbled"): "gpupool.io/request",
        ("team-a", "no-such-slice"): "9g.99gb",
        ("lab", "stranger"): "namespace 'lab' has no gpupool tenant",
        ("team-a", "odd-gang"): "gpupool.io/gang-size",
    }
    for (ns, name), words in expect.items():
        events = wait_for(
            f"{name}'s event",
            lambda ns=ns, name=name: [
                e["message"]
                for e in kube.events(ns, name)
                if e["reason"] in ("InvalidRequest", "FailedScheduling")
            ],
        )
        assert words in events[0], events
        assert not bound(kube, ns, name)
    assert s.stats["cycles"] > 0 and s._threads[2].is_alive()


def test_a_restarted_scheduler_binds_nothing_twice(kube, start_scheduler):
    kube.apply(node_obj("n1", 8))
    kube.apply(node_obj("n2", 8))
    first = start_scheduler()
    for i in range(6):
        kube.apply(pod_obj(f"a-{i}", gpus=2))
    wait_for("first pods bound", lambda: all(bound(kube, "team-a", f"a-{i}") for i in range(6)))
    first.stop()
    second = start_scheduler()
    for i in range(4):
        kube.apply(pod_obj(f"b-{i}", gpus=2))
    for i in range(2):
        kube.apply(pod_obj(f"c-{i}", gpus=2))
    wait_for(
        "all 16 cards granted",
        lambda: sum(1 for p in _pods(kube) if p["spec"].get("nodeName")) == 8,
    )
    taken = [
        (g["node"], d["index"])
        for p in _pods(kube)
        if p["spec"].get("nodeName")
        for g in [json.loads(p["metadata"]["annotations"]["gpupool.io/grant"])]
        for d in g["devices"]
    ]
    assert len(taken) == len(set(taken)) == 16
    assert second.stats["bind_errors"] == 0


class _LinkCutOnFirstBind(KubeApi):
    """The link breaks under the first binding call; later ones go through."""

    def __init__(self, kubeconfig: str):
        super().__init__(kubeconfig)
        self.cuts = 1

    def bind(self, *args, **kwargs) -> None:
        if self.cuts:
            self.cuts -= 1
            raise httpx.ReadError("connection reset by peer")
        super().bind(*args, **kwargs)


def test_a_binding_lost_to_the_network_is_tried_again_within_seconds(kube, start_scheduler):
    kube.apply(node_obj("n1", 8))
    api = _LinkCutOnFirstBind(kube.gpupool_kubeconfig)
    s = start_scheduler(api=api)
    kube.apply(pod_obj("once", gpus=1))
    # nothing about the pod changes after the failed call, and the next resync is 30 s off
    wait_for("bound after the retry", lambda: bound(kube, "team-a", "once"), timeout=8)
    # the API server shows the binding before the scheduler's call returns and counts it
    wait_for("the bind counted", lambda: s.stats["binds"] == 1, timeout=5)
    assert api.cuts == 0 and s.stats["bind_errors"] == 1 and s.stats["binds"] == 1


def test_a_stopped_scheduler_leaves_no_thread_reading_its_connections(kube, start_scheduler):
    """Closing the client under a live watch freed socket numbers its reader then read from,
    taking the bytes of whatever connection got the number next (seen as a TLS 'bad record
    mac' in the scheduler started after)."""
    kube.apply(node_obj("n1", 8))
    s = start_scheduler()
    kube.apply(pod_obj("p", gpus=1))
    wait_for("bound", lambda: bound(kube, "team-a", "p"))
    before = threading.active_count()
    s.stop()
    assert not [t.name for t in s._threads if t.is_alive()]
    assert threading.active_count() < before
    kube.apply(pod_obj("after", gpus=1))  # an event the old watch would have woken on
    fresh = start_scheduler()
    wait_for("bound by the next scheduler", lambda: bound(kube, "team-a", "after"))
    assert fresh.stats["bind_errors"] == 0


def _pods(kube) -> list[dict]:
    return kube.admin.list("/api/v1/namespaces/team-a/pods")["items"]


def test_gpupools_identity_holds_no_more_than_the_manifest_grants(kube):
    api = KubeApi(kube.gpupool_kubeconfig)
    api.list("/api/v1/nodes")
    for method, path in (
        ("GET", "/api/v1/secrets"),
        ("PATCH", "/api/v1/nodes/x"),
        ("POST", "/api/v1/namespaces/team-a/pods"),
    ):
        with pytest.raises(ApiError) as err:
            api.request(
                method,
                path,
                {} if method != "GET" else None,
                content_type="application/merge-patch+json",
            )
        assert err.value.status == 403, (method, path, err.value)


def test_one_leader_at_a_time_and_a_standby_takes_over_when_it_lapses(kube):
    from gpupool.kube.lease import LeaderElector

    a = LeaderElector(
        KubeApi(kube.gpupool_kubeconfig), "a", name="test-lease", duration_s=2, renew_s=0.5
    )
    b = LeaderElector(
        KubeApi(kube.gpupool_kubeconfig), "b", name="test-lease", duration_s=2, renew_s=0.5
    )
    assert a.try_acquire() and a.is_leader()
    assert not b.try_acquire() and not b.is_leader()
    assert a.try_acquire()  # renewal
    wait_for("a's lease to lapse", lambda: b.try_acquire(), timeout=10)
    assert b.is_leader() and not a.try_acquire()
    lease = kube.api.request(
        "GET", "/apis/coordination.k8s.io/v1/namespaces/gpupool-system/leases/test-lease"
    )
    assert lease["spec"]["holderIdentity"] == "b" and lease["spec"]["leaseTransitions"] == 1


def test_manifests_written_for_hami_and_the_device_plugin_get_what_they_ask_or_a_reason(
    kube, start_scheduler
):
    """Real manifests (tests/data/k8s-corpus) through the API server: HAMi's 2 x (30%, 3000
    MiB) is refused naming what to write (beside NVIDIA's device plugin the kubelet would hand
    it two whole cards; tests/e2e/test_kube_node_checks.py has it get its slice); a MIG pod on
    a node without MIG waits saying why instead of being bound with no device; an unknown GPU
    resource is refused by name in an Event; a pod asking a device-plugin replica goes to the
    node of replicas (the GPU operator's time-slicing node, as its docs show it), as a quarter
    card."""
    from tests.support.kube_objects import pod_of

    kube.apply(node_obj("shared", 4, labels={"gpupool.io/sharing": "share"}))
    kube.apply(
        yaml.safe_load((K8S_CORPUS / "nodes/01-gpu-operator-time-slicing-renamed.yaml").read_text())
    )
    replica = pod_obj("replica", cpu="1")
    replica["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu.shared": "1"}
    kube.apply(replica)
    s = start_scheduler()
    for name, file in (("hami", "01-hami-default-use.yaml"), ("mig", "05-hami-mig-example.yaml"),
                       ("vendor", "10-kubernetes-docs-vendor-gpu.yaml")):  # fmt: skip
        pod = pod_of(yaml.safe_load((K8S_CORPUS / file).read_text()))
        pod["metadata"] = {**pod["metadata"], "name": name, "namespace": "team-a"}
        pod["spec"] = {**pod["spec"], "schedulerName": "gpupool"}
        kube.apply({"apiVersion": "v1", "kind": "Pod", **pod})
    wait_for("the replica pod bound", lambda: bound(kube, "team-a", "replica"))
    assert grant(kube, "team-a", "replica")["node"] == "t4-shared"
    assert [d["compute_pct"] for d in grant(kube, "team-a", "replica")["devices"]] == [25]
    said = {
        name: wait_for(
            f"{name}'s event",
            lambda name=name: [
                e["message"]
                for e in kube.events("team-a", name)
                if e["reason"] in ("InvalidRequest", "FailedScheduling")
            ],
        )[0]
        for name in ("mig", "vendor", "hami")
    }
    assert "no 3g.20gb" in said["mig"] and not bound(kube, "team-a", "mig"), said
    assert "'gpu-vendor.example/example-gpu'" in said["vendor"], said
    assert "gpupool.io/slice: 1" in said["hami"] and not bound(kube, "team-a", "hami"), said
    assert not bound(kube, "team-a", "vendor") and s.stats["bind_errors"] == 0

"""Kueue's scheduling gates (issue 63): a pod created with ``spec.schedulingGates`` (Kueue's
``kueue.x-k8s.io/admission`` until it admits the workload) is not for any scheduler yet. The
API server refuses to bind it; gpupool tried anyway (a refused binding every cycle: log
noise). Now it is reported as gated — PodScheduled=False, reason SchedulingGated, as
kube-scheduler writes it, and no Warning — and placed as soon as the gate is removed."""

from tests.support.agents import wait_for
from tests.support.kube_objects import node_obj, pod_obj

GATE = "kueue.x-k8s.io/admission"


def _condition(pod: dict) -> dict:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled":
            return c
    return {}


def test_a_gated_pod_waits_said_so_and_binds_once_its_gate_is_removed(kube, start_scheduler):
    kube.apply(node_obj("n1", 8))
    scheduler = start_scheduler()
    pod = pod_obj("gated", gpus=1, labels={"kueue.x-k8s.io/queue-name": "team-a-queue"})
    pod["spec"]["schedulingGates"] = [{"name": GATE}]
    kube.apply(pod)
    kube.apply(pod_obj("free", gpus=1))  # a cycle runs with the gated pod in it

    def bound(name: str) -> str:
        return kube.pod("team-a", name)["spec"].get("nodeName") or ""

    wait_for("the ungated pod bound", lambda: bound("free"), 30)
    said = wait_for(
        "the gated pod's condition",
        lambda: _condition(kube.pod("team-a", "gated")).get("reason") == "SchedulingGated",
        30,
    )
    assert said and not bound("gated")
    assert GATE in _condition(kube.pod("team-a", "gated"))["message"]
    assert scheduler.stats["bind_errors"] == 0  # no binding the API server refuses
    assert not [e for e in kube.events("team-a", "gated") if e["type"] == "Warning"]

    # Kueue admits the workload: it removes the gate
    kube.api.request(
        "PATCH",
        "/api/v1/namespaces/team-a/pods/gated",
        {"spec": {"schedulingGates": None}},
        content_type="application/strategic-merge-patch+json",
    )
    wait_for("the pod bound once ungated", lambda: bound("gated"), 30)
    assert scheduler.stats["bind_errors"] == 0

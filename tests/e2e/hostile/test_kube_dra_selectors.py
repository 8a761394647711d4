"""A claim's CEL selector is tenant input that gpupool's scheduler evaluates every cycle
(issue 63). Against a real kube-apiserver: a selector the API server accepts (RE2 runs it in
linear time) but whose shape makes Python's backtracking ``re`` exponential, and one reading
a card's UUID, are refused naming what is wrong, and another pod is placed meanwhile. The
strings gpupool matches are catalog names a few dozen characters long, too short to stall
``re`` even without the guard: what this shows is the refusal by name and a cycle that goes
on, not a stall averted. (What RE2 has not, lookahead or backreferences, the API server
refuses at creation; gpupool refuses it too, tests/unit/test_dra_cel.py.)"""

import time

from tests.support.agents import wait_for
from tests.support.kube_objects import node_obj, pod_obj

CLAIMS = "/apis/resource.k8s.io/v1/namespaces/team-a/resourceclaims"
MODEL = 'device.attributes["gpu.gpupool.io"].model'
HOSTILE = {
    "backtrack": f'{MODEL}.matches("^(A+)+$")',  # RE2 is linear here; Python's re is not
    "other-card": 'device.attributes["gpu.gpupool.io"].uuid == "GPU-of-another-tenant"',
}


def _claim(kube, name: str, cel: str | None) -> None:
    exactly: dict = {"deviceClassName": "gpu.gpupool.io"}
    if cel:
        exactly["selectors"] = [{"cel": {"expression": cel}}]
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
    }
    kube.apply(body)
    pod = pod_obj(name, cpu="100m", memory="64Mi")
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": name}]
    pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    kube.apply(pod)


def test_hostile_selectors_are_refused_by_name_and_scheduling_goes_on(kube, start_scheduler):
    kube.apply(node_obj("n1", 4))
    scheduler = start_scheduler(dra=True)
    for name, cel in HOSTILE.items():
        _claim(kube, name, cel)
    started = time.monotonic()
    _claim(kube, "honest", None)

    def bound(name: str) -> str:
        return kube.pod("team-a", name)["spec"].get("nodeName") or ""

    wait_for("the honest pod bound", lambda: bound("honest"), 30)
    assert time.monotonic() - started < 10
    words = {"backtrack": "repeat inside a repeat", "other-card": "'uuid'"}
    for name, expected in words.items():
        said = wait_for(
            f"{name}'s refusal",
            lambda name=name: [
                e["message"] for e in kube.events("team-a", name) if e["reason"] == "InvalidRequest"
            ],
            30,
        )
        assert any(expected in m for m in said) and not bound(name), (name, said)
    assert scheduler.stats["cycles"] > 0

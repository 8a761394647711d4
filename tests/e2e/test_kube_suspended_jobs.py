"""Suspended Jobs (issue 45: a Kueue-suspended Job stayed suspended forever, without a word):
against a real kube-apiserver, as the ServiceAccount of deploy/kubernetes/rbac.yaml, gpupool
says once why a suspended Job whose pods name it waits (suspended_jobs: leave), or resumes it
where it maps the namespace to a tenant (suspended_jobs: admit). Jobs of other schedulers are
not its business."""

import contextlib

from gpupool.kube.api import ApiError
from tests.support.agents import wait_for


def _job(ns: str, name: str, scheduler: str = "gpupool") -> dict:
    """A Job as Kueue's examples write it: suspended, labelled with its queue."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": {"kueue.x-k8s.io/queue-name": "user-queue"},
        },
        "spec": {
            "suspend": True,
            "parallelism": 2,
            "completions": 2,
            "template": {
                "spec": {
                    "schedulerName": scheduler,
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "train",
                            "image": "registry.example/train:1",
                            "resources": {"limits": {"nvidia.com/gpu": "1"}},
                        }
                    ],
                }
            },
        },
    }


def _get(kube, ns: str, name: str) -> dict:
    return kube.api.request("GET", f"/apis/batch/v1/namespaces/{ns}/jobs/{name}")


def _events(kube, ns: str, name: str) -> list[tuple[str, str]]:
    items = kube.api.list(f"/api/v1/namespaces/{ns}/events")["items"]
    return [
        (e["reason"], e["message"])
        for e in items
        if e["involvedObject"]["name"] == name and e["involvedObject"]["kind"] == "Job"
    ]


def _clear_jobs(kube, *namespaces: str) -> None:
    for ns in namespaces:
        with contextlib.suppress(ApiError):  # at once: no garbage collector runs here
            body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}
            kube.api.request("DELETE", f"/apis/batch/v1/namespaces/{ns}/jobs", body)


def test_a_suspended_job_is_explained_once_and_left_to_whoever_resumes_it(kube, start_scheduler):
    try:
        kube.apply(_job("team-a", "kueue-sample"))
        kube.apply(_job("team-a", "not-ours", scheduler="default-scheduler"))
        scheduler = start_scheduler()
        scheduler.jobs.once()
        scheduler.jobs.once()  # told once, not every check
        told = _events(kube, "team-a", "kueue-sample")
        assert len(told) == 1 and told[0][0] == "Suspended"
        assert "does not resume Jobs itself (suspended_jobs: leave)" in told[0][1]
        assert _get(kube, "team-a", "kueue-sample")["spec"]["suspend"] is True
        assert _events(kube, "team-a", "not-ours") == []
    finally:
        _clear_jobs(kube, "team-a")


def test_as_the_admission_it_resumes_jobs_of_its_tenants_only(kube, start_scheduler):
    try:
        kube.apply(_job("team-a", "train"))
        kube.apply(_job("lab", "stray"))  # a namespace no tenant owns
        kube.apply(_job("team-b", "not-ours", scheduler="default-scheduler"))
        scheduler = start_scheduler(suspended_jobs="admit")
        wait_for("the thread's check", lambda: scheduler.jobs.resumed == 1, 15)
        assert _get(kube, "team-a", "train")["spec"]["suspend"] is False
        (resumed,) = _events(kube, "team-a", "train")
        assert resumed[0] == "Resumed" and "under tenant team-a's quota" in resumed[1]
        assert _get(kube, "lab", "stray")["spec"]["suspend"] is True
        (stray,) = _events(kube, "lab", "stray")
        assert "namespace lab is no tenant's" in stray[1]
        assert _get(kube, "team-b", "not-ours")["spec"]["suspend"] is True
    finally:
        _clear_jobs(kube, "team-a", "lab", "team-b")

"""One guarantee per tenant across the server's own nodes and a Kubernetes cluster reporting
to it (issue 48): what a tenant's pods hold in the cluster counts against its guarantee when
the server places its standalone jobs, and what its standalone jobs hold comes to the
cluster's scheduler with the policy."""

import time

from gpupool.kube.policy import Policy
from gpupool.server.settings import Settings
from tests.support.agents import in_state, wait_for
from tests.support.cluster import node_body, ok, submit
from tests.support.live import live_server


def _mirror(srv, pods: int) -> None:
    """A cluster's scheduler reporting one 4-card node and ``pods`` one-card pods of algo."""
    k8s = srv.client(srv.token("cluster-1", "kubernetes"))
    node = {**node_body("k1", cards=4)}
    ok(k8s.put("/api/v1/kubernetes/nodes", json={"nodes": [node]}))
    bound = [
        {"uid": f"u{i}", "pod": f"algo/p{i}", "tenant": "algo", "request": "gpu=1",
         "priority_class": "training", "bound_at": time.time(), "submitted_at": time.time(),
         "placement": {"node": "k1", "cpu_millis": 100, "mem_mib": 64,
                       "devices": [{"device": i, "compute_pct": 100, "mem_mib": 81920,
                                    "exclusive": True}]}}
        for i in range(pods)
    ]  # fmt: skip
    assert ok(k8s.post("/api/v1/kubernetes/pods", json={"bound": bound}))["recorded"] == pods


def test_pods_in_the_cluster_count_against_the_guarantee_of_standalone_jobs(tmp_path):
    settings = Settings(data_dir=tmp_path, log_json=False, cycle_interval_s=0.2)
    with live_server(settings, run_scheduler=True) as srv:
        admin = srv.admin()
        ok(admin.post("/api/v1/tenants", json={"name": "algo"}), 201)
        quota = {"resource": "gpu", "nominal": 3, "borrowing_limit": 0}
        ok(admin.put("/api/v1/tenants/algo/quotas/gpu", json=quota))
        ok(admin.post("/api/v1/nodes", json=node_body("n1", cards=4)))
        _mirror(srv, pods=2)  # 2 of algo's 3 cards are held in the cluster
        first = submit(admin, "gpu=1", "algo", command=["sleep", "60"])
        second = submit(admin, "gpu=1", "algo", command=["sleep", "60"])
        wait_for("one placed", in_state(admin, first["id"], "admitted", "running"), 20)
        time.sleep(1.0)  # several cycles
        waiting = ok(admin.get(f"/api/v1/jobs/{second['id']}"))
        assert waiting["state"] == "pending" and "algo" in waiting["reason"], waiting
        policy = ok(
            srv.client(srv.token("cluster-2", "kubernetes")).get("/api/v1/kubernetes/policy")
        )
        assert policy["usage_elsewhere"]["algo"]["gpu"] == 100  # the standalone job's card
        tree = Policy.from_server(policy).tree()
        assert tree.usage["algo"]["gpu"] == 100  # charged before the cluster's cycle

"""The gpupool server as the state of record for Kubernetes mode: nodes and the pods gpupool
bound are mirrored, metered into usage records when they end, isolated per tenant, and never
given work by the server's own scheduler (a real server on loopback, on SQLite and PostgreSQL,
and a real kube-apiserver)."""

import time

from gpupool.kube.ledger import Ledger
from tests.support.agents import wait_for
from tests.support.kube_objects import node_obj, pod_obj


def _tenants(admin) -> None:
    for body in ({"name": "company"}, {"name": "team-a", "parent": "company"},
                 {"name": "team-b", "parent": "company"}):  # fmt: skip
        assert admin.post("/api/v1/tenants", json=body).status_code == 201


def _ledger(server, scheduler, preempted=None) -> Ledger:
    token = server.token("cluster-1", "kubernetes")
    return Ledger(
        server.url, token, scheduler.config, scheduler.nodes.snapshot, scheduler.pods.snapshot,
        preempted if preempted is not None else scheduler.preempted, key=scheduler.key,
    )  # fmt: skip


def test_pods_are_jobs_of_their_tenant_metered_when_they_end(server, kube, start_scheduler):
    admin = server.admin()
    _tenants(admin)
    kube.apply(node_obj("k1", 8))
    scheduler = start_scheduler()
    kube.apply(pod_obj("train", gpus=2))
    kube.apply(pod_obj("tiny", gpus=1))
    wait_for(
        "bound",
        lambda: all(kube.pod("team-a", p)["spec"].get("nodeName") for p in ("train", "tiny")),
    )
    ledger = _ledger(server, scheduler)
    assert ledger.sync() == {"bound": 2, "ended": 0}
    assert ledger.sync() == {"bound": 0, "ended": 0}  # idempotent
    node = admin.get("/api/v1/nodes/k1").json()
    assert node["source"] == "kubernetes" and len(node["devices"]) == 8
    assert sorted(node["devices_in_use"]) and len(node["devices_in_use"]) == 3
    member = server.client(server.token("alice", "member", "team-a"))
    jobs = {j["name"]: j for j in member.get("/api/v1/jobs").json()["items"]}
    assert set(jobs) == {"team-a/train", "team-a/tiny"}
    assert jobs["team-a/train"]["state"] == "running"
    cards = [c for c in member.get("/api/v1/devices").json() if c["node"] == "k1"]
    held = [c for c in cards if c["holders"]]
    assert len(cards) == 8 and len(held) == 3  # the dashboard's nodes page draws these
    assert {h["tenant"] for c in held for h in c["holders"]} == {"team-a"}
    other = server.client(server.token("bob", "member", "team-b"))
    assert other.get("/api/v1/jobs").json()["items"] == []
    assert other.get(f"/api/v1/jobs/{jobs['team-a/train']['id']}").status_code == 404
    refused = member.post(f"/api/v1/jobs/{jobs['team-a/train']['id']}/cancel")
    assert refused.status_code == 409 and "Kubernetes pod team-a/train" in refused.text
    time.sleep(1.2)  # whole seconds are metered
    kube.delete_pods("team-a")
    wait_for("pods gone", lambda: not scheduler.pods.snapshot())
    assert ledger.sync() == {"bound": 0, "ended": 2}
    usage = admin.get("/api/v1/usage", params={"tenant": "team-a"}).json()["items"]
    train = [u for u in usage if u["job_id"] == jobs["team-a/train"]["id"]]
    assert train and train[0]["model"] == "A100-80G" and train[0]["devices"] == 2
    assert train[0]["device_seconds"] >= 2  # two whole cards for at least a second
    ended = member.get(f"/api/v1/jobs/{jobs['team-a/train']['id']}").json()
    assert ended["state"] == "cancelled" and "deleted" in ended["reason"]


def test_the_servers_own_scheduler_gives_kubernetes_nodes_no_work(
    sqlite_server, kube, start_scheduler
):
    admin = sqlite_server.admin()
    _tenants(admin)
    kube.apply(node_obj("k1", 8))
    scheduler = start_scheduler()
    _ledger(sqlite_server, scheduler).sync()
    member = sqlite_server.client(sqlite_server.token("alice", "member", "team-a"))
    r = member.post("/api/v1/jobs", json={"request": "gpu=1", "command": ["true"]})
    if r.status_code == 201:  # accepted: it must still not be placed on the cluster's node
        sqlite_server.cycle()
        job = member.get(f"/api/v1/jobs/{r.json()['id']}").json()
        assert job["state"] == "pending", job
    else:
        assert r.status_code == 422 and "never" in r.text, r.text


def test_a_restarted_reporter_ends_what_ended_while_it_was_away(
    sqlite_server, kube, start_scheduler
):
    admin = sqlite_server.admin()
    _tenants(admin)
    kube.apply(node_obj("k1", 8))
    scheduler = start_scheduler()
    for name in ("keep", "gone", "victim"):
        kube.apply(pod_obj(name, gpus=1))
    wait_for(
        "bound", lambda: sum(1 for p in scheduler.pods.snapshot() if p["spec"].get("nodeName")) == 3
    )
    assert _ledger(sqlite_server, scheduler).sync()["bound"] == 3
    uid = {p["metadata"]["name"]: p["metadata"]["uid"] for p in scheduler.pods.snapshot()}
    for name in ("gone", "victim"):
        kube.admin.delete_pod("team-a", name, 0)
    wait_for("deleted", lambda: len(scheduler.pods.snapshot()) == 1)
    fresh = _ledger(sqlite_server, scheduler, {uid["victim"]: "preempted by team-a/urgent"})
    assert fresh.sync() == {"bound": 0, "ended": 2}
    jobs = {
        j["name"]: j for j in admin.get("/api/v1/jobs", params={"tenant": "team-a"}).json()["items"]
    }
    assert jobs["team-a/keep"]["state"] == "running"
    assert jobs["team-a/gone"]["state"] == "cancelled"
    events = admin.get(f"/api/v1/jobs/{jobs['team-a/victim']['id']}/events").json()
    assert [e["to_state"] for e in events] == ["running", "preempted", "cancelled"]
    assert "team-a/urgent" in events[1]["reason"]


def test_reports_are_checked_and_the_role_reaches_nothing_else(sqlite_server):
    admin = sqlite_server.admin()
    _tenants(admin)
    token = sqlite_server.token("cluster-1", "kubernetes")
    k8s = sqlite_server.client(token)
    assert k8s.get("/api/v1/jobs").status_code == 403
    assert k8s.get("/api/v1/tenants").status_code == 403
    member = sqlite_server.client(sqlite_server.token("alice", "member", "team-a"))
    assert member.get("/api/v1/kubernetes/pods").status_code == 403
    grant = {"node": "nowhere", "cpu_millis": 1000, "mem_mib": 1024, "devices": []}
    pod = {"uid": "u1", "pod": "team-a/p", "tenant": "team-a", "request": "gpu=1",
           "priority_class": "training", "placement": grant, "bound_at": 1.0,
           "submitted_at": 1.0}  # fmt: skip
    r = k8s.post("/api/v1/kubernetes/pods", json={"bound": [pod]})
    assert r.status_code == 422 and "is not a Kubernetes node mirrored from" in r.text
    r = k8s.post("/api/v1/kubernetes/pods", json={"bound": [{**pod, "tenant": "ghost"}]})
    assert r.status_code == 422 and "unknown tenant 'ghost'" in r.text
    r = k8s.post("/api/v1/kubernetes/pods", json={"bound": [{**pod, "uid": "../etc"}]})
    assert r.status_code == 422
    agent_node = {"name": "n1", "cpu_millis": 1000, "memory_mib": 1024, "devices": []}
    assert admin.post("/api/v1/nodes", json=agent_node).status_code == 200
    r = k8s.put("/api/v1/kubernetes/nodes", json={"nodes": [agent_node]})
    assert r.status_code == 409 and "an agent's node" in r.text


def test_tenants_and_quotas_from_the_server_decide_for_the_cluster(
    sqlite_server, kube, start_scheduler
):
    admin = sqlite_server.admin()
    _tenants(admin)
    quota = {"resource": "gpu", "nominal": 1, "borrowing_limit": 0}
    assert admin.put("/api/v1/tenants/team-a/quotas/gpu", json=quota).status_code == 200
    kube.apply(node_obj("k1", 8))
    scheduler = start_scheduler(tenants_from="server", tenants=[])
    kube.apply(pod_obj("one", gpus=1))
    kube.apply(pod_obj("two", gpus=1))
    time.sleep(1.0)
    assert not any(p["spec"].get("nodeName") for p in scheduler.pods.snapshot())  # no tenants yet
    ledger = _ledger(sqlite_server, scheduler)
    ledger.on_policy = scheduler.set_policy
    ledger.sync()
    wait_for(
        "one bound",
        lambda: sum(1 for p in scheduler.pods.snapshot() if p["spec"].get("nodeName")) == 1,
    )
    waiting = next(
        p["metadata"]["name"] for p in scheduler.pods.snapshot() if not p["spec"].get("nodeName")
    )
    why = wait_for("its reason", lambda: [e["message"] for e in kube.events("team-a", waiting)])
    assert "team-a" in why[0] and "1/1" in why[0], why
    quota["nominal"] = 2
    assert admin.put("/api/v1/tenants/team-a/quotas/gpu", json=quota).status_code == 200
    ledger.sync()
    wait_for(
        "both bound", lambda: all(p["spec"].get("nodeName") for p in scheduler.pods.snapshot())
    )


def test_a_reservation_made_on_the_server_holds_the_clusters_node(
    sqlite_server, kube, start_scheduler
):
    """`gpupool reservation create` on a mirrored node: the cluster's scheduler, taking its
    policy from the server, keeps other tenants' pods off it while the window is open."""
    admin = sqlite_server.admin()
    _tenants(admin)
    kube.apply(node_obj("k1", 8))
    scheduler = start_scheduler(tenants_from="server", tenants=[])
    ledger = _ledger(sqlite_server, scheduler)
    ledger.on_policy = scheduler.set_policy
    ledger.sync()  # mirrors k1 on the server
    now = time.time()
    body = {"tenant": "team-b", "nodes": ["k1"], "start": now + 1, "end": now + 3600}
    r = admin.post("/api/v1/reservations", json=body)
    assert r.status_code in (200, 201), r.text
    ledger.sync()
    time.sleep(1.5)  # the window opens
    kube.apply(pod_obj("other", gpus=1))
    why = wait_for("its reason", lambda: [e["message"] for e in kube.events("team-a", "other")])
    assert "k1 reserved by r-" in why[0] and "team-b" in why[0], why
    assert not kube.pod("team-a", "other")["spec"].get("nodeName")


def test_a_pod_asking_through_a_claim_is_recorded_with_what_it_holds(server, kube, start_scheduler):
    """DRA mode: the server's job for a pod with a ResourceClaim says the claim's request
    (the pod's containers ask no GPU), and its cards are held on the server's node view."""
    from tests.e2e.test_kube_dra_claims import claim_pod

    admin = server.admin()
    _tenants(admin)
    kube.apply(node_obj("k1", 8))
    scheduler = start_scheduler(dra=True)
    claim_pod(kube, "two", "gpu.gpupool.io", count=2)
    wait_for("bound", lambda: kube.pod("team-a", "two")["spec"].get("nodeName"))
    token = server.token("cluster-1", "kubernetes")
    ledger = Ledger(
        server.url, token, scheduler.config, scheduler.nodes.snapshot, scheduler.reported_pods,
        scheduler.preempted, key=scheduler.key,
    )  # fmt: skip
    assert ledger.sync() == {"bound": 1, "ended": 0}
    member = server.client(server.token("alice", "member", "team-a"))
    (job,) = member.get("/api/v1/jobs").json()["items"]
    assert job["name"] == "team-a/two" and job["request"].startswith("gpu=2,"), job
    assert len(admin.get("/api/v1/nodes/k1").json()["devices_in_use"]) == 2


def _west(config, key):
    """A second cluster, "west": its node and two one-card pods of team-a as its own
    scheduler (the same pure decision) bound them."""
    from gpupool.kube.decide import decide

    nodes = [node_obj("w1", 4), node_obj("w2", 4, ready=False)]  # w2 idle: nothing holds it
    pods = [pod_obj(f"west-{i}", gpus=1) for i in range(2)]
    for b in decide(nodes, pods, config, time.time(), key=key).binds:
        pod = next(p for p in pods if f"team-a/{p['metadata']['name']}" == b.pod)
        pod["spec"]["nodeName"] = b.node
        pod["metadata"]["annotations"].update(b.annotations)
        pod["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    assert all(p["spec"].get("nodeName") == "w1" for p in pods)
    return nodes, pods


def test_two_clusters_report_to_one_server_and_keep_both_node_sets(
    sqlite_server, kube, start_scheduler
):
    """Each cluster's node report replaced the server's whole set of Kubernetes nodes: a
    second cluster removed the first's. Named clusters keep theirs, a restarted reporter ends
    only its own cluster's pods, each cluster's scheduler is charged what the tenant holds in
    the other (one guarantee), and a node name both use is refused naming whose it is."""
    admin = sqlite_server.admin()
    _tenants(admin)
    kube.apply(node_obj("k1", 8))
    scheduler = start_scheduler()
    kube.apply(pod_obj("east-0", gpus=3))
    wait_for("bound", lambda: kube.pod("team-a", "east-0")["spec"].get("nodeName") == "k1")
    tokens = {c: sqlite_server.token(c, "kubernetes") for c in ("east", "west")}
    east_config = scheduler.config.model_copy(update={"cluster": "east"})
    west_config = scheduler.config.model_copy(update={"cluster": "west"})
    west_nodes, west_pods = _west(west_config, scheduler.key)

    def reporter(config, nodes, pods) -> Ledger:
        token = tokens[config.cluster]  # a named cluster reports with a token of its name
        return Ledger(sqlite_server.url, token, config, nodes, pods, {}, key=scheduler.key)

    east = reporter(east_config, scheduler.nodes.snapshot, scheduler.pods.snapshot)
    west = reporter(west_config, lambda: west_nodes, lambda: west_pods)
    assert east.sync() == {"bound": 1, "ended": 0}
    assert west.sync() == {"bound": 2, "ended": 0}
    # each reports again from scratch (a restart): neither removes the other's nodes or pods
    for config, nodes_of, pods_of in (
        (east_config, scheduler.nodes.snapshot, scheduler.pods.snapshot),
        (west_config, lambda: west_nodes, lambda: west_pods),
    ):
        assert reporter(config, nodes_of, pods_of).sync() == {"bound": 0, "ended": 0}
        nodes = {n["name"]: n for n in admin.get("/api/v1/nodes").json()["items"]}
        assert {"k1", "w1", "w2"} <= set(nodes), nodes.keys()
        assert nodes["w1"]["schedulable"] and nodes["w2"]["drain_reason"] == "not Ready"
    assert nodes["k1"]["labels"]["gpupool.io/cluster"] == "east"
    assert nodes["w1"]["labels"]["gpupool.io/cluster"] == "west"
    jobs = admin.get("/api/v1/jobs", params={"tenant": "team-a"}).json()["items"]
    assert sorted((j["name"], j["state"]) for j in jobs) == [
        ("team-a/east-0", "running"), ("team-a/west-0", "running"),
        ("team-a/west-1", "running")]  # fmt: skip
    # west's pods end: only west's jobs end
    assert reporter(west_config, lambda: [], lambda: []).sync()["ended"] == 2
    jobs = {j["name"]: j["state"] for j in admin.get("/api/v1/jobs",
            params={"tenant": "team-a"}).json()["items"]}  # fmt: skip
    assert jobs == {"team-a/east-0": "running", "team-a/west-0": "cancelled",
                    "team-a/west-1": "cancelled"}  # fmt: skip
    assert "k1" in {n["name"] for n in admin.get("/api/v1/nodes").json()["items"]}
    # one guarantee: what team-a holds in east is charged by west's scheduler, and back
    k8s = {c: sqlite_server.client(t) for c, t in tokens.items()}
    policy = k8s["west"].get("/api/v1/kubernetes/policy", params={"cluster": "west"}).json()
    assert policy["usage_elsewhere"]["team-a"]["gpu"] == 300  # east's 3 cards
    policy = k8s["east"].get("/api/v1/kubernetes/policy", params={"cluster": "east"}).json()
    assert "team-a" not in policy["usage_elsewhere"]  # west's pods ended
    clash = {"name": "k1", "cpu_millis": 1000, "memory_mib": 1024, "devices": []}
    r = k8s["west"].put(
        "/api/v1/kubernetes/nodes", params={"cluster": "west"}, json={"nodes": [clash]}
    )
    assert r.status_code == 200 and r.json()["nodes"] == 0, r.text
    assert "mirrored from cluster 'east'" in r.json()["refused"][0], r.text
    r = k8s["west"].get("/api/v1/kubernetes/pods", params={"cluster": "West!"})
    assert r.status_code == 422

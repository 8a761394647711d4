"""Roles and tenant isolation, endpoint by endpoint; tokens and the audit log."""

import sqlite3

from tests.support.cluster import ok, seed_cluster, started, submit


def _teams(server):
    admin = server.admin()
    seed_cluster(admin, nodes=1, tenants={"a": 2, "b": 2})
    ok(admin.post("/api/v1/tenants", json={"name": "a-proj", "parent": "a"}), 201)
    return {
        "admin": admin,
        "a": server.client(server.token("alice", "member", "a")),
        "b": server.client(server.token("bob", "member", "b")),
        "a_admin": server.client(server.token("ann", "tenant-admin", "a")),
        "a_viewer": server.client(server.token("vic", "viewer", "a")),
        "finance": server.client(server.token("fin", "finance")),
        "agent": server.client(server.token("agent0", "agent", node="n0")),
    }


def test_member_cannot_see_or_touch_another_tenants_jobs(server):
    c = _teams(server)
    job_b = submit(c["b"], "gpu=1")  # bob's token defaults to tenant b
    assert job_b["tenant"] == "b"
    server.cycle()
    jid = job_b["id"]
    for path in (f"/api/v1/jobs/{jid}", f"/api/v1/jobs/{jid}/events", f"/api/v1/jobs/{jid}/logs"):
        assert c["a"].get(path).status_code == 404, path
        assert c["b"].get(path).status_code == 200, path
    assert c["a"].post(f"/api/v1/jobs/{jid}/cancel").status_code == 404
    assert ok(c["a"].get("/api/v1/jobs"))["total"] == 0
    assert ok(c["a"].get("/api/v1/jobs", params={"tenant": "b"}))["total"] == 0
    assert ok(c["a"].get("/api/v1/queue"))["total"] == 0
    assert ok(c["a"].get("/api/v1/allocations"))["total"] == 0
    assert ok(c["b"].get("/api/v1/allocations"))["total"] == 1
    r = c["a"].post("/api/v1/jobs", json={"request": "gpu=1", "tenant": "b"})
    assert r.status_code == 403
    assert ok(c["admin"].get(f"/api/v1/jobs/{jid}"))["state"] == "admitted"


def test_quotas_and_usage_are_tenant_scoped(server):
    c = _teams(server)
    job = submit(c["b"], "gpu=1")
    server.cycle()
    started(c["admin"], job)
    ok(c["b"].post(f"/api/v1/jobs/{job['id']}/cancel"))
    assert c["a"].get("/api/v1/tenants/b").status_code == 404
    names = {t["name"] for t in ok(c["a"].get("/api/v1/tenants"))["items"]}
    assert names == {"a", "a-proj"}
    assert ok(c["a"].get("/api/v1/usage"))["total"] == 0
    assert ok(c["b"].get("/api/v1/usage"))["total"] == 1
    assert ok(c["finance"].get("/api/v1/usage"))["total"] == 1
    summary = ok(c["a"].get("/api/v1/usage/summary"))["items"]
    assert summary == []
    quota = {"resource": "gpu", "nominal": 10}
    assert c["a"].put("/api/v1/tenants/a/quotas/gpu", json=quota).status_code == 403
    assert c["a"].put("/api/v1/tenants/b/quotas/gpu", json=quota).status_code == 404
    # a tenant-admin manages below its tenant, never its own guarantee
    assert c["a_admin"].put("/api/v1/tenants/a/quotas/gpu", json=quota).status_code == 403
    ok(
        c["a_admin"].put(
            "/api/v1/tenants/a-proj/quotas/gpu", json={"resource": "gpu", "nominal": 1}
        )
    )
    assert c["a_admin"].put("/api/v1/tenants/b/quotas/gpu", json=quota).status_code == 404


def test_roles_limit_what_each_token_does(server):
    c = _teams(server)
    assert c["a_viewer"].post("/api/v1/jobs", json={"request": "gpu=1"}).status_code == 403
    assert c["a_viewer"].get("/api/v1/jobs").status_code == 200
    assert (
        c["finance"].post("/api/v1/jobs", json={"request": "gpu=1", "tenant": "a"}).status_code
        == 403
    )
    assert c["agent"].get("/api/v1/jobs").status_code == 403
    assert c["agent"].get("/api/v1/usage").status_code == 403
    body = {"name": "n9", "cpu_millis": 1000, "memory_mib": 1024}
    assert c["agent"].post("/api/v1/nodes", json=body).status_code == 403  # not its node
    assert c["a"].post("/api/v1/nodes", json=body).status_code == 403
    assert c["a"].patch("/api/v1/nodes/n0", json={"schedulable": False}).status_code == 403
    assert c["a"].get("/api/v1/audit").status_code == 403
    assert c["a"].post("/api/v1/tenants", json={"name": "x"}).status_code == 403
    assert (
        c["a_admin"].post("/api/v1/tenants", json={"name": "x", "parent": "b"}).status_code == 403
    )
    ok(c["a_admin"].post("/api/v1/tenants", json={"name": "a-x", "parent": "a"}), 201)
    r = c["a_admin"].post("/api/v1/users", json={"name": "eve", "role": "admin"})
    assert r.status_code == 403
    r = c["a_admin"].post("/api/v1/users", json={"name": "carl", "role": "member", "tenant": "b"})
    assert r.status_code == 403
    made = ok(
        c["a_admin"].post("/api/v1/users", json={"name": "dan", "role": "member", "tenant": "a-x"}),
        201,
    )
    assert ok(server.client(made["token"]).get("/api/v1/jobs"))["total"] == 0
    assert server.client().get("/api/v1/jobs").status_code == 401
    assert server.client("gp_not-a-token").get("/api/v1/jobs").status_code == 401


def test_tokens_are_stored_hashed_and_can_be_revoked(tmp_path):
    from gpupool.server.settings import Settings
    from tests.support.live import live_server

    with live_server(Settings(data_dir=tmp_path, log_json=False)) as server:
        admin = server.admin()
        made = ok(admin.post("/api/v1/users", json={"name": "fin", "role": "finance"}), 201)
        token = made["token"]
        fin = server.client(token)
        assert fin.get("/api/v1/usage").status_code == 200
        raw = (tmp_path / "gpupool.db").read_bytes() + (
            (tmp_path / "gpupool.db-wal").read_bytes()
            if (tmp_path / "gpupool.db-wal").exists()
            else b""
        )
        assert token.encode() not in raw and server.admin_token.encode() not in raw
        mine = ok(fin.get("/api/v1/tokens"))
        assert [t["user"] for t in mine] == ["fin"]
        assert fin.delete(f"/api/v1/tokens/{mine[0]['id']}").status_code == 204
        assert fin.get("/api/v1/usage").status_code == 401
        db = sqlite3.connect(tmp_path / "gpupool.db")
        hashes = [h for (h,) in db.execute("select token_hash from api_tokens")]
        assert all(len(h) == 64 for h in hashes)


def test_audit_log_records_every_mutating_call(server):
    admin = server.admin()
    seed_cluster(admin, nodes=1, tenants={"a": 1})
    alice = server.client(server.token("alice", "member", "a"))
    job = submit(alice, "gpu=1")
    alice.post(f"/api/v1/jobs/{job['id']}/cancel")
    alice.post("/api/v1/jobs", json={"request": "gpu=two"})  # refused: still audited
    alice.put("/api/v1/tenants/a/quotas/gpu", json={"resource": "gpu", "nominal": 9})
    alice.get("/api/v1/jobs")  # reads are not audited
    entries = ok(admin.get("/api/v1/audit", params={"actor": "alice"}))["items"]
    seen = [(e["action"], e["result"]) for e in reversed(entries)]
    assert seen == [
        ("POST /api/v1/jobs", 201),
        ("POST /api/v1/jobs/{job_id}/cancel", 200),
        ("POST /api/v1/jobs", 422),
        ("PUT /api/v1/tenants/{name}/quotas/{resource}", 403),
    ]
    first = entries[-1]
    assert first["target"] == f"/api/v1/jobs -> job {job['id']}"
    assert first["client"] == "127.0.0.1" and first["role"] == "member"
    everyone = ok(admin.get("/api/v1/audit", params={"limit": 1000}))["items"]
    assert any(e["action"] == "POST /api/v1/nodes" and e["actor"] == "root" for e in everyone)

"""The fair-share routes (sshare, sprio: issue 64) within the caller's tenants: a member of
team a sees its own subtree's rows and its own pending jobs, never team b's (their names,
usage, jobs), and no figure that compares it with b; asking for b by name returns nothing."""

import time

import httpx

from gpupool.server.settings import Settings
from tests.support.cluster import ok, seed_cluster, started, submit
from tests.support.live import live_server

SECRET_TEAM = "b-secret-team"


def _agent(server, node: str) -> httpx.Client:
    return server.client(server.token(f"agent-{node}", "agent", node=node))


def test_a_member_sees_its_own_subtree_and_jobs_only(tmp_path):
    settings = Settings(data_dir=tmp_path, log_json=False, fairshare_half_life_h=24.0)
    with live_server(settings) as server:
        admin = server.admin()
        seed_cluster(admin, nodes=1, cards=4, tenants={})
        ok(admin.post("/api/v1/tenants", json={"name": "org"}), 201)
        for team in ("a", "b"):  # siblings: each borrows what the other leaves idle
            ok(admin.post("/api/v1/tenants", json={"name": team, "parent": "org"}), 201)
            quota = {"resource": "gpu", "nominal": 2}
            ok(admin.put(f"/api/v1/tenants/{team}/quotas/gpu", json=quota))
        ok(admin.post("/api/v1/tenants", json={"name": "a-proj", "parent": "a"}), 201)
        ok(admin.post("/api/v1/tenants", json={"name": SECRET_TEAM, "parent": "b"}), 201)
        now = time.time()
        used = submit(admin, "gpu=3", "b")  # b borrowed one of a's cards; metered
        server.cycle(now - 7200)
        alloc = started(admin, used)
        body = {"generation": alloc["generation"], "state": "succeeded", "exit_code": 0,
                "ended_at": now - 3600, "node": "n0"}  # fmt: skip
        ok(_agent(server, "n0").post(f"/api/v1/allocations/{alloc['id']}/status", json=body))
        mine = submit(admin, "gpu=2", "a-proj", name="a-job")
        theirs = submit(admin, "gpu=2", SECRET_TEAM, name="b-job")

        every = ok(admin.get("/api/v1/fairshare"))
        assert every["active"] and every["half_life_h"] == 24.0
        names = {r["tenant"] for r in every["items"]}
        assert {"a", "a-proj", "b", SECRET_TEAM} <= names
        b_row = next(r for r in every["items"] if r["tenant"] == "b")
        assert b_row["raw_usage"] > 0 and b_row["norm_usage"] == 1.0  # the control
        a_row = next(r for r in every["items"] if r["tenant"] == "a")
        assert a_row["fairshare"] > b_row["fairshare"]  # b borrowed, a did not
        assert {p["job_id"] for p in ok(admin.get("/api/v1/priority"))["items"]} == {
            mine["id"], theirs["id"]}  # fmt: skip

        for role in ("member", "viewer", "finance", "tenant-admin"):
            caller = server.client(server.token(f"{role}-a", role, "a"))
            r = caller.get("/api/v1/fairshare")
            shown = ok(r)
            assert {row["tenant"] for row in shown["items"]} == {"a", "a-proj"}, role
            assert "b-secret" not in r.text and '"b"' not in r.text, role
            top = next(row for row in shown["items"] if row["tenant"] == "a")
            assert top["norm_usage"] is None and top["level_fs"] is None, role  # compares to b
            proj = next(row for row in shown["items"] if row["tenant"] == "a-proj")
            assert proj["norm_usage"] is not None, role  # its siblings are a's own
            r = caller.get("/api/v1/priority")
            assert [p["job_id"] for p in ok(r)["items"]] == [mine["id"]], role
            assert "b-secret" not in r.text, role
            r = caller.get("/api/v1/priority", params={"tenant": SECRET_TEAM})
            assert ok(r)["items"] == [], role

        agent = _agent(server, "n0")
        assert agent.get("/api/v1/fairshare").status_code == 403
        assert agent.get("/api/v1/priority").status_code == 403
        assert server.client().get("/api/v1/fairshare").status_code == 401

"""Advisory mode end to end on a real server: an action switched to advisory is proposed, not
taken; approved, it goes ahead; rejected, the job is held; undecided, the proposal expires;
each decision names who made it. Bad calls get clear errors."""

import time

from gpupool.server.settings import Settings
from tests.support.cluster import node_body, ok, submit
from tests.support.live import live_server

TTL = 600.0


def _setup(srv, cards: int = 2):
    admin = srv.admin()
    ok(admin.post("/api/v1/tenants", json={"name": "algo"}), 201)
    ok(admin.post("/api/v1/nodes", json=node_body("n0", cards=cards)))
    return admin


def _job(admin, job):
    return ok(admin.get(f"/api/v1/jobs/{job['id']}"))


def _proposals(admin, state=None):
    params = {"state": state} if state else {}
    return ok(admin.get("/api/v1/proposals", params=params))["items"]


def test_a_bind_is_proposed_approved_then_carried_out(tmp_path):
    settings = Settings(data_dir=tmp_path, log_json=False, proposal_ttl_s=TTL)
    with live_server(settings) as srv:
        admin = _setup(srv)
        assert ok(admin.get("/api/v1/advisory")) == {
            "advisory": [],
            "acting": ["bind", "preempt", "reclaim", "defragment", "mode-switch", "scale-in"],
        }
        said = ok(admin.put("/api/v1/advisory", json={"actions": {"bind": True}}))
        assert said["advisory"] == ["bind"]
        job = submit(admin, "gpu=1", "algo")
        srv.cycle()
        srv.cycle()  # still one proposal, not one a cycle
        (p,) = _proposals(admin)
        assert (p["job_id"], p["action"], p["state"]) == (job["id"], "bind", "pending")
        assert p["gain"].startswith("1 card to work on n0") and p["detail"]["victims"] == []
        assert _job(admin, job)["state"] == "pending"
        assert _job(admin, job)["reason"] == f"waiting for approval: proposal {p['id']} (bind)"
        decided = ok(admin.post(f"/api/v1/proposals/{p['id']}/approve"))
        assert decided["state"] == "approved" and decided["decided_by"] == "root"
        srv.cycle()
        assert _job(admin, job)["state"] == "admitted"
        (done,) = _proposals(admin)
        assert done["state"] == "done" and done["done_at"] is not None
        again = ok(admin.post(f"/api/v1/proposals/{p['id']}/approve"), 409)
        assert "is done, not pending" in again["detail"]
        # back to acting: the next job is bound without a proposal
        ok(admin.put("/api/v1/advisory", json={"actions": {"bind": False}}))
        other = submit(admin, "gpu=1", "algo")
        srv.cycle()
        assert _job(admin, other)["state"] == "admitted" and len(_proposals(admin)) == 1
        audit = ok(admin.get("/api/v1/audit", params={"limit": 50}))["items"]
        assert any("/proposals/" in a["target"] and a["actor"] == "root" for a in audit)


def test_a_rejection_holds_the_job_and_an_undecided_proposal_expires(tmp_path):
    settings = Settings(data_dir=tmp_path, log_json=False, proposal_ttl_s=TTL)
    with live_server(settings) as srv:
        admin = _setup(srv)
        ok(admin.put("/api/v1/advisory", json={"actions": {"bind": True}}))
        a, b = submit(admin, "gpu=1", "algo"), submit(admin, "gpu=1", "algo")
        srv.cycle()
        by_job = {p["job_id"]: p for p in _proposals(admin)}
        ok(admin.post(f"/api/v1/proposals/{by_job[a['id']]['id']}/reject"))
        srv.cycle()
        assert _job(admin, a)["state"] == "pending"
        assert "rejected by root" in _job(admin, a)["reason"]
        assert len(_proposals(admin, "pending")) == 1  # b's, still undecided
        later = time.time() + TTL + 1
        srv.cycle(later)
        states = {(p["job_id"], p["state"]) for p in _proposals(admin)}
        assert (b["id"], "expired") in states and (a["id"], "rejected") in states
        # past their time both jobs are proposed again, once each
        assert {p["job_id"] for p in _proposals(admin, "pending")} == {a["id"], b["id"]}
        assert _job(admin, b)["state"] == "pending"


def test_a_preemption_is_proposed_and_the_victim_runs_until_approved(tmp_path):
    settings = Settings(data_dir=tmp_path, log_json=False, proposal_ttl_s=TTL)
    with live_server(settings) as srv:
        admin = _setup(srv, cards=1)
        ok(admin.put("/api/v1/advisory", json={"actions": {"preempt": True}}))
        low = submit(admin, "gpu=1", "algo", priority_class="dev-test")
        srv.cycle()  # binding is not advisory: it runs
        assert _job(admin, low)["state"] == "admitted"
        high = submit(admin, "gpu=1", "algo", priority_class="online-inference")
        srv.cycle()
        (p,) = _proposals(admin)
        assert p["action"] == "preempt" and p["detail"]["victims"] == [str(low["id"])]
        assert "stops 1 job first" in p["gain"]
        assert _job(admin, low)["state"] == "admitted"  # untouched while undecided
        ok(admin.post(f"/api/v1/proposals/{p['id']}/approve"))
        srv.cycle()
        assert _job(admin, low)["state"] == "pending"  # preempted and requeued
        assert _job(admin, high)["state"] == "admitted"


def test_bad_calls_get_clear_errors(tmp_path):
    settings = Settings(data_dir=tmp_path, log_json=False)
    with live_server(settings) as srv:
        admin = _setup(srv)
        bad = admin.put("/api/v1/advisory", json={"actions": {"scale-up": True}})
        assert bad.status_code == 422 and "scale-up" in bad.text
        assert admin.put("/api/v1/advisory", json={"actions": "bind"}).status_code == 422
        missing = ok(admin.post("/api/v1/proposals/99/approve"), 404)
        assert "proposal 99" in missing["detail"]
        member = srv.client(srv.token("dev", "member", tenant="algo"))
        refused = member.get("/api/v1/proposals")
        assert refused.status_code == 403 and "needs role admin" in refused.json()["detail"]
        assert member.put("/api/v1/advisory", json={"actions": {}}).status_code == 403


def test_the_cli_sets_advisory_mode_and_decides_proposals(tmp_path):
    from tests.support.cli import gpupool

    settings = Settings(data_dir=tmp_path, log_json=False, proposal_ttl_s=TTL)
    with live_server(settings) as srv:
        admin = _setup(srv)
        env = {"GPUPOOL_SERVER": srv.url, "GPUPOOL_TOKEN": srv.admin_token, "COLUMNS": "80"}
        out = gpupool("advisory", "set", "bind=on", "defragment=on", env=env)
        assert out.returncode == 0 and "proposed, not taken: bind, defragment" in out.stdout
        bad = gpupool("advisory", "set", "bind=yes", env=env)
        assert bad.returncode == 2 and "is not ACTION=on|off" in bad.stderr
        job = submit(admin, "gpu=1", "algo")
        srv.cycle()
        listed = gpupool("proposal", "list", "-o", "id,subject,action,gain", env=env)
        assert listed.returncode == 0 and "1 card to work" in listed.stdout
        (p,) = _proposals(admin)
        out = gpupool("proposal", "reject", str(p["id"]), env=env)
        assert out.returncode == 0 and f"proposal {p['id']} rejected: bind job {job['id']}" in (
            out.stdout
        )
        again = gpupool("proposal", "approve", str(p["id"]), env=env)
        assert again.returncode == 2 and "is rejected, not pending" in again.stderr
        assert "Traceback" not in again.stderr


def test_a_mode_switch_and_a_scale_in_are_proposed_then_carried_out(tmp_path):
    from tests.support.cluster import pool_with_a_node

    settings = Settings(data_dir=tmp_path, log_json=False, proposal_ttl_s=TTL)
    with live_server(settings) as srv:
        admin = srv.admin()
        ok(admin.post("/api/v1/tenants", json={"name": "algo"}), 201)
        ok(admin.put("/api/v1/advisory", json={"actions": {"mode-switch": True,
                                                           "scale-in": True}}))  # fmt: skip
        # a share pool's idle MIG card would be ordered into sharing: proposed instead
        pool_with_a_node(admin, "p", "share", "n0", ["mig", "share"])
        srv.cycle()
        (p,) = _proposals(admin)
        assert (p["action"], p["subject"], p["job_id"]) == ("mode-switch", "n0 device 0 -> share",
                                                            None)  # fmt: skip
        card = ok(admin.get("/api/v1/nodes/n0"))["devices"][0]
        assert card["want_mode"] is None
        ok(admin.post(f"/api/v1/proposals/{p['id']}/approve"))
        srv.cycle()
        assert ok(admin.get("/api/v1/nodes/n0"))["devices"][0]["want_mode"] == "share"
        # a service pinned from 3 replicas down to 1: the scale-in waits for approval
        ok(admin.post("/api/v1/nodes", json=node_body("n1", cards=4)))
        body = {"name": "chat", "tenant": "algo", "request": "gpu=1", "command": ["serve"],
                "target": 10, "min_replicas": 1}  # fmt: skip
        ok(admin.post("/api/v1/services", json=body), 201)
        ok(admin.post("/api/v1/services/chat/scale", json={"replicas": 3}))
        services = srv.ctx.loop.services
        assert srv.ctx.loop.leadership.try_acquire()
        services.step(force=True)

        def replicas():
            jobs = ok(admin.get("/api/v1/jobs", params={"limit": 100}))["items"]
            return [j for j in jobs if j["name"] == "chat-replica" and j["state"] == "pending"]

        assert len(replicas()) == 3
        ok(admin.post("/api/v1/services/chat/scale", json={"replicas": 1}))
        services.step(force=True)
        assert len(replicas()) == 3  # not scaled in yet
        (s,) = _proposals(admin, "pending")
        assert s["subject"] == "service chat: 3 -> 1 replicas" and s["tenant"] == "algo"
        ok(admin.post(f"/api/v1/proposals/{s['id']}/approve"))
        services.step(force=True)
        assert len(replicas()) == 1

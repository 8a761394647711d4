"""Jobs through the real API on both database backends: lifecycle, idempotency, bad input."""

from gpupool.server.lifecycle import metered_seconds
from tests.support.cluster import node_body, ok, seed_cluster, submit


def test_submit_admit_run_finish_is_recorded_and_metered(server):
    admin = server.admin()
    seed_cluster(admin)
    job = submit(admin, "gpu=A100-80G:2,cpu=4", "algo", name="train", kind="training")
    assert job["state"] == "pending" and job["request"] == "gpu=A100-80G:2,cpu=4000m"
    server.cycle()
    job = ok(admin.get(f"/api/v1/jobs/{job['id']}"))
    assert job["state"] == "admitted", job["reason"]
    alloc = job["allocation"]
    devices = [d for n in alloc["nodes"] for d in n["devices"]]
    assert len(devices) == 2 and all(d["exclusive"] for d in devices)
    agent = server.client(server.token("agent-n", "agent", node="*"))
    status = {"generation": alloc["generation"], "state": "running"}
    ok(agent.post(f"/api/v1/allocations/{alloc['id']}/status", json=status))
    done = {"generation": alloc["generation"], "state": "succeeded", "exit_code": 0}
    ok(agent.post(f"/api/v1/allocations/{alloc['id']}/status", json=done))
    job = ok(admin.get(f"/api/v1/jobs/{job['id']}"))
    assert job["state"] == "succeeded" and job["exit_code"] == 0 and job["allocation"] is None
    events = ok(admin.get(job["events_url"]))
    assert [e["to_state"] for e in events] == ["pending", "admitted", "running", "succeeded"]
    usage = ok(admin.get("/api/v1/usage", params={"tenant": "algo"}))["items"]
    assert len(usage) == 1 and usage[0]["model"] == "A100-80G" and usage[0]["devices"] == 2
    seconds = metered_seconds(usage[0]["start"], usage[0]["end"])  # whole seconds, telescoping
    assert usage[0]["compute_pct_seconds"] == 2 * 100 * seconds


def test_stale_generation_is_refused(server):
    admin = server.admin()
    seed_cluster(admin, nodes=1)
    job = submit(admin, "gpu=1", "algo")
    server.cycle()
    alloc = ok(admin.get(f"/api/v1/jobs/{job['id']}"))["allocation"]
    agent = server.client(server.token("agent-n0", "agent", node="n0"))
    stale = {"generation": alloc["generation"] - 1, "state": "running"}
    r = agent.post(f"/api/v1/allocations/{alloc['id']}/status", json=stale)
    assert r.status_code == 409 and r.json()["field"] == "generation"
    ok(admin.post(f"/api/v1/jobs/{job['id']}/cancel"))
    late = {"generation": alloc["generation"], "state": "succeeded"}
    r = agent.post(f"/api/v1/allocations/{alloc['id']}/status", json=late)
    assert r.status_code == 409 and "released" in r.json()["detail"]
    other = server.client(server.token("agent-n1", "agent", node="n1"))
    r = other.post(f"/api/v1/allocations/{alloc['id']}/status", json=late)
    assert r.status_code == 403


def test_idempotent_submission(server):
    admin = server.admin()
    seed_cluster(admin, nodes=1)
    first = submit(admin, "gpu=1", "algo", idempotency_key="k-1")
    again = admin.post(
        "/api/v1/jobs",
        json={"request": "gpu=1", "tenant": "algo", "command": ["true"]},
        headers={"Idempotency-Key": "k-1"},
    )
    assert again.status_code == 200 and again.json()["id"] == first["id"]
    clash = admin.post(
        "/api/v1/jobs",
        json={"request": "gpu=2", "tenant": "algo", "idempotency_key": "k-1", "command": ["true"]},
    )
    assert clash.status_code == 409 and clash.json()["field"] == "idempotency_key"
    other_tenant = submit(admin, "gpu=1", "dev", idempotency_key="k-1")  # keys are per tenant
    assert other_tenant["id"] != first["id"]
    assert ok(admin.get("/api/v1/jobs"))["total"] == 2


def test_cancel_pending_and_terminal(server):
    admin = server.admin()
    seed_cluster(admin, nodes=1)
    job = submit(admin, "gpu=1", "algo")
    assert ok(admin.post(f"/api/v1/jobs/{job['id']}/cancel"))["state"] == "cancelled"
    r = admin.post(f"/api/v1/jobs/{job['id']}/cancel")
    assert r.status_code == 409 and "already cancelled" in r.json()["detail"]
    server.cycle()
    assert ok(admin.get(f"/api/v1/jobs/{job['id']}"))["state"] == "cancelled"


def test_pending_jobs_carry_their_reason_and_queue_order(server):
    admin = server.admin()
    seed_cluster(admin, nodes=1, cards=8, tenants={"algo": 4})
    big = submit(admin, "gpu=8", "algo")
    dev = submit(admin, "gpu=1", "algo", priority_class="dev-test")
    hi = submit(admin, "gpu=1", "algo", priority_class="online-inference")
    server.cycle()
    queue = ok(admin.get("/api/v1/queue"))
    assert [q["id"] for q in queue["items"]] == [big["id"]]
    assert queue["items"][0]["reason"].startswith("quota: algo gpu")
    for j in (dev, hi):
        assert ok(admin.get(f"/api/v1/jobs/{j['id']}"))["state"] == "admitted"


def test_list_filters_and_pages(server):
    admin = server.admin()
    seed_cluster(admin, nodes=1)
    ids = [submit(admin, "cpu=1", "algo")["id"] for _ in range(5)]
    submit(admin, "cpu=1", "dev")
    page = ok(admin.get("/api/v1/jobs", params={"tenant": "algo", "limit": 2, "offset": 1}))
    assert page["total"] == 5 and [j["id"] for j in page["items"]] == ids[::-1][1:3]
    assert ok(admin.get("/api/v1/jobs", params={"state": "running"}))["total"] == 0


def test_bad_input_gets_4xx_naming_the_field(server):
    admin = server.admin()
    seed_cluster(admin, nodes=1)
    cases = [
        ({"request": "gpu=two", "tenant": "algo"}, "request"),
        ({"request": "gpu=1", "tenant": "nobody"}, "tenant"),
        ({"request": "gpu=1", "tenant": "algo", "priority_class": "vip"}, "priority_class"),
        ({"tenant": "algo"}, "request"),
        ({"request": "gpu=1", "tenant": "algo", "gang_size": 0}, "gang_size"),
        ({"request": "gpu=1", "tenant": "algo", "surprise": 1}, "surprise"),
        ({"request": "gpu=1", "tenant": "algo", "command": "not a list"}, "command"),
        ({"request": "mig=9g.99gb", "tenant": "algo"}, "request"),
    ]
    for body, field in cases:
        r = admin.post("/api/v1/jobs", json=body)
        assert r.status_code == 422, (body, r.text)
        assert r.json()["field"] == field, (body, r.json())
    r = admin.post(
        "/api/v1/jobs", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert r.status_code == 422 and r.json()["detail"]
    assert admin.get("/api/v1/jobs/999").status_code == 404
    assert admin.get("/api/v1/jobs/abc").status_code == 422
    assert ok(admin.get("/api/v1/jobs"))["total"] == 0  # nothing half-written


def test_bad_node_registration(server):
    admin = server.admin()
    bad = [
        ({"name": "n", "cpu_millis": -1, "memory_mib": 1}, "cpu_millis"),
        ({"name": "n", "cpu_millis": 1, "memory_mib": 1, "pool": "nope"}, "pool"),
        (
            {
                "name": "n",
                "cpu_millis": 1,
                "memory_mib": 1,
                "devices": [{"index": 0, "model": "Mystery9000"}],
            },
            "devices",
        ),
        (
            {
                "name": "n",
                "cpu_millis": 1,
                "memory_mib": 1,
                "devices": [{"index": 0, "model": "T4", "mode": "mig"}],
            },
            "devices",
        ),
        (
            {
                "name": "n",
                "cpu_millis": 1,
                "memory_mib": 1,
                "devices": [{"index": 0, "model": "T4"}, {"index": 0, "model": "T4"}],
            },
            "devices",
        ),
        ({"name": "bad name!", "cpu_millis": 1, "memory_mib": 1}, "name"),
    ]
    for body, field in bad:
        r = admin.post("/api/v1/nodes", json=body)
        assert r.status_code == 422, (body, r.text)
        assert r.json()["field"] == field, (body, r.json())
    assert ok(admin.get("/api/v1/nodes"))["total"] == 0


def test_cordoned_node_takes_no_new_work(server):
    admin = server.admin()
    seed_cluster(admin, nodes=2, cards=2, tenants={"algo": 4})
    ok(admin.patch("/api/v1/nodes/n0", json={"schedulable": False}))
    # (a job without mem= reserves its cards' share of the node's memory: leave some)
    jobs = [submit(admin, "gpu=1,mem=64GiB", "algo") for _ in range(3)]
    server.cycle()
    states = [ok(admin.get(f"/api/v1/jobs/{j['id']}")) for j in jobs]
    placed = [j for j in states if j["state"] == "admitted"]
    assert len(placed) == 2
    assert {n["node"] for j in placed for n in j["allocation"]["nodes"]} == {"n1"}
    cpu_only = submit(admin, "cpu=1", "algo")
    server.cycle()
    j = ok(admin.get(f"/api/v1/jobs/{cpu_only['id']}"))
    assert [n["node"] for n in j["allocation"]["nodes"]] == ["n1"]


def test_jobs_that_can_never_run_are_refused_at_submit(sqlite_server):
    """As Slurm's "Requested node configuration is not available": tried on the pool as if
    every node were empty and healthy."""
    admin = sqlite_server.admin()
    ok(admin.post("/api/v1/tenants", json={"name": "algo"}), 201)
    submit(admin, "gpu=12", "algo")  # no node yet: nothing is known, so it may wait
    seed_cluster(admin, nodes=2, cards=4, tenants={})
    sqlite_server.ctx.capacity._checked = float("-inf")  # do not wait out the refresh
    for spec, why in (
        ("gpu=12", "0/2 nodes: 2 fewer than 12 free gpu"),
        ("gpu=1000", "fewer than 1000 free gpu"),
        ("gpu=H100-80G:1", "no H100-80G"),
        ("gpu_share=0.5", "no shared-mode gpu"),
        ("cpu=1000", "insufficient cpu"),
    ):
        r = admin.post("/api/v1/jobs", json={"request": spec, "tenant": "algo"})
        assert r.status_code == 422, (spec, r.text)
        detail = r.json()["detail"]
        assert detail.startswith("request: can never run on this pool") and why in detail, detail
        assert r.json()["field"] == "request"
    # busy or unhealthy now is not "never": the pool as if empty and healthy decides
    bad = {"devices": [{"index": i, "healthy": False} for i in range(4)]}
    ok(admin.post("/api/v1/nodes/n0/heartbeat", json=bad))
    ok(admin.post("/api/v1/nodes/n1/heartbeat", json=bad))
    sqlite_server.ctx.capacity._checked = float("-inf")
    submit(admin, "gpu=4", "algo")


def test_a_request_above_the_tenants_ceiling_is_refused(sqlite_server):
    admin = sqlite_server.admin()
    seed_cluster(admin, nodes=2, cards=8, tenants={})
    ok(admin.post("/api/v1/tenants", json={"name": "org"}), 201)
    ok(admin.post("/api/v1/tenants", json={"name": "algo", "parent": "org"}), 201)
    quota = {"resource": "gpu", "nominal": 1, "borrowing_limit": 1}
    ok(admin.put("/api/v1/tenants/algo/quotas/gpu", json=quota))
    r = admin.post("/api/v1/jobs", json={"request": "gpu=3", "tenant": "algo"})
    assert r.status_code == 422 and r.json()["detail"] == (
        "request: can never run: quota: asks 3 gpu, above what algo may ever hold: "
        "1 guaranteed + 1 borrowing limit"
    )
    submit(admin, "gpu=2", "algo")  # the ceiling itself may run (borrowing)
    # no borrowing limit: no ceiling of its own; the parent's cap still counts
    old_client = {"flavour": "gpu", "nominal": 1}  # the field's name before 0007, still read
    out = ok(admin.put("/api/v1/tenants/algo/quotas/gpu", json=old_client))
    assert out["quotas"][0]["resource"] == "gpu" and "flavour" not in out["quotas"][0]
    submit(admin, "gpu=6", "algo")
    ok(admin.put("/api/v1/tenants/org/quotas/gpu", json={"resource": "gpu", "nominal": 5}))
    r = admin.post("/api/v1/jobs", json={"request": "gpu=6", "tenant": "algo"})
    assert r.status_code == 422
    assert "above what org (for its subtree) may ever hold: 5 guaranteed" in r.text


def test_a_queued_job_says_when_it_can_never_run(server):
    """The pool shrank or a quota was lowered under a waiting job: its reason says "can
    never run" instead of a passing shortage."""
    admin = server.admin()
    seed_cluster(admin, nodes=2, cards=4, tenants={"algo": 8})
    big = submit(admin, "gpu=4", "algo")
    fill = [submit(admin, "gpu=4", "algo") for _ in range(2)]
    server.cycle()
    assert ok(admin.get(f"/api/v1/jobs/{big['id']}"))["state"] == "admitted"
    waiting = next(
        j for j in fill if ok(admin.get(f"/api/v1/jobs/{j['id']}"))["state"] == "pending"
    )
    ok(admin.put("/api/v1/tenants/algo/quotas/gpu",
                 json={"resource": "gpu", "nominal": 2, "borrowing_limit": 1}))  # fmt: skip
    server.cycle()
    reason = ok(admin.get(f"/api/v1/jobs/{waiting['id']}"))["reason"]
    assert reason.startswith("can never run: quota: asks 4 gpu, above what algo"), reason
    ok(admin.put("/api/v1/tenants/algo/quotas/gpu", json={"resource": "gpu", "nominal": 8}))
    for job in (big, *fill):
        if job is not waiting:
            ok(admin.post(f"/api/v1/jobs/{job['id']}/cancel"))
    ok(admin.delete("/api/v1/nodes/n0"), 204)
    ok(admin.delete("/api/v1/nodes/n1"), 204)
    ok(admin.post("/api/v1/nodes", json=node_body("small", cards=2)))
    server.cycle()
    reason = ok(admin.get(f"/api/v1/jobs/{waiting['id']}"))["reason"]
    assert reason.startswith("can never run on this pool (every node empty): 0/1 nodes"), reason


def test_a_job_that_names_no_class_gets_its_kinds_and_an_unknown_class_lists_them(sqlite_server):
    admin = sqlite_server.admin()
    seed_cluster(admin)
    got = {
        kind: submit(admin, "cpu=1", "algo", kind=kind)["priority_class"]
        for kind in ("inference", "dev", "training", "batch")
    }
    assert got == {"inference": "online-inference", "dev": "dev-test", "training": "training",
                   "batch": "training"}  # fmt: skip
    named = submit(admin, "cpu=1", "algo", kind="inference", priority_class="dev-test")
    assert named["priority_class"] == "dev-test"  # what is given wins
    r = admin.post(
        "/api/v1/jobs", json={"request": "cpu=1", "tenant": "algo", "priority_class": "high"}
    )
    assert r.status_code == 422
    assert r.json()["detail"] == (
        "priority_class: unknown class 'high' (the classes: online-inference, training, dev-test)"
    )


def test_a_gang_reads_as_a_gang_in_the_queue_the_job_and_the_cli(sqlite_server, tmp_path):
    """A gang of 2 x 4 cards showed as gpu=A100-80G:4 everywhere but --json, so its quota
    reason (8 cards) looked false beside 6 free."""
    from tests.support.cli import gpupool

    admin = sqlite_server.admin()
    seed_cluster(admin, nodes=1, cards=4, tenants={"algo": 4})
    gang = submit(admin, "gpu=A100-80G:4", "algo", gang_size=2)
    assert gang["shape"] == "2×gpu=A100-80G:4" and gang["request"] == "gpu=A100-80G:4"
    sqlite_server.cycle()
    queued = ok(admin.get("/api/v1/queue"))["items"][0]
    assert queued["shape"] == "2×gpu=A100-80G:4" and queued["gang_size"] == 2
    assert queued["wait_code"] in ("quota", "no-room", "never"), queued
    env = {"GPUPOOL_SERVER": sqlite_server.url, "GPUPOOL_TOKEN": sqlite_server.admin_token,
           "COLUMNS": "120"}  # fmt: skip
    assert "2×gpu=A100-80G:4" in gpupool("queue", env=env).stdout
    shown = gpupool("job", "show", str(gang["id"]), env=env).stdout
    assert "2×gpu=A100-80G:4" in shown and "waits for" in shown
    single = submit(admin, "gpu=1", "algo")
    assert single["shape"] == "gpu=1"

"""scontrol / sbatch job control through the API: holds, requeue, arrays with a limit and
dependencies, each decided by the real scheduler loop on SQLite and PostgreSQL."""

import pytest

from gpupool.model import SpecError
from gpupool.model.batch import parse_array, parse_dependency
from gpupool.scheduler.gates import Gated, dependency_reason, gate
from tests.support.cluster import ok, seed_cluster, started, submit


def job(client, job_id: int) -> dict:
    return ok(client.get(f"/api/v1/jobs/{job_id}"))


def end(client, job_id: int, state: str = "succeeded", code: int = 0) -> None:
    """Report a job's end as its agent would."""
    alloc = job(client, job_id)["allocation"]
    body = {"generation": alloc["generation"], "state": state, "exit_code": code}
    ok(client.post(f"/api/v1/allocations/{alloc['id']}/status", json=body))


def test_array_syntax():
    assert parse_array("0-99%10").indices == tuple(range(100))
    assert parse_array("0-99%10").limit == 10
    assert parse_array("1,3,0-8:4").indices == (0, 1, 3, 4, 8)
    for bad, why in [("5-1", "ends before it starts"), ("0-2000", "more than 1000"),
                     ("1%0", "positive"), ("x", "is not N"), ("0-3%¹", "positive")]:  # fmt: skip
        with pytest.raises(SpecError, match=why):
            parse_array(bad)
    assert [(d.type, d.job) for d in parse_dependency("afterok:4:5,afterany:6")] == [
        ("afterok", 4),
        ("afterok", 5),
        ("afterany", 6),
    ]
    with pytest.raises(SpecError, match="'before' is not one of"):
        parse_dependency("before:4")
    with pytest.raises(SpecError, match="needs job ids"):
        parse_dependency("afterok:²")


def test_gate_rules():
    states = {1: ["succeeded"], 2: ["failed"], 3: ["running"], 4: ["succeeded", "pending"]}
    assert dependency_reason([("afterok", 1), ("afterany", 2)], states) is None
    assert dependency_reason([("afternotok", 2)], states) is None
    assert "can never be satisfied: afterok:2 but job 2 failed" in dependency_reason(
        [("afterok", 2)], states
    )
    assert "afternotok:1 but job 1 succeeded" in dependency_reason([("afternotok", 1)], states)
    assert dependency_reason([("afterok", 3)], states) == (
        "waiting for dependency: afterok:3 (job 3 running)"
    )
    assert "afterany:4 (job 4 1/2 done)" in dependency_reason([("afterany", 4)], states)
    assert dependency_reason([("afterok", 99)], states) is None  # gone: met, as in Slurm
    tasks = [Gated(10 + i, array_job=10, array_index=i, array_limit=3) for i in range(6)]
    held = Gated(30, held=True)
    out = gate([*tasks, held], {}, {10: 1})
    assert sorted(out) == [12, 13, 14, 15, 30]  # 1 holding + tasks 0 and 1 = the limit of 3
    assert out[30] == "held (gpupool job release 30)"
    assert out[15] == "array limit: 3 tasks of array 10 at a time (%3)"


def test_hold_release_and_requeue(server):
    admin = server.admin()
    seed_cluster(admin, nodes=1, cards=4, tenants={"algo": 4})
    held = submit(admin, "gpu=1", "algo", hold=True, command=["true"])
    assert (held["held"], held["reason"]) == (True, "held by root")
    other = submit(admin, "gpu=1", "algo", command=["true"])
    server.cycle()
    assert job(admin, held["id"])["state"] == "pending"
    assert job(admin, held["id"])["reason"] == f"held (gpupool job release {held['id']})"
    assert job(admin, other["id"])["state"] == "admitted"
    ok(admin.post(f"/api/v1/jobs/{held['id']}/release"))
    server.cycle()
    assert job(admin, held["id"])["state"] == "admitted"
    started(admin, other)  # its workload runs
    # requeue: the allocation ends (metered), the job waits again, here held
    out = ok(admin.post(f"/api/v1/jobs/{other['id']}/requeue", params={"hold": True}))
    assert (out["state"], out["held"], out["allocation"]) == ("pending", True, None)
    assert "requeued and held by root" in out["reason"]
    usage = ok(admin.get("/api/v1/usage", params={"tenant": "algo"}))["items"]
    assert [u["job_id"] for u in usage] == [other["id"]]
    r = admin.post(f"/api/v1/jobs/{held['id']}/hold")
    assert r.status_code == 409 and "only pending jobs are held" in r.text
    r = admin.post(f"/api/v1/jobs/{held['id']}/release")
    assert r.status_code == 409 and "is not held" in r.text
    events = ok(admin.get(f"/api/v1/jobs/{other['id']}/events"))
    assert [e["to_state"] for e in events] == ["pending", "admitted", "running", "pending"]


def test_array_runs_at_most_its_limit_and_sets_task_ids(server):
    admin = server.admin()
    seed_cluster(admin, nodes=2, cards=4, tenants={"algo": 8})
    first = submit(admin, "gpu=1", "algo", array="0-19%3", command=["echo"], name="sweep")
    assert (first["array_size"], first["array_job"], first["array_index"]) == (20, first["id"], 0)
    tasks = ok(admin.get("/api/v1/jobs", params={"array": first["id"], "limit": 100}))["items"]
    assert len(tasks) == 20 and {t["name"] for t in tasks} == {"sweep"}
    by_index = {t["array_index"]: t for t in tasks}
    assert sorted(by_index) == list(range(20))
    finished = 0
    while finished < 20:
        server.cycle()
        live = ok(admin.get("/api/v1/jobs", params={"array": first["id"], "state": "admitted"}))
        assert 1 <= live["total"] <= 3  # eight free cards, never more than three at once
        for t in live["items"]:
            end(admin, t["id"])
            finished += 1
    pending = ok(admin.get("/api/v1/queue"))["items"]
    assert pending == []


def test_array_env_is_per_task(sqlite_server):
    admin = sqlite_server.admin()
    seed_cluster(admin, nodes=1, cards=4, tenants={"algo": 4})
    first = submit(admin, "cpu=1", "algo", array="4,7", command=["env"], env={"A": "1"})
    with sqlite_server.ctx.db.read() as s:
        from sqlalchemy import select

        from gpupool.server.db.tables import JobRow

        envs = dict(s.execute(select(JobRow.array_index, JobRow.env)).all())
    assert envs[7] == {
        "A": "1", "GPUPOOL_ARRAY_JOB_ID": str(first["id"]), "GPUPOOL_ARRAY_TASK_ID": "7",
        "GPUPOOL_ARRAY_TASK_COUNT": "2", "GPUPOOL_ARRAY_TASK_MIN": "4",
        "GPUPOOL_ARRAY_TASK_MAX": "7",
    }  # fmt: skip
    assert envs[4]["GPUPOOL_ARRAY_TASK_ID"] == "4"
    r = admin.post("/api/v1/jobs", json={"request": "cpu=1", "tenant": "algo", "array": "5-1"})
    assert r.status_code == 422 and "array: '5-1' ends before it starts" in r.text


def test_dependency_chain(server):
    admin = server.admin()
    seed_cluster(admin, nodes=1, cards=4, tenants={"algo": 4, "beta": 0})
    a = submit(admin, "gpu=1", "algo", command=["true"])
    b = submit(admin, "gpu=1", "algo", dependency=[{"type": "afterok", "job": a["id"]}])
    c = submit(admin, "gpu=1", "algo", dependency=[{"type": "afternotok", "job": b["id"]}])
    d = submit(admin, "gpu=1", "algo", dependency=[{"type": "afterany", "job": b["id"]}])
    server.cycle()
    assert job(admin, a["id"])["state"] == "admitted"
    server.cycle()  # reasons are those seen at the start of a cycle
    assert job(admin, b["id"])["reason"] == (
        f"waiting for dependency: afterok:{a['id']} (job {a['id']} admitted)"
    )
    end(admin, a["id"])
    server.cycle()
    assert job(admin, b["id"])["state"] == "admitted"
    end(admin, b["id"])  # succeeded: c can never run, d can
    server.cycle()
    server.cycle()
    assert job(admin, d["id"])["state"] == "admitted"
    assert job(admin, c["id"])["reason"] == (
        f"dependency can never be satisfied: afternotok:{b['id']} but job {b['id']} "
        "succeeded (cancel this job)"
    )
    # a dependency on another tenant's job, or on none, is refused and names the job
    beta = server.client(server.token("bob", "member", "beta"))
    on_a = [{"type": "afterok", "job": a["id"]}]
    r = beta.post("/api/v1/jobs", json={"request": "cpu=1", "dependency": on_a})
    assert r.status_code == 422 and f"dependency: no job {a['id']}" in r.text
    r = admin.post("/api/v1/jobs", json={"request": "cpu=1", "tenant": "beta", "dependency": on_a})
    assert r.status_code == 422 and "belongs to tenant 'algo', not 'beta'" in r.text


def test_dependency_on_an_array_waits_for_every_task(sqlite_server):
    admin = sqlite_server.admin()
    seed_cluster(admin, nodes=1, cards=4, tenants={"algo": 4})
    arr = submit(admin, "gpu=1", "algo", array="0-2", command=["true"])
    after = submit(admin, "gpu=1", "algo", dependency=[{"type": "afterok", "job": arr["id"]}])
    sqlite_server.cycle()
    tasks = ok(admin.get("/api/v1/jobs", params={"array": arr["id"]}))["items"]
    for t in tasks[:2]:
        end(admin, t["id"])
    sqlite_server.cycle()
    assert f"(job {arr['id']} 2/3 done)" in job(admin, after["id"])["reason"]
    end(admin, tasks[2]["id"])
    sqlite_server.cycle()
    assert job(admin, after["id"])["state"] == "admitted"


def test_a_starving_head_gets_backfills_expected_start(sqlite_server):
    import time
    from datetime import UTC, datetime

    admin = sqlite_server.admin()
    seed_cluster(admin, nodes=1, cards=4, tenants={"algo": 4})
    now = time.time()
    first = submit(admin, "gpu=4", "algo", max_runtime_s=4 * 3600)
    sqlite_server.cycle(now)
    head = submit(admin, "gpu=4", "algo")
    submit(admin, "gpu=1", "algo", max_runtime_s=5 * 3600)  # behind the head, too long to run
    later = now + 3700  # both starving by then (an hour's wait)
    sqlite_server.cycle(later)
    sqlite_server.cycle(later)
    started = job(admin, first["id"])["allocation"]["created_at"]
    when = datetime.fromtimestamp(started + 4 * 3600, UTC).strftime("%Y-%m-%dT%H:%MZ")
    assert job(admin, head["id"])["reason"].endswith(
        f"; expected start by {when} (running jobs' time limits)"
    )

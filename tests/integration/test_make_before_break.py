"""Defragmentation moves, executed by real agents (a server with its scheduler loop, two agents
running real processes): an inference replica is never broken — a copy starts on the new node
first, the replica stops only once the copy runs, then the waiting job gets the room; a
suspendable job stops and restarts where the plan found room, which is held for it."""

import time

from gpupool.server.settings import Settings
from tests.support.agents import (  # noqa: F401 (the fixture kills leftover workloads)
    agent_thread,
    in_state,
    make_agent,
    no_workload_outlives_its_test,
    wait_for,
)
from tests.support.cluster import ok, submit
from tests.support.live import live_server

SLEEP = ["python3", "-c", "import time; time.sleep(60)"]


def _teams(admin, **cards: int) -> None:
    """Top-level teams with these guarantees and no borrowing."""
    for team, n in cards.items():
        ok(admin.post("/api/v1/tenants", json={"name": team}), 201)
        quota = {"resource": "gpu", "nominal": n, "borrowing_limit": 0}
        ok(admin.put(f"/api/v1/tenants/{team}/quotas/gpu", json=quota))


def _agent(srv, tmp_path):
    def agent(name: str):
        token = srv.token(f"agent-{name}", "agent", node=name)
        return agent_thread(make_agent(srv.url, token, name, tmp_path / name))

    return agent


def _run(admin):
    def run(spec: str, team: str, **extra) -> dict:
        job = submit(admin, spec, team, command=SLEEP, **extra)
        wait_for(f"{spec} running", in_state(admin, job["id"], "running"), timeout=30)
        return ok(admin.get(f"/api/v1/jobs/{job['id']}"))

    return run


def test_a_replica_is_copied_before_it_stops_to_make_room(tmp_path):
    settings = Settings(data_dir=tmp_path, log_json=False, cycle_interval_s=0.2, defrag_after_s=0)
    with live_server(settings, run_scheduler=True) as srv:
        admin = srv.admin()
        _teams(admin, inference=3, training=1)
        agent, run = _agent(srv, tmp_path), _run(admin)

        def node_of(job: dict) -> str:
            return job["allocation"]["nodes"][0]["node"]

        with agent("n1"):
            wait_for("n1", lambda: admin.get("/api/v1/nodes/n1").status_code == 200)
            replica = run("gpu=1", "inference", kind="inference")
            filler = run("gpu=1", "inference", kind="training", on_preempt="kill")
            with agent("n2"):
                wait_for("n2", lambda: admin.get("/api/v1/nodes/n2").status_code == 200)
                pinned = run("gpu=1", "training", kind="training", on_preempt="kill")
                assert (node_of(replica), node_of(filler), node_of(pinned)) == ("n1", "n1", "n2")
                ok(admin.post(f"/api/v1/jobs/{filler['id']}/cancel"))
                # one free card on each node; 2 cards on one node only if the replica moves
                big = submit(admin, "gpu=2", "inference", kind="inference", command=SLEEP)
                wait_for("big running", in_state(admin, big["id"], "running"), timeout=40)
                big = ok(admin.get(f"/api/v1/jobs/{big['id']}"))
                old = ok(admin.get(f"/api/v1/jobs/{replica['id']}"))
                copies = ok(admin.get("/api/v1/jobs", params={"state": "running"}))["items"]
                (copy,) = [j for j in copies if j.get("replaces") == replica["id"]]
                assert node_of(big) == "n1" and node_of(copy) == "n2"
                assert (copy["command"], copy["request"]) == (replica["command"], "gpu=1")
                assert old["state"] == "cancelled"
                assert old["reason"] == (
                    f"replaced by job {copy['id']} on n2 (defragmentation, make-before-break)"
                )
                assert copy["started_at"] <= old["finished_at"]  # made before it was broken
                audit = ok(admin.get("/api/v1/audit", params={"action": "DEFRAGMENT"}))["items"]
                assert {a["action"] for a in audit} == {"DEFRAGMENT copy", "DEFRAGMENT replace"}
                assert ok(admin.get(f"/api/v1/jobs/{pinned['id']}"))["state"] == "running"
                for job in (big, copy, pinned):
                    ok(admin.post(f"/api/v1/jobs/{job['id']}/cancel"))
                time.sleep(0.5)  # let the agents stop them before they go


def test_a_suspended_job_restarts_where_the_plan_found_room(tmp_path):
    settings = Settings(data_dir=tmp_path, log_json=False, cycle_interval_s=0.2, defrag_after_s=0,
                        grace_s=1)  # fmt: skip
    with live_server(settings, run_scheduler=True) as srv:
        admin = srv.admin()
        _teams(admin, inference=2, training=2)
        agent, run = _agent(srv, tmp_path), _run(admin)

        with agent("n1"):
            wait_for("n1", lambda: admin.get("/api/v1/nodes/n1").status_code == 200)
            mover = run("gpu=1", "training", kind="training")  # on_preempt: suspend
            filler = run("gpu=1", "inference", kind="training", on_preempt="kill")
            with agent("n2"):
                wait_for("n2", lambda: admin.get("/api/v1/nodes/n2").status_code == 200)
                pinned = run("gpu=1", "training", kind="training", on_preempt="kill")
                ok(admin.post(f"/api/v1/jobs/{filler['id']}/cancel"))
                big = submit(admin, "gpu=2", "inference", kind="inference", command=SLEEP)
                wait_for("big running", in_state(admin, big["id"], "running"), timeout=40)
                moved = wait_for("the moved job running again", lambda: (
                    j := ok(admin.get(f"/api/v1/jobs/{mover['id']}")))["state"] == "running"
                    and j["allocation"]["nodes"][0]["node"] == "n2" and j)  # fmt: skip
                states = [
                    e["to_state"] for e in ok(admin.get(f"/api/v1/jobs/{mover['id']}/events"))
                ]
                assert states[-4:] == ["preempted", "pending", "admitted", "running"]
                assert moved["allocation"]["after"]  # it waited for its own old workload
                big = ok(admin.get(f"/api/v1/jobs/{big['id']}"))
                assert big["allocation"]["nodes"][0]["node"] == "n1"
                for job in (big, moved, pinned):
                    ok(admin.post(f"/api/v1/jobs/{job['id']}/cancel"))
                time.sleep(0.5)  # let the agents stop them before they go

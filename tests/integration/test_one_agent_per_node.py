"""One live agent per node (issue 44): two agents with the same node name and token — a
cloned host, a second agent started by mistake — ran one job twice at once, with no warning.
Now the second one's registration is refused while the first is heard (it says why, and
takes over once the first has been silent for the node-lost timeout), and an agent holds its
state dir: a second agent on it is refused at once."""

import threading
import time

import pytest

from gpupool.agent.state import StateLocked
from gpupool.server.settings import Settings
from tests.support.agents import (  # noqa: F401 (the fixture kills leftover workloads)
    agent_thread,
    in_state,
    make_agent,
    no_workload_outlives_its_test,
    wait_for,
    wait_for_cards,
)
from tests.support.cluster import ok, submit
from tests.support.live import live_server
from tests.support.tenants import job_log

PRINT = "import os, time; print('ran in', os.getcwd(), flush=True); time.sleep(30)"


def test_a_second_agent_for_a_live_node_is_refused_and_the_job_runs_once(tmp_path):
    settings = Settings(data_dir=tmp_path, log_json=False, cycle_interval_s=0.2,
                        heartbeat_timeout_s=4)  # fmt: skip
    with live_server(settings, run_scheduler=True) as srv:
        admin = srv.admin()
        ok(admin.post("/api/v1/tenants", json={"name": "algo"}), 201)
        ok(admin.put("/api/v1/tenants/algo/quotas/gpu", json={"resource": "gpu", "nominal": 2}))
        token = srv.token("agent-n1", "agent", node="n1")
        first = make_agent(srv.url, token, "n1", tmp_path / "host-a")
        clone = make_agent(srv.url, token, "n1", tmp_path / "host-b")
        with agent_thread(first):
            wait_for_cards(admin)
            with agent_thread(clone):
                job = submit(admin, "gpu=1", "algo", command=["python3", "-c", PRINT])
                wait_for("running", in_state(admin, job["id"], "running"), 20)
                wait_for("the clone tried", lambda: clone.state == "unregistered" and
                         _refused(admin), 10)  # fmt: skip
                wait_for("its output", lambda: "ran in" in job_log(admin, job["id"]), 10)
                time.sleep(1.5)  # a second copy's output would be here by now
                runs = job_log(admin, job["id"]).count("ran in")
                ok(admin.post(f"/api/v1/jobs/{job['id']}/cancel"))
        # the first agent gone and silent past the timeout, the clone may take the node
        replacement = make_agent(srv.url, token, "n1", tmp_path / "host-b")
        with agent_thread(replacement):
            wait_for("taken over", lambda: replacement.state == "ready", 20)
    assert runs == 1
    assert not clone.records  # the clone started nothing


def _refused(admin) -> bool:
    audit = admin.get("/api/v1/audit", params={"limit": 50}).json()["items"]
    return any(a["result"] == 409 and "node n1" in a["target"] for a in audit)


def test_one_agent_per_state_dir(tmp_path):
    with live_server(Settings(data_dir=tmp_path, log_json=False)) as srv:
        token = srv.token("agent-n1", "agent", node="n1")
        first = make_agent(srv.url, token, "n1", tmp_path / "state")
        with agent_thread(first):
            wait_for("started", lambda: first.state == "ready", 20)
            second = make_agent(srv.url, token, "n1", tmp_path / "state")
            with pytest.raises(StateLocked, match="is in use by another agent"):
                second.run(threading.Event())

"""A node whose agent's loop falls behind says so, and takes no new work meanwhile (issue 57):
its channel's beats carry how long the current round has run; past ``agent_lag_max_s`` the
scheduler places nothing there (a job that fits only there waits saying why) until the agent
catches up. The agent's lease is not at stake: the beats go on."""

import threading

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


def test_a_node_whose_agent_is_behind_takes_no_new_work_until_it_catches_up(tmp_path):
    settings = Settings(data_dir=tmp_path, log_json=False, cycle_interval_s=0.2,
                        agent_lag_max_s=1.5)  # fmt: skip
    with live_server(settings, run_scheduler=True) as srv:
        admin = srv.admin()
        ok(admin.post("/api/v1/tenants", json={"name": "team"}), 201)
        stuck = make_agent(srv.url, srv.token("agent-n1", "agent", node="n1"), "n1",
                           tmp_path / "n1", heartbeat_s=0.3)  # fmt: skip
        release = threading.Event()
        limits = stuck._enforce_limits

        def hang(desired):  # one round that does not end: what a stalled write did
            release.wait(60)
            limits(desired)

        with agent_thread(stuck):
            wait_for_cards(admin, "n1")
            first = submit(admin, "gpu=1", "team", command=["sleep", "60"])
            wait_for("a job runs", in_state(admin, first["id"], "running"))
            stuck._enforce_limits = hang
            wait_for("the node behind", lambda: ok(admin.get("/api/v1/nodes/n1"))["agent_lag_s"]
                     > 1.5, 20)  # fmt: skip
            waiting = submit(admin, "gpu=1", "team", command=["true"])
            reason = wait_for(
                "the reason",
                lambda: "its agent behind" in (r := ok(admin.get(f"/api/v1/jobs/{waiting['id']}"))
                                               ["reason"]) and r,
                10,
            )  # fmt: skip
            assert ok(admin.get(f"/api/v1/jobs/{waiting['id']}"))["state"] == "pending"
            assert ok(admin.get("/api/v1/nodes/n1"))["state"] == "ready"  # its lease holds
            stuck._enforce_limits = limits
            release.set()
            wait_for("caught up", lambda: ok(admin.get("/api/v1/nodes/n1"))["agent_lag_s"] == 0)
            wait_for("placed once it caught up",
                     in_state(admin, waiting["id"], "running", "succeeded"), 20)  # fmt: skip
    assert reason == "0/1 nodes: 1 its agent behind", reason

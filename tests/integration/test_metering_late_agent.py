"""A job pays for the time its workload ran, not for the wait before (issue 57). A node's
agent busy elsewhere left a 1-second job ``admitted`` for 359 s and it was billed 360 s; a
``gpu=N`` job paid N cards for the wait. Here a real agent (a thread of the test) does not pick
its orders up for a few seconds — its order handling is held at a gate — while the server has
granted the cards; the job is billed its workload's run time only, and one cancelled before it
started is billed nothing, even when the stalled agent then starts it anyway."""

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gpupool.agent import Agent
from gpupool.agent.api import AgentApiError
from gpupool.server.lifecycle import metered_seconds
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
from tests.support.live import LiveServer, live_server

STALL_S = 4.0  # how long the agent leaves a granted job waiting
ONE_SECOND = ["python3", "-c", "import time; time.sleep(1)"]


@contextmanager
def _pool(tmp: Path) -> Iterator[tuple[LiveServer, Agent, threading.Event]]:
    """A server with its scheduler loop, tenant algo (4 cards guaranteed) and node n1's agent
    (4 simulated A100-80G), whose order handling waits at the gate until it is opened."""
    settings = Settings(data_dir=tmp, log_json=False, cycle_interval_s=0.2)
    with live_server(settings, run_scheduler=True) as srv:
        admin = srv.admin()
        ok(admin.post("/api/v1/tenants", json={"name": "algo"}), 201)
        ok(admin.put("/api/v1/tenants/algo/quotas/gpu", json={"resource": "gpu", "nominal": 4}))
        token = srv.token("agent-n1", "agent", node="n1")
        agent = make_agent(srv.url, token, "n1", tmp / "agent", devices="simulated:4xA100-80G")
        gate = threading.Event()
        gate.set()
        start = agent._start_safely

        def stalled(order):  # busy elsewhere: the order waits (bounded, never forever)
            gate.wait(30)
            start(order)

        agent._start_safely = stalled  # type: ignore[method-assign]
        with agent_thread(agent):
            wait_for_cards(admin, "n1")
            yield srv, agent, gate
            gate.set()


def _records(admin, job_id: int) -> list[dict]:
    items = ok(admin.get("/api/v1/usage", params={"limit": 1000}))["items"]
    return sorted((u for u in items if u["job_id"] == job_id), key=lambda u: u["start"])


def test_a_job_its_agent_starts_late_is_billed_only_its_run_time(tmp_path):
    with _pool(tmp_path) as (srv, _agent, gate):
        admin = srv.admin()
        gate.clear()
        job = submit(admin, "gpu=2", "algo", command=ONE_SECOND)
        granted = wait_for("the grant", in_state(admin, job["id"], "admitted"))
        assert isinstance(granted, dict)
        time.sleep(STALL_S)  # it sits admitted on its cards, the agent busy elsewhere
        opened = time.time()
        gate.set()
        done = wait_for("its end", in_state(admin, job["id"], "succeeded"), 30)
        assert isinstance(done, dict)
        records = _records(admin, job["id"])
    start, end = records[0]["start"], records[-1]["end"]
    # metered from the workload's start, which came after the gate opened (one clock here)
    assert granted["allocation"]["created_at"] + STALL_S < opened <= start < end
    seconds = sum(r["device_seconds"] for r in records)
    assert seconds == 2 * metered_seconds(start, end)  # both cards, over the run alone
    # its run as its agent measured it: the 1-second sleep plus the interpreter's start and
    # exit and the shim's bookkeeping (1.3-1.5 s on our 2-core machine), in whole seconds
    # (floor(end) - floor(start) adds under one): 1 or 2 a card, 3 allowed for a loaded
    # machine — with the stall counted (from the grant) it is at least 1 + STALL_S = 5 a card
    assert end - start < 2 + 1
    assert 2 * 1 <= seconds <= 2 * 3, records


def test_a_job_cancelled_before_its_workload_started_is_billed_nothing(tmp_path):
    with _pool(tmp_path) as (srv, agent, gate):
        admin = srv.admin()
        gate.clear()
        job = submit(admin, "gpu=1", "algo", command=["sleep", "30"])
        granted = wait_for("the grant", in_state(admin, job["id"], "admitted"))
        assert isinstance(granted, dict)
        time.sleep(1.5)
        ok(admin.post(f"/api/v1/jobs/{job['id']}/cancel"))
        usage = ok(admin.get("/api/v1/usage/summary"))["items"]
        # the agent, freed, starts the order it held; its running report is refused as stale
        # and it stops the workload: that start bills nothing either
        gate.set()
        alloc = granted["allocation"]
        stale = f"allocation {alloc['id']} generation {alloc['generation']}"
        wait_for("the stale start refused", lambda: stale in agent.refused, 20)
        records = _records(admin, job["id"])
        later = ok(admin.get("/api/v1/usage/summary"))["items"]
    assert usage == [] and records == [] and later == []


def test_a_running_report_the_server_did_not_get_is_sent_again_with_its_start(tmp_path):
    """The server was away as the workload started: the agent says it started, and when, in
    its next round — the meter starts then, not when the server first hears it."""
    with _pool(tmp_path) as (srv, agent, _gate):
        admin = srv.admin()
        report, sent = agent.api.report, []

        def first_lost(alloc_id, generation, state, **extra):
            if state == "running" and not sent:
                sent.append(extra["started_at"])
                raise AgentApiError("ConnectError: server away (test)")
            return report(alloc_id, generation, state, **extra)

        agent.api.report = first_lost  # type: ignore[method-assign]
        job = submit(admin, "gpu=1", "algo", command=["sleep", "30"])
        running = wait_for("the start, said again", in_state(admin, job["id"], "running"), 20)
        assert isinstance(running, dict)
        ok(admin.post(f"/api/v1/jobs/{job['id']}/cancel"))
    assert sent and running["allocation"]["started_at"] == sent[0]

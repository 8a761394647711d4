"""Orders by long poll: an idle agent's request waits at the server until its orders change;
agents and servers one version apart still work (an older agent asks without waiting; an
older server answers at once and sends no etag)."""

import json
import sys
import time

import pytest

from gpupool.server.settings import Settings
from tests.support.agents import (
    agent_thread,
    in_state,
    make_agent,
    no_workload_outlives_its_test,  # noqa: F401 - autouse: kills what a test left
    wait_for,
)
from tests.support.cli import gpupool
from tests.support.cluster import ok, submit
from tests.support.live import live_server

PY = sys.executable


def _settings(tmp_path, **extra) -> Settings:
    return Settings(data_dir=tmp_path, log_json=False, cycle_interval_s=0.2, **extra)


def _tenant(srv) -> None:
    admin = srv.admin()
    ok(admin.post("/api/v1/tenants", json={"name": "algo"}), 201)
    ok(admin.put("/api/v1/tenants/algo/quotas/gpu", json={"resource": "gpu", "nominal": 4}))


def _register(srv, name: str = "n1", cards: int = 1) -> str:
    devices = [{"index": i, "model": "A100-80G", "memory_mib": 81920} for i in range(cards)]
    node = {"name": name, "cpu_millis": 8000, "memory_mib": 65536, "devices": devices}
    ok(srv.admin().post("/api/v1/nodes", json=node))
    return srv.token(f"agent-{name}", "agent", node=name)


def test_a_long_poll_waits_for_a_change_and_an_older_agent_is_answered_at_once(tmp_path):
    with live_server(_settings(tmp_path), run_scheduler=True) as srv:
        _tenant(srv)
        agent = srv.client(_register(srv))
        started = time.monotonic()
        first = ok(agent.get("/api/v1/nodes/n1/orders"))  # as an older agent asks
        assert time.monotonic() - started < 1.0 and first["etag"] and first["orders"] == []
        started = time.monotonic()
        same = ok(
            agent.get("/api/v1/nodes/n1/orders", params={"wait": 1.0, "known": first["etag"]})
        )
        assert time.monotonic() - started >= 0.9 and same["etag"] == first["etag"]
        member = srv.client(srv.token("ann", "member", "algo"))
        job = submit(member, "gpu=1", command=[PY, "-c", "pass"])["id"]
        started = time.monotonic()
        changed = ok(
            agent.get("/api/v1/nodes/n1/orders", params={"wait": 20, "known": first["etag"]})
        )
        assert time.monotonic() - started < 5.0  # woken by the commit, not by the timeout
        assert [o["job_id"] for o in changed["orders"]] == [job] and changed["etag"] != first[
            "etag"
        ]
        stale = ok(
            agent.get("/api/v1/nodes/n1/orders", params={"wait": 20, "known": "not-an-etag"})
        )
        assert stale["etag"] == changed["etag"]  # an unknown etag is answered at once


def test_an_idle_agent_asks_rarely_and_still_starts_work_at_once(tmp_path):
    with live_server(_settings(tmp_path), run_scheduler=True) as srv:
        _tenant(srv)
        token = srv.token("agent-n1", "agent", node="n1")
        agent = make_agent(srv.url, token, "n1", tmp_path / "agent", heartbeat_s=5.0)
        with agent_thread(agent):
            admin = srv.admin()
            wait_for("registration", lambda: admin.get("/api/v1/nodes/n1").status_code == 200)
            time.sleep(0.5)
            poller_before = _requests(agent)
            time.sleep(3.0)
            idle = _requests(agent) - poller_before
            assert idle <= 1, f"{idle} order requests in 3 s of idling (sync_s is 0.1 s)"
            member = srv.client(srv.token("ann", "member", "algo"))
            started = time.monotonic()
            job = submit(member, "gpu=1", command=[PY, "-c", "import time; time.sleep(30)"])["id"]
            wait_for("running", in_state(member, job, "running"), timeout=10)
            assert time.monotonic() - started < 5.0


def _requests(agent) -> int:
    assert agent.poller is not None
    return agent.poller.requests


@pytest.mark.parametrize("database", ["sqlite"])
def test_a_newer_agent_works_with_a_server_that_does_not_wait(tmp_path, database):
    # orders_max_wait_s = 0 is a server as they were before long polls: no etag, no waiting
    with live_server(_settings(tmp_path, orders_max_wait_s=0), run_scheduler=True) as srv:
        _tenant(srv)
        plain = ok(
            srv.client(_register(srv, "n0", cards=0)).get(
                "/api/v1/nodes/n0/orders", params={"wait": 5, "known": "x"}
            )
        )
        assert plain.get("etag") is None
        token = srv.token("agent-n1", "agent", node="n1")
        agent = make_agent(srv.url, token, "n1", tmp_path / "agent")
        with agent_thread(agent):
            admin = srv.admin()
            wait_for("registration", lambda: admin.get("/api/v1/nodes/n1").status_code == 200)
            member = srv.client(srv.token("ann", "member", "algo"))
            job = submit(member, "gpu=1", command=[PY, "-c", "pass"])["id"]
            wait_for("succeeded", in_state(member, job, "succeeded"), timeout=20)


def test_bench_agents_delivers_every_order_every_way():
    """``gpupool bench agents`` at a small size: each protocol on its own server, every
    submitted job runs, two silenced nodes are declared lost after the server's timeout (and
    no other), long polls ask less often than polling, and channels send no more frames (beats)
    than long polls send requests."""
    out = gpupool(
        "bench", "agents", "--nodes", "10", "--seconds", "2", "--submits", "8",
        "--heartbeat-s", "1", "--silent", "2", "--heartbeat-timeout-s", "4", "--json",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    figures = json.loads(out.stdout)
    for protocol in ("poll", "long-poll", "channel"):
        assert figures[protocol]["running"] == figures[protocol]["submitted"] == 8
        assert figures[protocol]["idle_server_cpu_pct"] > 0
        assert figures[protocol]["silenced"] == 2 and figures[protocol]["lost_falsely"] == 0
        assert 4 <= figures[protocol]["lost_detected_s"] < 30
    assert figures["long-poll"]["idle_requests_per_s"] < figures["poll"]["idle_requests_per_s"]
    # a channel sends one frame per beat (10 nodes, 1 s) and nothing for its orders; long
    # polls' heartbeats come a round trip later than every second, so the two are compared
    # with the beats, not with each other
    assert figures["channel"]["idle_requests_per_s"] <= 10 * 1.05


def test_bench_agents_names_an_unknown_protocol():
    out = gpupool("bench", "agents", "--nodes", "10", "--protocol", "carrier-pigeon")
    assert out.returncode == 2
    assert "protocols are poll, long-poll, channel" in out.stderr and "Traceback" not in out.stderr


def test_a_server_going_away_answers_a_waiting_long_poll_at_once(tmp_path):
    """Shutting down does not wait out the agents' long polls (it once took their 25 s)."""
    import threading

    answers: list[int] = []
    with live_server(_settings(tmp_path)) as srv:
        agent = srv.client(_register(srv))
        etag = ok(agent.get("/api/v1/nodes/n1/orders"))["etag"]

        def wait() -> None:
            params = {"wait": 20, "known": etag}
            answers.append(agent.get("/api/v1/nodes/n1/orders", params=params).status_code)

        waiting = threading.Thread(target=wait)
        waiting.start()
        time.sleep(0.5)  # the request is waiting at the server
        assert not answers
        leaving = time.monotonic()
    waiting.join(timeout=30)
    assert answers == [200] and time.monotonic() - leaving < 5.0

"""Two server processes on one PostgreSQL database: one leads the scheduler; when it is
killed the other takes over within 10 s and keeps placing work."""

import time

import httpx

from tests.support.cluster import node_body
from tests.support.process import ServerProcess, admin_token


def _leader(url: str, token: str) -> bool:
    r = httpx.get(url + "/api/v1/status", headers={"Authorization": f"Bearer {token}"})
    return r.json()["leader"]


def test_standby_takes_the_lead_within_10s(tmp_path, postgres):
    url = postgres.new_database()
    token = admin_token(tmp_path, url)
    a = ServerProcess.start(tmp_path, url, cycle_s=0.5)
    b = ServerProcess.start(tmp_path, url, cycle_s=0.5)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not (_leader(a.url, token) or _leader(b.url, token)):
            time.sleep(0.1)
        leaders = [s for s in (a, b) if _leader(s.url, token)]
        assert len(leaders) == 1
        leader, standby = leaders[0], (b if leaders[0] is a else a)
        c = httpx.Client(base_url=standby.url, headers={"Authorization": f"Bearer {token}"})
        assert c.post("/api/v1/nodes", json=node_body("n0", cards=2)).status_code == 200
        assert c.post("/api/v1/tenants", json={"name": "t"}).status_code == 201
        first = c.post(
            "/api/v1/jobs", json={"request": "gpu=1", "tenant": "t", "command": ["true"]}
        ).json()
        deadline = time.monotonic() + 10  # placed by the leader, submitted to the standby
        while c.get(f"/api/v1/jobs/{first['id']}").json()["state"] != "admitted":
            assert time.monotonic() < deadline, "the leader did not place the job"
            time.sleep(0.1)
        leader.kill9()
        killed_at = time.monotonic()
        while not _leader(standby.url, token):
            assert time.monotonic() - killed_at < 10, "no take-over within 10 s"
            time.sleep(0.1)
        took = time.monotonic() - killed_at
        second = c.post(
            "/api/v1/jobs", json={"request": "gpu=1", "tenant": "t", "command": ["true"]}
        ).json()
        deadline = time.monotonic() + 10
        while c.get(f"/api/v1/jobs/{second['id']}").json()["state"] != "admitted":
            assert time.monotonic() < deadline, "the new leader does not schedule"
            time.sleep(0.1)
        devices = {
            c.get(f"/api/v1/jobs/{j['id']}").json()["allocation"]["nodes"][0]["devices"][0][
                "device"
            ]
            for j in (first, second)
        }
        assert devices == {0, 1}  # the new leader saw the old leader's allocation
        assert took < 10
    finally:
        a.stop()
        b.stop()


def test_an_agent_given_both_servers_moves_to_the_one_still_up(tmp_path, postgres):
    """Issue 44: agents took one --server, so a standby was reachable only through a
    floating address moved by hand. Given both, an agent whose server is killed goes on with
    the other: its node stays ready and new work reaches it."""
    from tests.support.agents import agent_thread, make_agent, wait_for

    url = postgres.new_database()
    token = admin_token(tmp_path, url)
    agent_token = admin_token(tmp_path, url, role="agent", name="agent-n0", node="n0")
    a = ServerProcess.start(tmp_path, url, cycle_s=0.5)
    b = ServerProcess.start(tmp_path, url, cycle_s=0.5)
    c = httpx.Client(base_url=b.url, headers={"Authorization": f"Bearer {token}"})
    agent = make_agent(f"{a.url},{b.url}", agent_token, "n0", tmp_path / "agent")
    try:
        assert c.post("/api/v1/tenants", json={"name": "t"}).status_code == 201
        with agent_thread(agent):
            wait_for("registered", lambda: c.get("/api/v1/nodes/n0").status_code == 200, 20)
            assert agent.api.server == a.url
            a.kill9()
            job = c.post("/api/v1/jobs", json={"request": "gpu=1", "tenant": "t",
                                               "command": ["true"]}).json()  # fmt: skip
            done = wait_for(
                "the job, run through the other server",
                lambda: (
                    (j := c.get(f"/api/v1/jobs/{job['id']}").json())["state"] == "succeeded" and j
                ),
                40,
            )
            moved_to = agent.api.server
            node = c.get("/api/v1/nodes/n0").json()
    finally:
        a.stop()
        b.stop()
    assert done["exit_code"] == 0 and moved_to == b.url and node["state"] == "ready"

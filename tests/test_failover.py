"""Two server processes on one PostgreSQL database: one leads the scheduler; when it is
killed the other takes over within 10 s and keeps placing work."""

import time

import httpx

from tests.support.cluster import node_body
from tests.support.process import ServerProcess
from tests.test_reliability import _admin_token


def _leader(url: str, token: str) -> bool:
    r = httpx.get(url + "/api/v1/status", headers={"Authorization": f"Bearer {token}"})
    return r.json()["leader"]


def test_standby_takes_the_lead_within_10s(tmp_path, postgres):
    url = postgres.new_database()
    token = _admin_token(tmp_path, url)
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

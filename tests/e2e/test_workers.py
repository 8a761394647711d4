"""A server with two API worker processes on one SQLite file: concurrent submissions through
both workers' group commits, and a /metrics that counts every worker's work whichever worker
answers the scrape. Bounded loops only."""

import os
import signal
import subprocess
import sys
import threading
import time

import httpx
from prometheus_client.parser import text_string_to_metric_families

from gpupool.server.app import SUPERVISOR_PID
from gpupool.server.db.engine import Database
from tests.support.cluster import seed_client
from tests.support.invariants import assert_consistent
from tests.support.process import ServerProcess, admin_token


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _submit_all(url: str, token: str, keys: list[str], answers: dict[str, set[int]]) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, timeout=30, headers=headers) as c:
        for key in keys:
            r = c.post(
                "/api/v1/jobs",
                json={
                    "request": "gpu=1",
                    "tenant": "t",
                    "idempotency_key": key,
                    "command": ["true"],
                },
            )
            assert r.status_code in (200, 201), r.text
            answers.setdefault(key, set()).add(r.json()["id"])


def test_two_workers_share_one_sqlite_file_and_one_metrics_view(tmp_path):
    token = admin_token(tmp_path)
    server = ServerProcess.start(tmp_path, cycle_s=0.2, workers=2)
    try:
        client = seed_client(server.url, token, nodes=3, cards=4, tenants=["t"])
        answers: dict[str, set[int]] = {}
        # four clients, each key sent by two of them at the same time
        parts = [[f"k-{i}" for i in range(10 * (n % 2), 10 * (n % 2) + 10)] for n in range(4)]
        threads = [
            threading.Thread(target=_submit_all, args=(server.url, token, part, answers))
            for part in parts
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert len(answers) == 20
        assert all(len(ids) == 1 for ids in answers.values()), "a key made two jobs"
        deadline = time.monotonic() + 30
        admitted = 0
        while time.monotonic() < deadline and admitted < 12:
            jobs = client.get("/api/v1/jobs", params={"limit": 100}).json()["items"]
            admitted = sum(j["state"] in ("admitted", "running") for j in jobs)
            time.sleep(0.2)
        assert admitted == 12  # 3 nodes x 4 cards
        counts = assert_consistent(Database(f"sqlite:///{tmp_path / 'gpupool.db'}"))
        assert counts.get("pending") == 8
        for _ in range(8):  # fresh connections: the kernel hands them to either worker
            auth = {"Authorization": f"Bearer {token}"}
            text = httpx.get(f"{server.url}/metrics", headers=auth, timeout=30).text
            samples = _samples(text)
            assert samples[("gpupool_admissions_total", (("tenant", "t"),))] == 12
            posts = sum(
                v
                for (name, labels), v in samples.items()
                if name == "gpupool_api_request_seconds_count"
                and ("route", "/api/v1/jobs") in labels
                and ("method", "POST") in labels
            )
            assert posts == 40
    finally:
        server.stop()


def test_workers_stop_when_their_supervisor_is_killed(tmp_path):
    server = ServerProcess.start(tmp_path, workers=2)
    try:
        assert httpx.get(f"{server.url}/healthz", timeout=10).status_code == 200
        server.kill9()  # the supervisor only: its workers must not keep serving the port
        deadline = time.monotonic() + 20
        serving = True
        while serving and time.monotonic() < deadline:
            try:
                httpx.get(f"{server.url}/healthz", timeout=2)
                time.sleep(0.5)
            except httpx.HTTPError:
                serving = False
        assert not serving, "orphaned workers still answer after the supervisor died"
    finally:
        server.stop()


def test_a_worker_started_after_its_supervisor_died_stops_too():
    """The race the test above can hit: a worker still starting when the supervisor is
    killed is already re-parented, so it must compare with the pid the supervisor exported."""
    code = (
        "import time\n"
        "from gpupool.server.app import exit_with_parent\n"
        "exit_with_parent(poll_s=0.1)\n"
        "time.sleep(20)\n"
    )
    env = {**os.environ, SUPERVISOR_PID: str(os.getpid() + 10**6)}  # not this process's parent
    proc = subprocess.run([sys.executable, "-c", code], env=env, timeout=15, check=False)
    assert proc.returncode == -signal.SIGTERM

"""Real server processes under abuse: kill -9 during submissions, 100 concurrent clients.
Every loop here is bounded in count and time."""

import random
import threading
import time

import httpx

from gpupool.server.db.engine import Database
from tests.support.cluster import seed_client
from tests.support.invariants import assert_consistent
from tests.support.process import ServerProcess, admin_token


def _wait_settled(client: httpx.Client, timeout: float = 30) -> None:
    """Until two cycles in a row leave nothing admittable (bounded)."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        now = client.get("/api/v1/jobs", params={"state": "pending", "limit": 1}).json()["total"]
        if now == last:
            return
        last = now
        time.sleep(1.0)


def test_kill9_during_submissions_loses_and_duplicates_nothing(tmp_path):
    token = admin_token(tmp_path)
    server = ServerProcess.start(tmp_path, cycle_s=0.2)
    acked: dict[str, int] = {}
    keys = [f"k-{i}" for i in range(2000)]
    lock = threading.Lock()
    stop = threading.Event()
    try:
        seed_client(server.url, token, nodes=4, cards=4, tenants=["t"])

        def submitter(part: list[str]) -> None:
            with httpx.Client(
                base_url=server.url, timeout=5, headers={"Authorization": f"Bearer {token}"}
            ) as c:
                for key in part:
                    if stop.is_set():
                        return
                    body = {"request": "gpu=1", "tenant": "t", "idempotency_key": key}
                    body["command"] = ["true"]
                    try:
                        r = c.post("/api/v1/jobs", json=body)
                    except httpx.HTTPError:
                        return  # the server is gone
                    if r.status_code in (200, 201):
                        with lock:
                            acked[key] = r.json()["id"]

        threads = [threading.Thread(target=submitter, args=(keys[i::4],)) for i in range(4)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 20
        while len(acked) < 150 and time.monotonic() < deadline:
            time.sleep(0.01)
        server.kill9()
        stop.set()
        for t in threads:
            t.join(timeout=30)
        assert 150 <= len(acked) < len(keys)
        server = ServerProcess.start(tmp_path, cycle_s=0.2)
        c = httpx.Client(
            base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=30
        )
        for key, job_id in acked.items():  # every acknowledged submission survived
            r = c.get(f"/api/v1/jobs/{job_id}")
            assert r.status_code == 200 and r.json()["idempotency_key"] == key
        retried = set(keys[: max(acked.values()) + 50])
        for key in sorted(retried | set(acked)):  # clients retry everything not acknowledged
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
            if key in acked:
                assert r.status_code == 200 and r.json()["id"] == acked[key]
        total = c.get("/api/v1/jobs", params={"limit": 1}).json()["total"]
        assert total == len(retried | set(acked))  # no duplicates
        _wait_settled(c)
        db = Database(f"sqlite:///{tmp_path / 'gpupool.db'}")
        counts = assert_consistent(db)
        db.dispose()
        assert counts.get("admitted", 0) == 16  # 4 nodes x 4 cards, each job one card
    finally:
        server.stop()


def test_100_concurrent_clients_submit_and_cancel(tmp_path, database_url):
    token = admin_token(tmp_path, database_url)
    url = "" if database_url.startswith("sqlite") else database_url
    if not url:
        database_url = f"sqlite:///{tmp_path / 'gpupool.db'}"
    server = ServerProcess.start(tmp_path, url, cycle_s=0.1)
    tenants = ["a", "b", "c", "d"]
    errors: list[str] = []
    try:
        admin = seed_client(server.url, token, nodes=3, cards=4, tenants=tenants)
        member_tokens = []
        for i, t in enumerate(tenants):
            r = admin.post("/api/v1/users", json={"name": f"u{i}", "role": "member", "tenant": t})
            member_tokens.append(r.json()["token"])

        def client(n: int) -> None:
            rng = random.Random(n)
            token_ = member_tokens[n % len(tenants)]
            with httpx.Client(
                base_url=server.url, timeout=60, headers={"Authorization": f"Bearer {token_}"}
            ) as c:
                mine = []
                for _ in range(3):
                    spec = rng.choice(["gpu=1", "gpu=2", "gpu=4,cpu=8", "cpu=2"])
                    r = c.post("/api/v1/jobs", json={"request": spec, "command": ["true"]})
                    if r.status_code != 201:
                        errors.append(f"submit {r.status_code} {r.text}")
                        return
                    mine.append(r.json()["id"])
                    time.sleep(rng.random() * 0.05)
                for job_id in rng.sample(mine, 2):
                    r = c.post(f"/api/v1/jobs/{job_id}/cancel")
                    if r.status_code not in (200, 409):
                        errors.append(f"cancel {r.status_code} {r.text}")

        threads = [threading.Thread(target=client, args=(n,)) for n in range(100)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not errors, errors[:5]
        _wait_settled(admin)
        db = Database(database_url)
        counts = assert_consistent(db)
        db.dispose()
        assert sum(counts.values()) == 300
        assert counts["cancelled"] == 200
        assert counts.get("admitted", 0) >= 1
    finally:
        server.stop()

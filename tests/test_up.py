"""``gpupool up``: the quick start's main job, as a real process."""

import signal
import stat
import subprocess
import sys
import time

import httpx

from gpupool.client import wait_until_healthy
from gpupool.server.process import free_port


def _start(data_dir, port):
    cmd = [
        sys.executable,
        "-m",
        "gpupool.cli.main",
        "up",
        "--data-dir",
        str(data_dir),
        "--port",
        str(port),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_until_healthy(f"http://127.0.0.1:{port}", lambda: proc.poll() is None)
    return proc


def test_up_serves_the_seed_cluster_and_stops_cleanly(tmp_path):
    port = free_port()
    proc = _start(tmp_path, port)
    try:
        token_file = tmp_path / "admin-token"
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        token = token_file.read_text().strip()
        c = httpx.Client(
            base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {token}"}
        )
        nodes = c.get("/api/v1/nodes").json()
        assert nodes["total"] == 10
        assert all(len(n["devices"]) == 4 for n in nodes["items"])
        assert {d["model"] for n in nodes["items"] for d in n["devices"]} == {"A100-80G"}
        tenants = {t["name"]: t for t in c.get("/api/v1/tenants").json()["items"]}
        guarantees = {n: t["quotas"][0]["nominal"] for n, t in tenants.items() if t["quotas"]}
        assert guarantees == {"algorithm": 20.0, "inference": 10.0, "devtest": 10.0}
        job = c.post("/api/v1/jobs", json={"request": "gpu=4", "tenant": "algorithm"}).json()
        deadline = time.monotonic() + 10
        while c.get(f"/api/v1/jobs/{job['id']}").json()["state"] != "admitted":
            assert time.monotonic() < deadline, "the scheduler loop did not place the job"
            time.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert token in out and f"http://127.0.0.1:{port}" in out
    assert "Traceback" not in err
    # a second start on the same data keeps everything and the same token
    proc = _start(tmp_path, port)
    try:
        c = httpx.Client(
            base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {token}"}
        )
        assert c.get("/api/v1/nodes").json()["total"] == 10
        assert c.get("/api/v1/jobs").json()["total"] == 1
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)
    assert proc.returncode == 0

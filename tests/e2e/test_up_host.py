"""What ``gpupool up`` does to its host (issue 59, finding 10): two instances on one host never
share a team's Unix user silently (each job of ``devtest`` ran as ``gp-devtest`` whichever
instance it belonged to); on its way out ``up`` says what it leaves on the host and how to
remove it; and its foreground prints no log line per scheduling cycle under the admin token."""

import os
import signal
import subprocess
import sys

import httpx
import pytest

from gpupool.client import wait_until_healthy
from gpupool.server.process import free_port
from tests.support.agents import wait_for

ROOT = os.geteuid() == 0


def _start(data_dir, port):
    cmd = [sys.executable, "-m", "gpupool.cli.main", "up", "--data-dir", str(data_dir),
           "--port", str(port), "--nodes", "1"]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "GPUPOOL_LOG_LEVEL"}
    up = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    wait_until_healthy(f"http://127.0.0.1:{port}", lambda: up.poll() is None)
    return up


def _whoami(data_dir, port) -> str:
    """The Unix user a devtest job of this instance runs as."""
    token = (data_dir / "admin-token").read_text().strip()
    c = httpx.Client(
        base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {token}"}
    )
    wait_for("its node", lambda: c.get("/api/v1/nodes", params={"state": "ready"}).json()["total"])
    job = c.post(
        "/api/v1/jobs", json={"request": "cpu=1", "tenant": "devtest", "command": ["id", "-un"]}
    ).json()
    wait_for("the job", lambda: c.get(f"/api/v1/jobs/{job['id']}").json()["finished_at"], 60)
    chunks = c.get(f"/api/v1/jobs/{job['id']}/logs").json()["chunks"]
    return "".join(x["text"] for x in chunks if x["stream"] == "stdout").strip()


def _stop(up) -> tuple[str, str]:
    up.send_signal(signal.SIGTERM)
    out, err = up.communicate(timeout=60)
    assert up.returncode == 0, err
    return out, err


@pytest.mark.skipif(not ROOT, reason="tenant users need root")
def test_two_instances_never_share_a_teams_user_and_say_what_they_leave(tmp_path):
    first_dir, second_dir = tmp_path / "first", tmp_path / "second"
    first_port, second_port = free_port(), free_port()
    first = _start(first_dir, first_port)
    second = None
    try:
        first_user = _whoami(first_dir, first_port)
        second = _start(second_dir, second_port)
        second_user = _whoami(second_dir, second_port)
    finally:
        if second is not None:
            second_out, _ = _stop(second)
        first_out, _ = _stop(first)
    assert first_user != second_user, (first_user, second_user)
    assert first_user.endswith("devtest") and second_user.endswith("devtest")
    # the second says whose prefix it could not take, and which one its teams run as
    prefix = second_user.removesuffix("devtest")
    assert f"as {prefix}<team>" in second_out, second_out
    assert str(first_dir) in second_out, second_out
    # on the way out: what stays on the host, and how to remove it
    for out, user in ((first_out, first_user), (second_out, second_user)):
        assert "left on this host" in out, out
        said = out.split("left on this host", 1)[1]
        assert "userdel " in said and user in said, out
        assert "/var/lib/gpupool/work" in out
    # the prefix is the data folder's: started again alone, the second keeps its own
    again = _start(second_dir, second_port)
    try:
        assert _whoami(second_dir, second_port) == second_user
    finally:
        _stop(again)


def test_the_foreground_prints_no_line_per_scheduling_cycle(tmp_path):
    port = free_port()
    up = _start(tmp_path, port)
    try:
        _whoami(tmp_path, port)  # a job placed: cycles that admitted something ran
    finally:
        _, err = _stop(up)
    assert '"message": "cycle"' not in err, err

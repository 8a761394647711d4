"""``gpupool up``: the quick start's main job, as a real process with its embedded agents."""

import os
import signal
import stat
import subprocess
import sys

import httpx

from gpupool.agent import processes as proc
from gpupool.client import wait_until_healthy
from gpupool.client.demo import demo_jobs
from gpupool.server.process import free_port
from tests.support.agents import wait_for, workload_groups


def _start(data_dir, port, *extra):
    cmd = [sys.executable, "-m", "gpupool.cli.main", "up", "--data-dir", str(data_dir)]
    cmd += ["--port", str(port), *extra]
    proc_ = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_until_healthy(f"http://127.0.0.1:{port}", lambda: proc_.poll() is None)
    return proc_


def test_up_demo_runs_the_seed_cluster_busy_and_stops_cleanly(tmp_path):
    port = free_port()
    up = _start(tmp_path, port, "--demo")
    try:
        token_file = tmp_path / "admin-token"
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        token = token_file.read_text().strip()
        c = httpx.Client(
            base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {token}"}
        )
        nodes = wait_for(
            "10 agents",
            lambda: (
                (n := c.get("/api/v1/nodes", params={"state": "ready"}).json())["total"] == 10 and n
            ),
            30,
        )
        assert all(len(n["devices"]) == 4 for n in nodes["items"])
        assert {d["model"] for n in nodes["items"] for d in n["devices"]} == {"A100-80G"}
        tenants = {t["name"]: t for t in c.get("/api/v1/tenants").json()["items"]}
        guarantees = {n: t["quotas"][0]["nominal"] for n, t in tenants.items() if t["quotas"]}
        assert guarantees == {"algorithm": 20.0, "inference": 10.0, "devtest": 10.0}

        def busy() -> bool:  # the pool is busy within a minute: most cards run a real job
            running = c.get("/api/v1/jobs", params={"state": "running", "limit": 500}).json()
            return running["total"] >= 15

        wait_for("a busy pool", busy, 60)
        # a record may outlive its process for a moment (a preempted dev job being reaped),
        # so count the live ones
        groups = workload_groups(tmp_path)
        assert sum(1 for g in groups if proc.start_ticks(g)) >= 15
        assert stat.S_IMODE(tmp_path.stat().st_mode) == 0o700 or os.geteuid() != 0
        assert stat.S_IMODE((tmp_path / "gpupool.db").stat().st_mode) == 0o600
        if os.geteuid() == 0:  # tenant users: a team's job reads none of the server's files
            peek = f"cat {tmp_path}/admin-token {tmp_path}/agent-token; id -un"
            job = c.post(
                "/api/v1/jobs",
                json={"request": "cpu=1", "tenant": "devtest", "command": ["sh", "-c", peek]},
            ).json()
            wait_for("peek", lambda: c.get(f"/api/v1/jobs/{job['id']}").json()["finished_at"])
            chunks = c.get(f"/api/v1/jobs/{job['id']}/logs").json()["chunks"]
            text = "".join(x["text"] for x in chunks)
            # each read fails: denied, or (the data dir under /tmp here) not even visible
            # from the workload's private /tmp
            refused = text.count("Permission denied") + text.count("No such file or directory")
            assert "gp_" not in text and refused == 2, text
            out = "".join(x["text"] for x in chunks if x["stream"] == "stdout")  # stderr's
            assert out.splitlines() == ["gp-devtest"], text  # chunks may come first or after
    finally:
        up.send_signal(signal.SIGTERM)
        out, err = up.communicate(timeout=60)
    assert up.returncode == 0, err
    assert token in out and f"http://127.0.0.1:{port}" in out
    isolation = "tenant-users" if os.geteuid() == 0 else "none"
    assert f"workloads: isolation {isolation}" in out
    assert "Traceback" not in err
    assert "ConnectError" not in err  # the agents stopped before the server did
    assert not any(proc.start_ticks(g) for g in groups)  # workloads stopped on the way out
    # a second start on the same data keeps everything, the same token, and submits no dupes;
    # the jobs the shutdown stopped are requeued and run again, none is failed
    up = _start(tmp_path, port, "--demo")
    try:
        c = httpx.Client(
            base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {token}"}
        )
        assert c.get("/api/v1/nodes").json()["total"] == 10
        # busy again with new processes (the jobs' rows alone still say "running")
        wait_for(
            "workloads running again",
            lambda: sum(1 for g in workload_groups(tmp_path) if proc.start_ticks(g)) >= 15,
            60,
        )
        peeked = 1 if os.geteuid() == 0 else 0  # the job that tried the token files
        assert c.get("/api/v1/jobs").json()["total"] == len(demo_jobs()) + peeked
        failed = c.get("/api/v1/jobs", params={"state": "failed"}).json()
        assert failed["total"] == 0, [j["reason"] for j in failed["items"]]
    finally:
        up.send_signal(signal.SIGINT)
        up.communicate(timeout=60)
    assert up.returncode == 0


def test_up_prints_how_to_log_in_only_once_the_server_answers(tmp_path):
    """The quick start's next step is the printed ``gpupool login`` line: run at the moment
    it appears, it must reach the server (it was printed before the server listened)."""
    import queue
    import shlex
    import threading
    import time

    port = free_port()
    cmd = [sys.executable, "-m", "gpupool.cli.main", "up", "--data-dir", str(tmp_path)]
    up = subprocess.Popen(
        [*cmd, "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in up.stdout], daemon=True).start()
    try:
        deadline, login = time.monotonic() + 60, None
        while login is None:
            assert time.monotonic() < deadline and up.poll() is None, "no login line"
            try:
                line = lines.get(timeout=1)
            except queue.Empty:
                continue
            if line.startswith("try: gpupool login"):
                login = line.removeprefix("try: ").strip()
        token = (tmp_path / "admin-token").read_text().strip()
        argv = shlex.split(login.replace(f"$(cat {tmp_path}/admin-token)", token))
        home = tmp_path / "home"
        home.mkdir()
        env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
        env.pop("GPUPOOL_SERVER", None)
        env.pop("GPUPOOL_TOKEN", None)
        done = subprocess.run(
            [sys.executable, "-m", "gpupool.cli.main", *argv[1:]],
            capture_output=True, text=True, env=env, timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        assert "cannot reach" not in done.stderr
    finally:
        up.send_signal(signal.SIGTERM)
        up.communicate(timeout=60)


def test_a_second_up_on_the_same_folder_or_port_refuses_before_starting_anything(tmp_path):
    """The README's second terminal once ran ``gpupool up --demo`` beside the running one: it
    printed "ready", its agents joined the first server and pushed jobs into it, then it died
    on "address already in use". Now it refuses at once, naming what holds the folder or port."""
    port = free_port()
    first = _start(tmp_path, port)
    try:
        token = (tmp_path / "admin-token").read_text().strip()
        c = httpx.Client(
            base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {token}"}
        )
        wait_for("10 agents", lambda: c.get("/api/v1/nodes").json()["total"] == 10, 30)
        cmd = [sys.executable, "-m", "gpupool.cli.main", "up"]
        same_folder = subprocess.run(
            [*cmd, "--data-dir", str(tmp_path), "--port", str(free_port()), "--demo"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        other = tmp_path / "other"
        same_port = subprocess.run(
            [*cmd, "--data-dir", str(other), "--port", str(port), "--demo"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        jobs = c.get("/api/v1/jobs").json()["total"]
        nodes = c.get("/api/v1/nodes").json()["total"]
    finally:
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=60)
    assert same_folder.returncode == 2 and "ready" not in same_folder.stdout
    assert f"{tmp_path} is in use by a running gpupool (pid {first.pid}" in same_folder.stderr
    assert f"http://127.0.0.1:{port}" in same_folder.stderr
    assert same_port.returncode == 2 and "ready" not in same_port.stdout
    assert f"port {port} on 127.0.0.1 is in use" in same_port.stderr
    assert not (other / "gpupool.db").exists()  # refused before the database was made
    assert (jobs, nodes) == (0, 10)  # nothing of the refused ones reached the first
    again = _start(tmp_path, port)  # the lock went with the first process
    again.send_signal(signal.SIGINT)
    again.communicate(timeout=60)
    assert again.returncode == 0


def test_up_with_workers_runs_the_server_beside_its_agents_and_stops_cleanly(tmp_path):
    """``gpupool up --workers 2`` (the default above 100 nodes): the API in two worker
    processes, the scheduler in its own, the embedded agents in the up process. A job runs;
    SIGTERM stops the agents first (no calls to a server already gone), then everything."""
    from gpupool.bench.procfs import server_processes
    from tests.support.process import alive

    port = free_port()
    up = _start(tmp_path, port, "--nodes", "3", "--workers", "2")
    try:
        kinds = sorted(server_processes(up.pid).values())
        assert kinds == ["api", "api", "scheduler"]
        token = (tmp_path / "admin-token").read_text().strip()
        c = httpx.Client(
            base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {token}"}
        )
        wait_for(
            "3 agents",
            lambda: c.get("/api/v1/nodes", params={"state": "ready"}).json()["total"] == 3,
            30,
        )
        job = c.post(
            "/api/v1/jobs", json={"request": "gpu=1", "tenant": "devtest", "command": ["true"]}
        ).json()
        wait_for(
            "the job to succeed",
            lambda: c.get(f"/api/v1/jobs/{job['id']}").json()["state"] == "succeeded",
            30,
        )
        children = list(server_processes(up.pid))
    finally:
        up.send_signal(signal.SIGTERM)
        _, err = up.communicate(timeout=60)
    assert up.returncode == 0, err
    assert "Traceback" not in err
    assert "disconnected" not in err and "ConnectError" not in err, err
    assert not [p for p in children if alive(p)], "a worker or the scheduler outlived up"

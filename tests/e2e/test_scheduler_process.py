"""``gpupool server --workers 2``: the scheduler runs in a process of its own beside the API
workers, woken by them through a socket; when it dies a worker takes the lead and the pool
keeps scheduling. Bounded loops only."""

import json
import os
import signal
import socket
import time

import httpx

from gpupool.bench.procfs import server_processes
from gpupool.server.db.engine import Database
from gpupool.server.loop import SchedulerLoop
from gpupool.server.metrics import Metrics
from gpupool.server.settings import Settings
from gpupool.server.wake import WakeListener, WakeSender
from tests.support.cli import gpupool
from tests.support.cluster import seed_client
from tests.support.process import ServerProcess, admin_token, alive


def test_a_poke_wakes_the_listener_and_never_fails_without_one():
    name = f"gpupool-test-wake-{os.getpid()}"
    WakeSender(name).poke()  # nobody listens yet: no error
    listener = WakeListener(name)
    try:
        assert not listener.wait(0.05)
        sender = WakeSender(name)
        for _ in range(3):
            sender.poke()
        assert listener.wait(1.0)
        assert not listener.wait(0.05), "three pokes queued before a wait are one wake"
    finally:
        listener.close()


def test_a_worker_loop_pokes_the_scheduler_process(tmp_path):
    name = f"gpupool-test-loop-{os.getpid()}"
    listener = WakeListener(name)
    db = Database(f"sqlite:///{tmp_path / 'gpupool.db'}")
    try:
        loop = SchedulerLoop(db, Settings(data_dir=tmp_path), Metrics(db))
        loop.wake()  # no scheduler process: only its own loop
        assert not listener.wait(0.05)
        loop.remote = WakeSender(name)
        loop.wake()
        assert listener.wait(1.0)
    finally:
        listener.close()
        db.dispose()


def _status(client: httpx.Client) -> dict:
    return client.get("/api/v1/status").json()


def _placed(client: httpx.Client, timeout: float = 15) -> None:
    job = client.post("/api/v1/jobs", json={"request": "gpu=1", "tenant": "t", "command": ["true"]})
    assert job.status_code == 201, job.text
    deadline = time.monotonic() + timeout
    while client.get(f"/api/v1/jobs/{job.json()['id']}").json()["state"] != "admitted":
        assert time.monotonic() < deadline, "the job was not placed"
        time.sleep(0.1)


def test_the_scheduler_process_leads_and_a_worker_takes_over_when_it_dies(tmp_path):
    token = admin_token(tmp_path)
    server = ServerProcess.start(tmp_path, cycle_s=30, workers=2)
    try:
        client = seed_client(server.url, token, nodes=2, cards=2, tenants=["t"])
        scheduler = [p for p, k in server_processes(server.proc.pid).items() if k == "scheduler"]
        assert len(scheduler) == 1
        status = _status(client)
        assert status["scheduler"] == f"{socket.gethostname()}:{scheduler[0]}"
        assert status["leader"] is False  # the worker that answered stands by
        _placed(client)  # submitted to a worker, placed by the scheduler process
        os.kill(scheduler[0], signal.SIGKILL)
        deadline = time.monotonic() + 15
        while _status(client)["scheduler"] == status["scheduler"]:
            assert time.monotonic() < deadline, "no worker took the scheduler lead"
            time.sleep(0.2)
        workers = {p for p, k in server_processes(server.proc.pid).items() if k == "api"}
        assert int(_status(client)["scheduler"].rsplit(":", 1)[1]) in workers
        _placed(client)
    finally:
        server.stop()


def test_the_scheduler_process_stops_when_its_supervisor_is_killed(tmp_path):
    """Else it would keep the scheduler lock, and a restarted server could never lead."""
    server = ServerProcess.start(tmp_path, workers=2)
    try:
        (scheduler,) = [p for p, k in server_processes(server.proc.pid).items() if k == "scheduler"]
        server.kill9()
        deadline = time.monotonic() + 20
        while alive(scheduler):
            assert time.monotonic() < deadline, "the scheduler process outlived its supervisor"
            time.sleep(0.2)
    finally:
        server.stop()


def test_bench_api_places_everything_and_says_where_time_went():
    """A small ``gpupool bench api`` on two workers: every submission placed, and the CPU
    of each kind of process (the scheduler's own among them) with the server's averages."""
    out = gpupool(
        "bench", "api", "--nodes", "40", "--submits", "200", "--concurrency", "4",
        "--workers", "2", "--json",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    figures = json.loads(out.stdout)
    assert figures["placed"] == 200 and figures["workers"] == 2
    assert set(figures["cpu_seconds"]) == {"load_generator", "api", "scheduler"}
    assert figures["cpu_seconds"]["api"] > 0
    assert figures["cycles"] >= 1 and figures["cycle_mean_ms"] > 0
    assert figures["submit_route_mean_ms"] > 0


def test_a_second_server_starts_while_the_first_leads_and_takes_over_when_it_dies(tmp_path):
    """Two multi-worker servers on one database: the second's scheduler process cannot lead,
    so it stands by (the server starts anyway) and takes the lead once the first is gone."""
    token = admin_token(tmp_path)
    first = ServerProcess.start(tmp_path, workers=2)
    second = None
    try:
        client = seed_client(first.url, token, nodes=1, cards=2, tenants=["t"])
        leading = _status(client)["scheduler"]
        second = ServerProcess.start(tmp_path, workers=2)
        (standby,) = [p for p, k in server_processes(second.proc.pid).items() if k == "scheduler"]
        assert _status(client)["scheduler"] == leading
        first.kill9()  # its workers and scheduler process follow within a second or two
        other = httpx.Client(
            base_url=second.url, headers={"Authorization": f"Bearer {token}"}, timeout=30
        )
        mine = {f"{socket.gethostname()}:{p}" for p in server_processes(second.proc.pid)}
        deadline = time.monotonic() + 20  # the first's workers may lead a moment as they die
        while _status(other)["scheduler"] not in mine:
            assert time.monotonic() < deadline, "the second server never took the lead"
            time.sleep(0.2)
        assert alive(standby)
        _placed(other)
    finally:
        first.stop()
        if second is not None:
            second.stop()

"""At most once across node loss (DESIGN.md invariant 8): a node's workloads stop themselves
once its agent has not been heard by the server for the lease time, strictly before the server
requeues their jobs — also when the agent was killed with SIGKILL or cut off from the server.
Each workload prints the wall-clock time every 20 ms, so its last line says when it stopped."""

import signal
import sys
import time
from pathlib import Path

import pytest

from gpupool.agent import processes as proc
from gpupool.agent.lease import write_lease
from gpupool.server.settings import Settings
from tests.support.agents import (
    agent_process,
    agent_thread,
    in_state,
    job_state,
    kill9,
    make_agent,
    no_workload_outlives_its_test,  # noqa: F401 - autouse: kills what a test left
    partitioned,
    wait_for,
    workload_groups,
)
from tests.support.cluster import ok, submit
from tests.support.live import live_server

PY = sys.executable
TICK = [
    PY,
    "-c",
    "import time\nwhile True:\n    print(f'{time.time():.3f}', flush=True)\n    time.sleep(0.02)",
]
TIMEOUT_S = 2.0  # the server's node-lost timeout: lease 1.33 s, SIGKILL 0.22 s after


def _settings(tmp_path, database_url: str = "") -> Settings:
    return Settings(
        data_dir=tmp_path,
        database_url=database_url,
        log_json=False,
        cycle_interval_s=0.2,
        heartbeat_timeout_s=TIMEOUT_S,
    )


def _tenant(srv) -> None:
    admin = srv.admin()
    ok(admin.post("/api/v1/tenants", json={"name": "algo"}), 201)
    ok(admin.put("/api/v1/tenants/algo/quotas/gpu", json={"resource": "gpu", "nominal": 4}))


def _ticks(folder: Path) -> list[float]:
    try:
        return [float(x) for x in (folder / "stdout").read_text().split()]
    except OSError:
        return []


def _folders(state_dir: Path) -> list[Path]:
    return sorted((state_dir / "workloads").iterdir())


def _event_time(admin, job_id: int, state: str) -> float:
    events = admin.get(f"/api/v1/jobs/{job_id}/events").json()
    return max(e["time"] for e in events if e["to_state"] == state)


def _was_lost(admin, job_id: int):
    def check() -> bool:
        events = admin.get(f"/api/v1/jobs/{job_id}/events").json()
        return any(e["to_state"] == "lost" for e in events)

    return check


def _pids(state_dir: Path) -> set[int]:
    pids: set[int] = set()
    for pgid in workload_groups(state_dir):
        pids |= proc.group_pids(pgid)
    return pids


@pytest.mark.parametrize("on_lost, after", [("requeue", "pending"), ("fail", "failed")])
def test_a_killed_agents_workloads_stop_before_their_jobs_are_requeued(
    on_lost, after, database_url, tmp_path
):
    with live_server(_settings(tmp_path, database_url), run_scheduler=True) as live:
        _tenant(live)
        admin = live.admin()
        token = live.token("agents", "agent", node="*")
        state_dir = tmp_path / "agent-n1"
        agent = agent_process(live.url, token, "n1", state_dir)
        try:
            wait_for("node", lambda: admin.get("/api/v1/nodes/n1").status_code == 200)
            jobs = [
                submit(admin, "gpu=1", "algo", command=TICK, on_lost=on_lost)["id"]
                for _ in range(2)
            ]
            for job in jobs:
                wait_for("running", in_state(admin, job, "running"))
            orphans = _pids(state_dir)
            folders = _folders(state_dir)
            wait_for("ticks", lambda: all(_ticks(f) for f in folders))
            with agent_thread(make_agent(live.url, token, "n2", tmp_path / "agent-n2")) as n2:
                wait_for("n2", lambda: admin.get("/api/v1/nodes/n2").status_code == 200)
                killed = time.time()
                kill9(agent)
                for job in jobs:
                    wait_for("node lost", _was_lost(admin, job), 30)
                # the orphans were gone before the server gave their jobs up
                assert not any(map(proc.start_ticks, orphans))
                lost_at = min(_event_time(admin, job, "lost") for job in jobs)
                last_tick = max(_ticks(f)[-1] for f in folders)
                assert last_tick < lost_at, (last_tick, lost_at)
                # metered until the lease stopped them, not until the server gave up
                usage = admin.get("/api/v1/usage", params={"tenant": "algo"}).json()["items"]
                ends = [u["end"] for u in usage if u["job_id"] in jobs]
                assert len(ends) == 2, usage
                assert all(last_tick - 0.5 <= e < lost_at for e in ends), (ends, last_tick)
                for folder in folders:
                    assert "agent had not renewed its lease" in proc.note(folder, proc.FENCED)
                figures = {
                    "stopped_after_kill_s": round(last_tick - killed, 3),
                    "requeued_after_kill_s": round(lost_at - killed, 3),
                    "stopped_before_requeue_s": round(lost_at - last_tick, 3),
                }
                if after == "pending":  # the copies run on n2, never beside their orphans
                    for job in jobs:
                        wait_for("rerun", in_state(admin, job, "running"), 20)
                    copies = _folders(tmp_path / "agent-n2")
                    wait_for("copy ticks", lambda: all(_ticks(f) for f in copies))
                    first_copy_tick = min(_ticks(f)[0] for f in copies)
                    figures["overlap_s"] = round(max(0.0, last_tick - first_copy_tick), 3)
                    figures["gap_s"] = round(first_copy_tick - last_tick, 3)
                    assert first_copy_tick > last_tick
                    assert len(n2.records) == 2
                print(f"\nfencing ({database_url.split(':')[0]}, on_lost={on_lost}): {figures}")
                assert figures["requeued_after_kill_s"] < TIMEOUT_S + 10
                # the agent comes back: what it ran is reported and forgotten, the node is ready
                agent = agent_process(live.url, token, "n1", state_dir)
                wait_for("ready", lambda: admin.get("/api/v1/nodes/n1").json()["state"] == "ready")
                wait_for("forgotten", lambda: not list((state_dir / "workloads").iterdir()))
                active = {"tenant": "algo", "state": "active"}
                expected = 2 if after == "pending" else 0
                assert admin.get("/api/v1/allocations", params=active).json()["total"] == expected
        finally:
            kill9(agent)


def test_keep_running_jobs_are_not_fenced(tmp_path):
    """``on_lost: keep-running`` prefers availability: its workload outlives the lost node and
    the job runs again elsewhere at the same time, until the old agent returns and stops it."""
    with live_server(_settings(tmp_path), run_scheduler=True) as live:
        _tenant(live)
        admin = live.admin()
        token = live.token("agents", "agent", node="*")
        state_dir = tmp_path / "agent-n1"
        agent = agent_process(live.url, token, "n1", state_dir)
        try:
            wait_for("node", lambda: admin.get("/api/v1/nodes/n1").status_code == 200)
            job = submit(admin, "gpu=1", "algo", command=TICK, on_lost="keep-running")["id"]
            wait_for("running", in_state(admin, job, "running"))
            orphans = _pids(state_dir)
            with agent_thread(make_agent(live.url, token, "n2", tmp_path / "agent-n2")):
                wait_for("n2", lambda: admin.get("/api/v1/nodes/n2").status_code == 200)
                kill9(agent)
                wait_for("node lost", _was_lost(admin, job), 30)
                wait_for("copy", lambda: _folders(tmp_path / "agent-n2"))
                time.sleep(TIMEOUT_S)  # well past the lease
                assert all(map(proc.start_ticks, orphans))  # both copies run
                agent = agent_process(live.url, token, "n1", state_dir)
                wait_for("orphan stopped", lambda: not any(map(proc.start_ticks, orphans)), 20)
                wait_for("ready", lambda: admin.get("/api/v1/nodes/n1").json()["state"] == "ready")
                assert job_state(admin, job)["state"] == "running"
        finally:
            kill9(agent)


def test_an_agent_cut_off_from_the_server_stops_its_workloads_in_time(tmp_path):
    """A partition, not a crash: the agent lives but none of its calls get through."""
    with live_server(_settings(tmp_path), run_scheduler=True) as live:
        _tenant(live)
        admin = live.admin()
        token = live.token("agent-n1", "agent", node="n1")
        agent = make_agent(live.url, token, "n1", tmp_path / "a")
        with agent_thread(agent):
            job = submit(admin, "gpu=1", "algo", command=TICK)["id"]
            wait_for("running", in_state(admin, job, "running"))
            (folder,) = _folders(tmp_path / "a")
            with partitioned(agent):
                wait_for("node lost", _was_lost(admin, job), 30)
                last_tick = _ticks(folder)[-1]
                assert last_tick < _event_time(admin, job, "lost")
                assert proc.note(folder, proc.FENCED)
            wait_for("ready", lambda: admin.get("/api/v1/nodes/n1").json()["state"] == "ready")
            rerun = wait_for("rerun", in_state(admin, job, "running"), 20)
            events = [e["to_state"] for e in admin.get(f"/api/v1/jobs/{job}/events").json()]
        assert rerun["state"] == "running" and "failed" not in events
        assert events[:5] == ["pending", "admitted", "running", "lost", "pending"]


def test_the_shim_kills_a_workload_that_ignores_sigterm_when_the_lease_runs_out(tmp_path):
    stubborn = (
        "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "print('up', flush=True)\ntime.sleep(60)"
    )
    lease = tmp_path / "lease"
    write_lease(lease, time.monotonic() + 0.5)
    work = tmp_path / "work"
    work.mkdir()
    fenced = proc.LaunchSpec(
        [PY, "-c", stubborn], {}, str(work), lease=str(lease), fence_kill_s=0.5
    )
    free = proc.LaunchSpec([PY, "-c", "import time; time.sleep(1.5)"], {}, str(work))
    started = time.monotonic()
    a = proc.launch(tmp_path / "a", fenced)
    b = proc.launch(tmp_path / "b", free)  # no lease: keep-running
    assert a.wait(timeout=10) == 0 and b.wait(timeout=10) == 0
    took = time.monotonic() - started
    assert proc.exit_code(tmp_path / "a") == -signal.SIGKILL  # TERM ignored, then KILL
    assert proc.note(tmp_path / "a", proc.FENCED)
    assert 1.0 <= took < 5, took
    assert proc.exit_code(tmp_path / "b") == 0 and not proc.note(tmp_path / "b", proc.FENCED)

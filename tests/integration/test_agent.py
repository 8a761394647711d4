"""The node agent against a real server on loopback: jobs run as real processes with their
slice's environment, end with their exit code, stop when cancelled, survive an agent restart
without a duplicate, are requeued when their node is lost, and stale orders are refused."""

import os
import sys
import time

import pytest
from sqlalchemy import update

from gpupool.agent import processes as proc
from gpupool.agent.workloads import IsolationConfig
from gpupool.devices.base import GpuProcess
from gpupool.model.protocol import OrderOut
from gpupool.server.db.tables import JobRow, Meta
from gpupool.server.settings import Settings
from tests.support.agents import (
    agent_thread,
    in_state,
    job_state,
    make_agent,
    no_workload_outlives_its_test,  # noqa: F401 - autouse: kills what a test left
    stand_in_docker,
    wait_for,
)
from tests.support.cluster import ok, submit
from tests.support.live import live_server

PY = sys.executable
SLEEP = [PY, "-c", "import time; print('working', flush=True); time.sleep(300)"]


def _settings(tmp_path, database_url="", timeout=5.0) -> Settings:
    return Settings(
        data_dir=tmp_path,
        database_url=database_url,
        log_json=False,
        cycle_interval_s=0.2,
        heartbeat_timeout_s=timeout,
    )


@pytest.fixture
def live(tmp_path):
    with live_server(_settings(tmp_path), run_scheduler=True) as srv:
        _tenant(srv)
        yield srv


def _tenant(srv, cards=4):
    admin = srv.admin()
    ok(admin.post("/api/v1/tenants", json={"name": "algo"}), 201)
    ok(admin.put("/api/v1/tenants/algo/quotas/gpu", json={"resource": "gpu", "nominal": cards}))


def _node_state(admin, name):
    return admin.get(f"/api/v1/nodes/{name}").json()["state"]


def test_job_runs_with_its_slice_and_reports_exit_code_and_logs(live, tmp_path):
    admin = live.admin()
    token = live.token("agent-n1", "agent", node="n1")
    with agent_thread(make_agent(live.url, token, "n1", tmp_path / "a")):
        wait_for("registration", lambda: admin.get("/api/v1/nodes/n1").status_code == 200)
        code = "import os; print(os.environ['CUDA_VISIBLE_DEVICES'], os.environ['GPUPOOL_JOB_ID'])"
        good = submit(admin, "gpu=2", "algo", command=[PY, "-c", code])
        bad = submit(admin, "gpu=1", "algo", command=[PY, "-c", "raise SystemExit(3)"])
        done = wait_for("job end", in_state(admin, good["id"], "succeeded", "failed"))
        assert done["state"] == "succeeded" and done["exit_code"] == 0
        failed = wait_for("job end", in_state(admin, bad["id"], "succeeded", "failed"))
        assert failed["state"] == "failed" and failed["exit_code"] == 3
    logs = admin.get(f"/api/v1/jobs/{good['id']}/logs").json()["chunks"]
    assert "".join(c["text"] for c in logs) == f"GPU-sim-n1-0,GPU-sim-n1-1 {good['id']}\n"
    events = [e["to_state"] for e in admin.get(f"/api/v1/jobs/{good['id']}/events").json()]
    assert events == ["pending", "admitted", "running", "succeeded"]
    node = admin.get("/api/v1/nodes/n1").json()
    assert node["devices"][0]["telemetry"]["temp_c"] > 0  # heartbeats carried telemetry


def test_cancel_stops_the_process_group(live, tmp_path):
    admin = live.admin()
    token = live.token("agent-n1", "agent", node="n1")
    agent = make_agent(live.url, token, "n1", tmp_path / "a")
    with agent_thread(agent):
        job = submit(admin, "gpu=1", "algo", command=SLEEP)
        wait_for("running", in_state(admin, job["id"], "running"))
        (rec,) = agent.records.values()
        # the shim and the workload
        wait_for("workload", lambda: len(proc.group_pids(rec.pid)) == 2)
        pids = proc.group_pids(rec.pid)
        ok(admin.post(f"/api/v1/jobs/{job['id']}/cancel"))
        wait_for("workload stopped", lambda: not any(proc.start_ticks(p) for p in pids), 10)
        assert job_state(admin, job["id"])["state"] == "cancelled"
        wait_for("record dropped", lambda: not agent.records)


def test_job_without_command_or_missing_runtime_fails_clearly(live, tmp_path):
    admin = live.admin()
    token = live.token("agent-n1", "agent", node="n1")
    r = admin.post("/api/v1/jobs", json={"request": "gpu=1", "tenant": "algo"})
    assert r.status_code == 422 and r.json()["field"] == "command"  # refused at the door
    # one that got past anyway (a row from before that check) fails only itself on the node
    empty = submit(admin, "gpu=1", "algo", hold=True)
    with live.ctx.db.write() as s:
        s.get(JobRow, empty["id"]).command = []
    ok(admin.post(f"/api/v1/jobs/{empty['id']}/release"))
    missing = IsolationConfig(mode="none", container_runtime=str(tmp_path / "no-docker"))
    with agent_thread(make_agent(live.url, token, "n1", tmp_path / "a", isolation=missing)):
        image = submit(admin, "gpu=1", "algo", command=["true"], image="pytorch:2")
        a = wait_for("failed", in_state(admin, empty["id"], "failed"))
        b = wait_for("failed", in_state(admin, image["id"], "failed"))
    assert a["reason"] == "job has no command to run"
    assert f"container runtime {tmp_path / 'no-docker'} is not executable" in b["reason"]


def test_restarted_agent_adopts_its_workloads_without_a_duplicate(live, tmp_path):
    admin = live.admin()
    token = live.token("agent-n1", "agent", node="n1")
    script = "import time; print('begin', flush=True); time.sleep(1.5); print('end', flush=True)"
    first = make_agent(live.url, token, "n1", tmp_path / "a")
    with agent_thread(first):
        job = submit(admin, "gpu=1", "algo", command=[PY, "-c", script])
        wait_for("running", in_state(admin, job["id"], "running"))
        (rec,) = first.records.values()
    # the first agent is gone; its workload still runs
    assert proc.alive(rec.pid, rec.ticks)
    second = make_agent(live.url, token, "n1", tmp_path / "a")
    with agent_thread(second):
        done = wait_for("end", in_state(admin, job["id"], "succeeded", "failed"))
    assert done["state"] == "succeeded"
    text = "".join(c["text"] for c in admin.get(f"/api/v1/jobs/{job['id']}/logs").json()["chunks"])
    assert text == "begin\nend\n"  # one run, logs neither lost nor repeated
    allocations = admin.get("/api/v1/allocations", params={"tenant": "algo"}).json()["items"]
    assert len(allocations) == 1


def test_stale_orders_are_refused(live, tmp_path):
    admin = live.admin()
    token = live.token("agent-n1", "agent", node="n1")
    agent = make_agent(live.url, token, "n1", tmp_path / "a")
    agent.start()
    job = submit(admin, "gpu=1", "algo", command=SLEEP)
    order = wait_for("order", lambda: agent.api.orders().orders)[0]
    ok(admin.post(f"/api/v1/jobs/{job['id']}/cancel"))
    agent._start(order)  # the order was read before the cancel: the server refuses it
    assert agent.refused == [f"allocation {order.id} generation {order.generation}"]
    (rec,) = agent.records.values()
    wait_for("stopped", lambda: not proc.alive(rec.pid, rec.ticks), 10)
    # an answer older than one already acted on is not applied...
    agent.seen_generation = 10**9
    agent.sync()
    assert agent.refused[-1].startswith("orders at generation")
    assert agent.seen_generation == 10**9
    # ...until the server has said so for long (a database restored from a backup)
    for _ in range(40):
        agent.sync()
    assert agent.seen_generation < 10**9
    agent.api.close()


def test_shares_get_their_limits_and_the_watchdog_stops_only_the_one_over_its_grant(live, tmp_path):
    """Two fractional shares of one card; NVML (faked at its process list, with the real pids
    of the workloads) reports the second one using more memory than granted."""
    admin = live.admin()
    token = live.token("agent-n1", "agent", node="n1")
    agent = make_agent(
        live.url, token, "n1", tmp_path / "a", devices="simulated:1xA100-80G", share=True
    )
    over: set[int] = set()

    def fake_nvml_processes():
        return [
            GpuProcess(uuid, pid, 12_000 if r.job_id in over else 5_000)
            for r in list(agent.records.values())
            for uuid in r.limits_mib
            for pid in proc.group_pids(r.pid) - {r.pid}  # the command, not the shim
        ]

    agent.located[0].backend.processes = fake_nvml_processes
    show = (
        "import os, time; e = os.environ; print(e['CUDA_VISIBLE_DEVICES'], "
        "e['CUDA_MPS_ACTIVE_THREAD_PERCENTAGE'], e['CUDA_MPS_PINNED_DEVICE_MEM_LIMIT'], "
        "flush=True); time.sleep(300)"
    )

    def log_of(job_id: int) -> str:
        chunks = admin.get(f"/api/v1/jobs/{job_id}/logs").json()["chunks"]
        return "".join(c["text"] for c in chunks)

    with agent_thread(agent):
        good = submit(admin, "gpu_share=30%,gpu_mem=10GiB", "algo", command=[PY, "-c", show])
        bad = submit(admin, "gpu_share=40%,gpu_mem=10GiB", "algo", command=[PY, "-c", show])
        for job in (good, bad):
            wait_for("running", in_state(admin, job["id"], "running"))
        logs = {j["id"]: wait_for("logs", lambda j=j: log_of(j["id"])) for j in (good, bad)}
        over.add(bad["id"])
        done = wait_for("stopped", in_state(admin, bad["id"], "failed"), 15)
        assert job_state(admin, good["id"])["state"] == "running"
    assert done["reason"] == ("device memory: used 12000 MiB on GPU-sim-n1-0, granted 10240 MiB")
    assert logs[good["id"]] == "GPU-sim-n1-0 30 0=10240M\n"
    assert logs[bad["id"]] == "GPU-sim-n1-0 40 0=10240M\n"


def test_gang_members_learn_their_rank_and_peers(tmp_path):
    agent = make_agent("http://127.0.0.1:9", "t", "n2", tmp_path / "a")
    member = {"cpu_millis": 1000, "mem_mib": 1024}
    whole = {"compute_pct": 100, "mem_mib": 81920, "exclusive": True}
    order = {
        "id": 7, "job_id": 3, "generation": 2, "tenant": "algo", "env": {"A": "1"},
        "nodes": [
            {"node": "n1", **member, "devices": [{"device": 0, **whole}]},
            {"node": "n2", **member, "devices": [{"device": 1, **whole}]},
        ],
    }  # fmt: skip
    for d in order["nodes"]:
        for g in d["devices"]:
            g.update(mig_profile=None, mig_start=None)
    order |= {"command": ["true"], "image": None, "on_lost": "requeue"}
    order |= {"state": "active", "borrowed": False, "action": "allocate", "after": []}
    order |= {"created_at": 0.0, "released_at": None, "release_reason": "", "job_name": "x"}
    order |= {"job_state": "admitted", "max_runtime_s": None}
    typed = OrderOut.model_validate(order)
    ready = agent.launcher.prepare(typed, agent._grants(typed), None, 1.0, tmp_path / "w7")
    env = ready.spec.env
    assert env["GPUPOOL_GANG_SIZE"] == "2" and env["GPUPOOL_GANG_RANK"] == "1"
    assert env["GPUPOOL_GANG_NODES"] == "n1,n2"
    assert env["CUDA_VISIBLE_DEVICES"] == "GPU-sim-n2-1" and env["A"] == "1"
    agent.launcher.cleanup(ready.workdir, ready.cgroups, ready.mps)
    agent.api.close()


def test_an_unhealthy_card_reaches_the_server_and_takes_no_new_work(live, tmp_path):
    admin = live.admin()
    token = live.token("agent-n1", "agent", node="n1")
    agent = make_agent(live.url, token, "n1", tmp_path / "a")
    agent.located[1].backend.unhealthy.add(1)  # e.g. an uncorrectable ECC error on card 1
    with agent_thread(agent):

        def card_1_unhealthy() -> bool:
            node = admin.get("/api/v1/nodes/n1").json()
            return "devices" in node and node["devices"][1]["healthy"] is False

        wait_for("health", card_1_unhealthy)
        both = submit(admin, "gpu=2", "algo", command=SLEEP)
        one = submit(admin, "gpu=1", "algo", command=SLEEP)
        running = wait_for("one card", in_state(admin, one["id"], "running"))
        assert running["allocation"]["nodes"][0]["devices"][0]["device"] == 0
        waiting = job_state(admin, both["id"])
        assert waiting["state"] == "pending" and "fewer than 2 free gpu" in waiting["reason"]


def test_jobs_stopped_by_an_agent_shutdown_are_requeued_not_failed(live, tmp_path):
    admin = live.admin()
    token = live.token("agent-n1", "agent", node="n1")
    first = make_agent(live.url, token, "n1", tmp_path / "a", stop_workloads_on_exit=True)
    with agent_thread(first):
        job = submit(admin, "gpu=1", "algo", command=SLEEP)
        wait_for("running", in_state(admin, job["id"], "running"))
        (rec,) = first.records.values()
        workdir = rec.workdir
        assert workdir and os.path.isdir(workdir)
    assert not proc.alive(rec.pid, rec.ticks)  # the shutdown stopped it
    assert not os.path.exists(workdir)  # and its working folder went with it
    second = make_agent(live.url, token, "n1", tmp_path / "a", stop_workloads_on_exit=True)
    with agent_thread(second):
        wait_for("rerun", lambda: len(second.records) == 1 and rec.alloc_id not in second.records)
        events = [e["to_state"] for e in admin.get(f"/api/v1/jobs/{job['id']}/events").json()]
        wait_for("running again", in_state(admin, job["id"], "running"))
    assert events[:6] == ["pending", "admitted", "running", "lost", "pending", "admitted"]
    assert "failed" not in events


def test_an_idle_node_follows_a_database_restored_from_an_earlier_backup(live, tmp_path):
    """After a restore the database's generation is below what an idle agent acted on: its
    first new order was refused, and no other answer came to count towards following it (the
    job stayed admitted for 311 s). The refused answer is offered again each turn."""
    admin = live.admin()
    token = live.token("agent-n1", "agent", node="n1")
    agent = make_agent(live.url, token, "n1", tmp_path / "a", sync_s=0.1)
    with live.ctx.db.write() as s:  # a database with some history behind it
        s.execute(update(Meta).where(Meta.id == 1).values(generation=50))
    with agent_thread(agent):
        first = submit(admin, "gpu=1", "algo", command=["true"])
        wait_for("first job", in_state(admin, first["id"], "succeeded"))
        seen = agent.seen_generation
        with live.ctx.db.write() as s:  # what a restore of an earlier backup leaves
            s.execute(update(Meta).where(Meta.id == 1).values(generation=1))
        after = submit(admin, "gpu=1", "algo", command=["true"])
        done = wait_for("the job after the restore", in_state(admin, after["id"], "succeeded"))
    assert seen > 50 and agent.refused and agent.refused[0].startswith("orders at generation")
    assert done["state"] == "succeeded" and agent.seen_generation < seen


def test_an_agent_follows_a_restored_database_at_once_by_its_restore_epoch(live, tmp_path):
    """gpupool admin restore gives the database a new restore epoch: the agent acts on the
    restored orders at once, refusing none as older than what it acted on (without the epoch
    it follows only after 30 refused turns, as above)."""
    admin = live.admin()
    token = live.token("agent-n1", "agent", node="n1")
    agent = make_agent(live.url, token, "n1", tmp_path / "a", sync_s=0.1)
    with live.ctx.db.write() as s:
        s.execute(update(Meta).where(Meta.id == 1).values(generation=50))
    with agent_thread(agent):
        first = submit(admin, "gpu=1", "algo", command=["true"])
        wait_for("first job", in_state(admin, first["id"], "succeeded"))
        seen = agent.seen_generation
        with live.ctx.db.write() as s:  # what gpupool admin restore of an earlier backup leaves
            s.execute(update(Meta).where(Meta.id == 1).values(generation=1, restore_epoch="b"))
        after = submit(admin, "gpu=1", "algo", command=["true"])
        begun = time.monotonic()
        wait_for("the job after the restore", in_state(admin, after["id"], "succeeded"))
        took = time.monotonic() - begun
    assert seen > 50 and agent.refused == [] and agent.seen_generation < seen
    assert took < 10  # not the 30 turns of following a generation that went back


def test_nothing_starts_under_a_lease_that_ran_out_until_a_beat_renews_it(tmp_path):
    """After an outage the orders can come back before a heartbeat is recorded: a workload
    started under the expired lease stopped itself at once and its job was requeued again
    (seen in the fault suite after PostgreSQL was down past the timeout)."""
    from gpupool.agent.lease import write_lease

    with live_server(_settings(tmp_path)) as srv:  # no loop: cycles and beats by hand
        _tenant(srv)
        admin = srv.admin()
        token = srv.token("agent-n1", "agent", node="n1")
        agent = make_agent(srv.url, token, "n1", tmp_path / "a")
        try:
            agent.start()
            job = submit(admin, "gpu=1", "algo", command=SLEEP)
            srv.cycle()
            write_lease(agent.store.lease, time.monotonic() - 1)  # ran out while away
            agent.sync()
            assert agent.records == {}
            agent.heartbeat()
            agent.sync()
            assert len(agent.records) == 1
            wait_for("running", in_state(admin, job["id"], "running"))
            time.sleep(1.0)  # a fenced workload would have stopped by now
            assert job_state(admin, job["id"])["state"] == "running"
        finally:
            agent.stop_all()
            agent.api.close()


def test_a_removed_node_registers_again(live, tmp_path):
    admin = live.admin()
    token = live.token("agent-n1", "agent", node="n1")
    with agent_thread(make_agent(live.url, token, "n1", tmp_path / "a")):
        wait_for("node", lambda: admin.get("/api/v1/nodes/n1").status_code == 200)
        ok(admin.delete("/api/v1/nodes/n1"), 204)
        wait_for("back", lambda: admin.get("/api/v1/nodes/n1").status_code == 200)
        assert len(admin.get("/api/v1/nodes/n1").json()["devices"]) == 2


def test_a_relative_state_dir_still_records_exit_codes(live, tmp_path, monkeypatch):
    """``gpupool up`` defaults to a relative data dir; workloads run in their own directory."""
    from pathlib import Path

    admin = live.admin()
    token = live.token("agent-n1", "agent", node="n1")
    monkeypatch.chdir(tmp_path)
    with agent_thread(make_agent(live.url, token, "n1", Path("relative-state"))):
        job = submit(admin, "gpu=1", "algo", command=[PY, "-c", "raise SystemExit(0)"])
        done = wait_for("end", in_state(admin, job["id"], "succeeded", "failed"))
    assert (done["state"], done["exit_code"]) == ("succeeded", 0)


def test_a_job_with_an_image_runs_under_the_container_runtime(live, tmp_path):
    """No docker daemon here: a stand-in ``docker`` records what it was given and runs the
    command after the image. The job's variables reach the container only through the env
    file (no value in the runtime's argv, which every user of the node sees in ps), and the
    root-run client gets an environment of the agent's, none of the job's."""
    bin_dir = tmp_path / "bin"
    config = stand_in_docker(bin_dir)
    admin = live.admin()
    token = live.token("agent-n1", "agent", node="n1")
    with agent_thread(make_agent(live.url, token, "n1", tmp_path / "a", isolation=config)):
        job = submit(
            admin, "gpu=1", "algo", command=["echo", "inside"], image="pytorch:2",
            env={"X": "y", "HF_TOKEN": "secret-of-algo"},
        )  # fmt: skip
        done = wait_for("end", in_state(admin, job["id"], "succeeded", "failed"))
    assert done["state"] == "succeeded", done["reason"]
    args = (bin_dir / "args").read_text().splitlines()
    (alloc,) = admin.get("/api/v1/allocations", params={"tenant": "algo"}).json()["items"]
    assert args[:4] == ["run", "--rm", "--name", f"gpupool-alloc-{alloc['id']}"]
    assert not any("secret-of-algo" in a or a == "X=y" for a in args)
    env_file = (bin_dir / "env-file").read_text().splitlines()
    assert "X=y" in env_file and "HF_TOKEN=secret-of-algo" in env_file
    assert "CUDA_VISIBLE_DEVICES=GPU-sim-n1-0" in env_file
    assert not any(line.startswith("PATH=") for line in env_file)  # the host's PATH stays out
    assert args[args.index("--gpus") + 1] == "device=GPU-sim-n1-0"
    assert args[-3:] == ["pytorch:2", "echo", "inside"]
    client = dict(
        line.split("=", 1)
        for line in (bin_dir / "client-env").read_text().split("\n")
        if "=" in line
    )
    assert client["PATH"] == "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    assert "X" not in client and "HF_TOKEN" not in client and "GPUPOOL_JOB_ID" not in client

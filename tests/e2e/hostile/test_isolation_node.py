"""What one tenant's workloads on a node share with another's — nothing of the following,
measured with a real agent (root) and real jobs of two tenants on one node:

- the network: each tenant's workloads share a network namespace of their own, so a TCP
  listener on 127.0.0.1 and an abstract UNIX socket answer the tenant's other jobs and no one
  else's (they answered another tenant's job before);
- ``/tmp`` and ``/dev/shm``: private to each workload (tmpfs in a mount namespace) and gone at
  its end (200 MB stayed in /dev/shm across jobs before);
- memory: a job without ``mem=`` gets the default limit (it had none);
- processes: all of a tenant's workloads on the node share one pids ceiling (it was per
  workload: eight workloads exhausted pid_max);
- disk: a workload whose working folder passes ``--disk-max`` is stopped (2 GB went through).
"""

import os
from pathlib import Path

import pytest

from gpupool.agent.workloads import IsolationConfig
from gpupool.server.settings import Settings
from tests.support.agents import (
    agent_thread,
    in_state,
    make_agent,
    no_namespace_outlives_its_test,  # noqa: F401 - used through pytestmark
    no_workload_outlives_its_test,  # noqa: F401 - autouse: kills what a test left
    skip_module_unless_root,
    wait_for,
    wait_for_cards,
)
from tests.support.cluster import ok, submit
from tests.support.live import live_server
from tests.support.tenants import alpha_and_beta, job_log

pytestmark = pytest.mark.usefixtures("no_namespace_outlives_its_test")

skip_module_unless_root("node isolation needs root")

PY = "/usr/bin/python3"  # the system's: tenant users cannot run the test's venv under /root
SERVE = """
import socket, time
tcp = socket.socket(); tcp.bind(("127.0.0.1", {port})); tcp.listen()
uds = socket.socket(socket.AF_UNIX); uds.bind("\\0gpupool-test-{port}"); uds.listen()
print("listening", flush=True)
while True:
    for s in (tcp, uds):
        s.settimeout(0.05)
        try:
            c, _ = s.accept(); c.sendall(b"secret-of-alpha"); c.close()
        except OSError:
            pass
"""
PROBE = """
import socket
for family, where in ((socket.AF_INET, ("127.0.0.1", {port})),
                      (socket.AF_UNIX, "\\0gpupool-test-{port}")):
    s = socket.socket(family); s.settimeout(2)
    try:
        s.connect(where); print(family.name, s.recv(100).decode())
    except OSError as exc:
        print(family.name, "refused", type(exc).__name__)
"""


def _node(tmp_path, work_root, **extra):
    settings = Settings(data_dir=tmp_path / "data", log_json=False, cycle_interval_s=0.2)
    srv = live_server(settings, run_scheduler=True)
    config = IsolationConfig(mode="tenant-users", user_prefix="gpt-", work_dir=work_root, **extra)
    return srv, config


def _teams(srv):
    return alpha_and_beta(srv.admin(), 4)


_log = job_log


def _run(admin, tenant: str, code: str, request: str = "gpu_share=10%,gpu_mem=1GiB") -> dict:
    wait_for_cards(admin)
    job = submit(admin, request, tenant, command=[PY, "-c", code])
    return wait_for("end", in_state(admin, job["id"], "succeeded", "failed"), 40)


def test_loopback_and_abstract_sockets_are_the_tenants_own(tmp_path, work_root):
    srv_cm, config = _node(tmp_path, work_root)
    with srv_cm as srv:
        admin = _teams(srv)
        token = srv.token("agent-n1", "agent", node="n1")
        agent = make_agent(srv.url, token, "n1", tmp_path / "a", isolation=config, share=True)
        if not agent.launcher.networks or not agent.launcher.networks.available:
            pytest.skip("no ip command here for network namespaces")
        try:
            with agent_thread(agent):
                port = 39000 + os.getpid() % 1000
                wait_for_cards(admin)
                server = submit(admin, "gpu_share=10%,gpu_mem=1GiB", "alpha",
                                command=[PY, "-c", SERVE.format(port=port)])  # fmt: skip
                wait_for("listening", lambda: "listening" in _log(admin, server["id"]), 30)
                other = _run(admin, "beta", PROBE.format(port=port))
                same = _run(admin, "alpha", PROBE.format(port=port))
                ok(admin.post(f"/api/v1/jobs/{server['id']}/cancel"))
                theirs, ours = _log(admin, other["id"]), _log(admin, same["id"])
        finally:
            agent.launcher.networks.remove_all()
    assert other["state"] == same["state"] == "succeeded", (other["reason"], same["reason"])
    assert "AF_INET refused" in theirs and "AF_UNIX refused" in theirs, theirs
    assert "secret-of-alpha" not in theirs
    assert "AF_INET secret-of-alpha" in ours and "AF_UNIX secret-of-alpha" in ours, ours


LEAVE = """
import os
open("/tmp/left-by-alpha", "w").write("x")
with open("/dev/shm/left-by-alpha", "wb") as f:
    f.write(b"y" * 20_000_000)
print("wrote", sorted(os.listdir("/tmp")), flush=True)
"""
LOOK = "import os; print(sorted(os.listdir('/tmp')), sorted(os.listdir('/dev/shm')))"


def test_tmp_and_shm_are_private_and_gone_at_the_end(tmp_path, work_root):
    srv_cm, config = _node(tmp_path, work_root, network=False)
    with srv_cm as srv:
        admin = _teams(srv)
        token = srv.token("agent-n1", "agent", node="n1")
        agent = make_agent(srv.url, token, "n1", tmp_path / "a", isolation=config, share=True)
        with agent_thread(agent):
            wrote = _run(admin, "alpha", LEAVE)
            later_same = _run(admin, "alpha", LOOK)
            other = _run(admin, "beta", LOOK)
        logs = {j["id"]: _log(admin, j["id"]) for j in (wrote, later_same, other)}
    assert wrote["state"] == "succeeded", wrote["reason"]
    assert "left-by-alpha" in logs[wrote["id"]]
    for job in (later_same, other):
        assert job["state"] == "succeeded", job["reason"]
        assert "left-by-alpha" not in logs[job["id"]], logs[job["id"]]
    assert not Path("/tmp/left-by-alpha").exists()
    assert not Path("/dev/shm/left-by-alpha").exists()


LIMITS = r"""
import re
for line in open("/proc/self/cgroup"):
    _, ctrl, path = line.strip().split(":", 2)
    if ctrl == "memory":
        print("memory", open(f"/sys/fs/cgroup/memory{path}/memory.limit_in_bytes").read().strip())
    if ctrl == "":
        d = f"/sys/fs/cgroup{path}"
        try:
            print("memory", open(f"{d}/memory.max").read().strip())
            print("tenant-pids", open(f"{d}/../pids.max").read().strip())
        except OSError:
            pass
    if ctrl == "pids":
        print("tenant-pids", open(f"/sys/fs/cgroup/pids{path}/../pids.max").read().strip())
"""
FORK = """
import subprocess, time
procs = []
for i in range({count}):
    try:
        procs.append(subprocess.Popen(["sleep", "30"]))
    except OSError:
        break
print("started", len(procs), flush=True)
time.sleep(float({hold}))
"""


def test_default_memory_and_one_pids_ceiling_per_tenant(tmp_path, work_root):
    srv_cm, config = _node(tmp_path, work_root, network=False, private_tmp=False,
                           tenant_pids_max=50)  # fmt: skip
    with srv_cm as srv:
        admin = _teams(srv)
        token = srv.token("agent-n1", "agent", node="n1")
        agent = make_agent(srv.url, token, "n1", tmp_path / "a", isolation=config)
        if agent.launcher.cgroups.hierarchy.version is None:
            pytest.skip(f"no writable cgroups here: {agent.launcher.cgroups.hierarchy.note}")
        with agent_thread(agent):
            limits = _run(admin, "alpha", LIMITS, request="gpu=1")
            first = submit(
                admin, "gpu=1", "alpha", command=[PY, "-c", FORK.format(hold=20, count=30)]
            )
            wait_for("first", lambda: "started" in _log(admin, first["id"]), 30)
            second = _run(admin, "alpha", FORK.format(hold=0, count=60), request="gpu=1")
            other = _run(admin, "beta", FORK.format(hold=0, count=45), request="gpu=1")
            ok(admin.post(f"/api/v1/jobs/{first['id']}/cancel"))
            text = _log(admin, limits["id"])
            started = [int(_log(admin, j["id"]).split()[1]) for j in (first, second, other)]

    # the server reserved its card's share of the node's memory, and that is its limit
    assert f"memory {agent.memory_mib // 2 * 1024 * 1024}" in text, text
    assert "tenant-pids 50" in text, text
    assert started[0] == 30
    assert started[1] < 20  # alpha's two workloads share one ceiling of 50 (shims included)
    assert started[2] == 45  # beta has a ceiling of its own: 30 + 45 would not fit one


def test_a_workload_filling_its_folder_is_stopped(tmp_path, work_root):
    srv_cm, config = _node(tmp_path, work_root, network=False, private_tmp=False, disk_max_mib=20)
    fill = ["sh", "-c", "dd if=/dev/zero of=big bs=1M count=60 2>/dev/null; sleep 60"]
    with srv_cm as srv:
        admin = _teams(srv)
        token = srv.token("agent-n1", "agent", node="n1")
        with agent_thread(make_agent(srv.url, token, "n1", tmp_path / "a", isolation=config)):
            wait_for_cards(admin)
            job = submit(admin, "gpu=1", "alpha", command=fill)
            done = wait_for("stopped", in_state(admin, job["id"], "failed"), 40)
    assert done["reason"].startswith("disk: its working folder used "), done["reason"]
    assert "more than its 20 MiB limit" in done["reason"]
    assert not list(work_root.iterdir())


def test_a_service_replica_is_reached_on_the_node_and_plain_jobs_keep_their_namespace(
    tmp_path, work_root
):
    """A replica answers the server's health checks and the balancer on the node's address:
    the server's orders say it is one (never the job's own environment), and the agent
    publishes its port from the node into the tenant's walled namespace."""
    import httpx

    from tests.support.agents import skip_unless_nft
    from tests.support.replica import REPLICA

    skip_unless_nft()
    srv_cm, config = _node(tmp_path, work_root)
    with srv_cm as srv:
        admin = _teams(srv)
        token = srv.token("agent-n1", "agent", node="n1")
        agent = make_agent(srv.url, token, "n1", tmp_path / "a", isolation=config, share=True,
                           labels={"gpupool.io/address": "127.0.0.1"})  # fmt: skip
        if not agent.launcher.networks or not agent.launcher.networks.available:
            pytest.skip("no ip command here for network namespaces")
        try:
            with agent_thread(agent):
                wait_for_cards(admin)
                body = {"name": "chat", "tenant": "alpha", "request": "gpu_share=10%,gpu_mem=1GiB",
                        "command": [PY, "-c", REPLICA], "target": 5}  # fmt: skip
                ok(admin.post("/api/v1/services", json=body), 201)
                endpoints = wait_for(
                    "a ready replica",
                    lambda: ok(
                        admin.get("/api/v1/services/chat/endpoints", params={"tenant": "alpha"})
                    ),
                    40,
                )
                answer = httpx.get(f"http://{endpoints[0]['endpoint']}/health", trust_env=False)
                # a job that only says it is a replica stays in its tenant's namespace
                fake = {"GPUPOOL_REPLICA_PORT": "1", "PORT": "1"}
                where = "import os; print(os.readlink('/proc/self/ns/net'))"
                job = submit(admin, "gpu_share=10%,gpu_mem=1GiB", "alpha", env=fake,
                             command=[PY, "-c", where])  # fmt: skip
                wait_for("end", in_state(admin, job["id"], "succeeded", "failed"), 40)
                inside = _log(admin, job["id"]).strip()
                ok(admin.delete("/api/v1/services/chat", params={"tenant": "alpha"}), 204)
        finally:
            agent.launcher.networks.remove_all()
    assert answer.status_code == 200
    assert inside.startswith("net:[") and inside != os.readlink("/proc/self/ns/net")

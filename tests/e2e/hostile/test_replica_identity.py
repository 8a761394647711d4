"""A hostile tenant against another's service and namespace (issue 42), on a live server with
two root agents (tenant users, network namespaces, nftables) on one host, as ``gpupool up``
runs them, and real jobs of two tenants:

- **hijack**: alpha binds every port of the replica range on the host network before beta's
  service starts and answers ``/health`` and inflated ``/metrics`` there. Beta's replica is
  still ready on its own process, its endpoint answers beta's replica, alpha's listener never
  sees a connection and the fake load scales nothing (ports were ``20000 + job id``: alpha's
  listener became beta's endpoint and drove it to its maximum);
- **adoption**: 20,000 job ids between beta's replica and alpha's (ports were ``job id mod
  20,000``: alpha's service became ready on beta's replica) — the two get different ports
  and each endpoint answers its own service;
- **the wall**: alpha's job listening on ``0.0.0.0`` in its namespace answers alpha's other
  job and root on the host, and nobody of beta: not beta's job on the same node, not beta's
  job on the other node, not beta's job on the host network (they all got in before).
"""

import json
import os
import socket
import time

import httpx
import pytest
from sqlalchemy import insert

from gpupool.agent.workloads import IsolationConfig
from gpupool.server.db.tables import JobRow
from gpupool.server.settings import Settings
from tests.support.agents import (
    agent_thread,
    control_address,
    in_state,
    make_agent,
    no_namespace_outlives_its_test,  # noqa: F401 - used through pytestmark
    no_workload_outlives_its_test,  # noqa: F401 - autouse: kills what a test left
    skip_module_unless_root,
    skip_unless_nft,
    wait_for,
    wait_for_cards,
)
from tests.support.cluster import ok, submit
from tests.support.live import live_server
from tests.support.replica import REPLICA
from tests.support.tenants import alpha_and_beta, job_log

pytestmark = pytest.mark.usefixtures("no_namespace_outlives_its_test")
skip_module_unless_root("tenant namespaces and their wall need root")


@pytest.fixture(autouse=True)
def _nft():
    skip_unless_nft()


PY = "/usr/bin/python3"  # the system's: tenant users cannot run the test's venv under /root
# eight ports: a replica holds two (its clients' and its control port)
RANGE = (29100 + os.getpid() % 200 * 8, 29107 + os.getpid() % 200 * 8)

# alpha on the host network (a job spanning both nodes): every port of the range it can get,
# answering health checks and a huge request counter, and printing every connection it takes
SQUAT = """
import os, socket, threading
ports = range(int(os.environ["LOW"]), int(os.environ["HIGH"]) + 1)
held = []
for port in ports:
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("0.0.0.0", port)); s.listen(64); held.append(s)
    except OSError:
        pass
print("bound", len(held), flush=True)
def serve(s):
    while True:
        c, peer = s.accept()
        print("hit", s.getsockname()[1], flush=True)
        body = b"gpupool_replica_requests_total 1e12\\n"
        c.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Length: %d\\r\\n\\r\\n" % len(body) + body)
        c.close()
for s in held:
    threading.Thread(target=serve, args=(s,), daemon=True).start()
threading.Event().wait()
"""
LISTEN = """
import socket
s = socket.socket(); s.bind(("0.0.0.0", {port})); s.listen(16)
print("listening", flush=True)
while True:
    c, _ = s.accept(); c.sendall(b"secret-of-alpha"); c.close()
"""
KNOCK = """
import socket
s = socket.socket(); s.settimeout(3)
try:
    s.connect(("{host}", {port})); print("got", s.recv(100).decode())
except OSError as exc:
    print("refused", type(exc).__name__)
"""


def _teams(srv):
    return alpha_and_beta(srv.admin(), 6)


_log = job_log


def _agents(srv, tmp_path, work_root, **config):
    isolation = IsolationConfig(mode="tenant-users", user_prefix="gpt-", work_dir=work_root,
                                replica_ports=RANGE, **config)  # fmt: skip
    out = []
    for name, devices in (("n1", "simulated:3xA100-80G"), ("n2", "simulated:3xH100-80G")):
        token = srv.token(f"agent-{name}", "agent", node=name)
        labels = {"gpupool.io/address": "127.0.0.1"}
        out.append(make_agent(srv.url, token, name, tmp_path / name, isolation=isolation,
                              devices=devices, labels=labels))  # fmt: skip
    return out


def _service(admin, tenant: str, name: str) -> None:
    body = {"name": name, "tenant": tenant, "request": "gpu=1", "command": [PY, "-c", REPLICA],
            "env": {"READY_AFTER": "0"}, "target": 1000, "max_replicas": 6,
            "startup_s": 5}  # fmt: skip
    ok(admin.post("/api/v1/services", json=body), 201)


def _endpoint(admin, tenant: str, name: str) -> dict:
    def ready():
        got = ok(admin.get(f"/api/v1/services/{name}/endpoints", params={"tenant": tenant}))
        return got[0] if got else None

    return wait_for(f"{tenant}'s {name} ready", ready, 60)


def _serves(endpoint: str) -> str | None:
    """Which service answers at ``endpoint`` (the replica names it in its answer)."""
    answer = httpx.post(f"http://{endpoint}/infer", json={"tokens": 0}, timeout=5,
                        trust_env=False)  # fmt: skip
    return json.loads(answer.text).get("service")


def test_a_tenant_squatting_the_replica_ports_on_the_host_takes_no_replica_of_another(
    tmp_path, work_root
):
    settings = Settings(data_dir=tmp_path / "data", log_json=False, cycle_interval_s=0.2,
                        service_interval_s=0.3)  # fmt: skip
    with live_server(settings, run_scheduler=True) as srv:
        admin = _teams(srv)
        agents = _agents(srv, tmp_path, work_root)
        try:
            with agent_thread(agents[0]), agent_thread(agents[1]):
                wait_for_cards(admin, "n1")
                wait_for_cards(admin, "n2")
                env = {"LOW": str(RANGE[0]), "HIGH": str(RANGE[1])}
                squat = submit(admin, "gpu=2", "alpha", gang_size=2, env=env,
                               command=[PY, "-c", SQUAT])  # fmt: skip
                wait_for("squatting", lambda: "bound" in _log(admin, squat["id"]), 30)
                _service(admin, "beta", "chat")
                first = _endpoint(admin, "beta", "chat")
                served_first = _serves(first["endpoint"])
                time.sleep(3)  # ten passes of the reconciler reading whatever answers
                shown = ok(admin.get("/api/v1/services/chat", params={"tenant": "beta"}))
                # the replica dies; its replacement gets a port of the range again
                where = control_address(agents, first["job_id"])
                with pytest.raises(httpx.HTTPError):
                    httpx.post(f"http://{where}/crash", timeout=3, trust_env=False)
                second = wait_for(
                    "a replacement",
                    lambda: (
                        (e := _endpoint(admin, "beta", "chat"))["job_id"] != first["job_id"] and e
                    ),
                    60,
                )
                served_second = _serves(second["endpoint"])
                squatted = _log(admin, squat["id"])
                ok(admin.post(f"/api/v1/jobs/{squat['id']}/cancel"))
                ok(admin.delete("/api/v1/services/chat", params={"tenant": "beta"}), 204)
        finally:
            for agent in agents:
                agent.launcher.networks.remove_all()
    bound = max(int(part.split()[0]) for part in squatted.split("bound ")[1:])
    assert bound >= 3, squatted  # the attack ran: alpha held the range on the host network
    assert "hit" not in squatted, squatted  # and never took a connection
    assert served_first == served_second == "chat"
    assert shown["desired"] == 1, shown["status"]  # the fake counter scaled nothing
    assert str(RANGE[0]) <= first["endpoint"].rsplit(":", 1)[1] <= str(RANGE[1])


def test_job_ids_twenty_thousand_apart_share_no_port(tmp_path, work_root):
    settings = Settings(data_dir=tmp_path / "data", log_json=False, cycle_interval_s=0.2,
                        service_interval_s=0.3)  # fmt: skip
    with live_server(settings, run_scheduler=True) as srv:
        admin = _teams(srv)
        agents = _agents(srv, tmp_path, work_root)
        try:
            with agent_thread(agents[0]):
                wait_for_cards(admin, "n1")
                _service(admin, "beta", "chat")
                theirs = _endpoint(admin, "beta", "chat")
                # as if alpha had submitted 20,000 held jobs (the API took 8-10 s for them)
                with srv.ctx.db.write() as s:
                    rows = [
                        {"tenant": "alpha", "name": "filler", "request": "gpu=1",
                         "kind": "batch", "priority_class": "training", "priority": 0,
                         "gang_size": 1, "on_preempt": "kill", "on_lost": "requeue",
                         "command": ["true"], "env": {}, "submitted_by": "admin",
                         "state": "cancelled", "reason": "filler", "submit_time": 0.0,
                         "queued_at": 0.0}
                        for _ in range(20_000 - 1)
                    ]  # fmt: skip
                    s.execute(insert(JobRow), rows)
                _service(admin, "alpha", "mine")
                mine = _endpoint(admin, "alpha", "mine")
                served = {_serves(theirs["endpoint"]), _serves(mine["endpoint"])}
                ok(admin.delete("/api/v1/services/chat", params={"tenant": "beta"}), 204)
                ok(admin.delete("/api/v1/services/mine", params={"tenant": "alpha"}), 204)
        finally:
            agents[0].launcher.networks.remove_all()
    assert mine["job_id"] - theirs["job_id"] >= 20_000
    assert mine["endpoint"] != theirs["endpoint"]
    assert served == {"chat", "mine"}


def test_no_tenant_opens_a_connection_into_another_tenants_namespace(tmp_path, work_root):
    settings = Settings(data_dir=tmp_path / "data", log_json=False, cycle_interval_s=0.2)
    port = 39500 + os.getpid() % 400
    with live_server(settings, run_scheduler=True) as srv:
        admin = _teams(srv)
        agents = _agents(srv, tmp_path, work_root)
        try:
            with agent_thread(agents[0]), agent_thread(agents[1]):
                wait_for_cards(admin, "n1")
                wait_for_cards(admin, "n2")
                server = submit(admin, "gpu=A100-80G:1", "alpha",
                                command=[PY, "-c", LISTEN.format(port=port)])  # fmt: skip
                wait_for("listening", lambda: "listening" in _log(admin, server["id"]), 30)
                host = agents[0].launcher.networks.address("alpha")

                def knock(tenant: str, request: str, **extra) -> str:
                    code = KNOCK.format(host=host, port=port)
                    job = submit(admin, request, tenant, **extra, command=[PY, "-c", code])
                    wait_for("knock", in_state(admin, job["id"], "succeeded", "failed"), 40)
                    return _log(admin, job["id"])

                same_node = knock("beta", "gpu=A100-80G:1")
                other_node = knock("beta", "gpu=H100-80G:1")
                host_network = knock("beta", "gpu=2", gang_size=2)
                own = knock("alpha", "gpu=A100-80G:1")
                with socket.create_connection((host, port), timeout=3) as root:
                    as_root = root.recv(100).decode()
                ok(admin.post(f"/api/v1/jobs/{server['id']}/cancel"))
        finally:
            for agent in agents:
                agent.launcher.networks.remove_all()
    assert "got secret-of-alpha" in own, own  # the listener answers: the attack means something
    assert as_root == "secret-of-alpha"
    for theirs in (same_node, other_node, host_network):
        assert "secret-of-alpha" not in theirs, theirs
        assert "refused" in theirs, theirs

"""A tenant against another's inference service through the ports a node publishes (issue 57,
round 4): a live server with its scheduler and service reconciler, a root agent (tenant users,
network namespaces, nftables), beta's warm service (one replica serving, one parked) and
alpha's plain ``cpu=1`` job on the same node.

**Attack**: for a minute, alpha's job scans every port of the replica range on every host
end and namespace end of the tenant subnet it can name, and sends what a parked vLLM obeys —
``POST /sleep?level=1``, ``POST /wake_up``, ``GET /is_sleeping``, ``GET /metrics``, and the
example's ``POST /crash`` — to every port that answers. Before, within 3 s beta had 0 ready
replicas and its parked engine answered ``awake`` behind the platform's back. Now beta's
serving replica stays ready and answers every request of beta's client, its parked replica
stays parked, no replica is replaced, and alpha never gets a 2xx from a platform endpoint nor
a line of beta's metrics — while it does reach beta's published port (the attack ran).

**Detection**: a parked engine woken from outside the platform (here by root on the host, the
only one who reaches its control port) is found awake by its agent's next look and put back
to sleep, the fault recorded on the replica's job."""

import os
import threading
import time

import httpx
import pytest

from gpupool.agent.replica_watch import INTERVAL_S
from gpupool.agent.workloads import IsolationConfig
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
from tests.support.balancer import Balancer
from tests.support.cluster import ok, submit
from tests.support.live import live_server
from tests.support.replica import REPLICA
from tests.support.tenants import alpha_and_beta, job_log

pytestmark = pytest.mark.usefixtures("no_namespace_outlives_its_test")
skip_module_unless_root("tenant namespaces and their wall need root")

PY = "/usr/bin/python3"  # the system's: tenant users cannot run the test's venv under /root
# eight ports: two replicas, two ports each, and spare
RANGE = (28000 + os.getpid() % 100 * 8, 28007 + os.getpid() % 100 * 8)
ATTACK_S = 60.0

# alpha's job: every host end (.1) and namespace end (.2) of the first 32 namespaces, every
# port of the range; what a parked vLLM obeys, sent to whatever answers
SCAN = """
import http.client, os, socket, time
from concurrent.futures import ThreadPoolExecutor
low, high = int(os.environ["LOW"]), int(os.environ["HIGH"])
until = time.time() + float(os.environ["FOR"])
hosts = [f"10.231.{i // 64}.{(i % 64) * 4 + end}" for i in range(32) for end in (1, 2)]
ASK = [("POST", "/sleep?level=1"), ("POST", "/wake_up"), ("GET", "/is_sleeping"),
       ("GET", "/metrics"), ("POST", "/crash")]
def knock(target):
    host, port = target
    try:
        socket.create_connection((host, port), timeout=0.3).close()
    except OSError:
        return []
    out = [f"open {host}:{port}"]
    for method, path in ASK:
        try:
            c = http.client.HTTPConnection(host, port, timeout=2)
            c.request(method, path, body=b"" if method == "POST" else None)
            r = c.getresponse(); body = r.read(4096).decode("utf-8", "replace"); c.close()
        except OSError as exc:
            continue
        if 200 <= r.status < 300:
            out.append(f"obeyed {method} {path} {r.status} at {host}:{port}")
        if "gpupool_replica_requests" in body or "is_sleeping" in body:
            out.append(f"leak {path} at {host}:{port}")
    return out
passes = 0
with ThreadPoolExecutor(32) as pool:
    while time.time() < until:
        lines = set()
        for found in pool.map(knock, [(h, p) for h in hosts for p in range(low, high + 1)]):
            lines.update(found)
        passes += 1
        for line in sorted(lines):
            if not line.startswith("open") or passes == 1:
                print(line, flush=True)
print("passes", passes, flush=True)
"""


@pytest.fixture(autouse=True)
def _nft():
    skip_unless_nft()


def _replicas(admin) -> list[dict]:
    return ok(admin.get("/api/v1/services/chat", params={"tenant": "beta"}))["replicas"]


def test_no_neighbour_reaches_a_replicas_control_endpoints(tmp_path, work_root):
    settings = Settings(data_dir=tmp_path / "data", log_json=False, cycle_interval_s=0.2,
                        service_interval_s=0.3, service_drain_s=1)  # fmt: skip
    isolation = IsolationConfig(mode="tenant-users", user_prefix="gph-", work_dir=work_root,
                                replica_ports=RANGE)  # fmt: skip
    with live_server(settings, run_scheduler=True) as srv:
        admin = alpha_and_beta(srv.admin(), 3)
        token = srv.token("agent-n1", "agent", node="n1")
        agent = make_agent(srv.url, token, "n1", tmp_path / "n1", isolation=isolation,
                           devices="simulated:3xA100-80G",
                           labels={"gpupool.io/address": "127.0.0.1"})  # fmt: skip
        try:
            with agent_thread(agent):
                wait_for_cards(admin, "n1")
                body = {
                    "name": "chat", "tenant": "beta", "request": "gpu=1,mem=1GiB",
                    "command": [PY, "-c", REPLICA], "env": {"READY_AFTER": "0"},
                    "min_replicas": 1, "max_replicas": 2, "metric": "concurrency",
                    "target": 1000, "startup_s": 20, "warm": 2,
                }  # fmt: skip
                ok(admin.post("/api/v1/services", json=body), 201)
                wait_for(
                    "one serving, one parked",
                    lambda: (
                        sorted((r["ready"], r["parked"]) for r in _replicas(admin))
                        == [(False, True), (True, False)]
                    ),
                    60,
                )
                before = {r["job_id"]: r["parked"] for r in _replicas(admin)}
                env = {"LOW": str(RANGE[0]), "HIGH": str(RANGE[1]), "FOR": str(ATTACK_S)}
                scan = submit(admin, "cpu=1,mem=256MiB", "alpha", env=env, command=[PY, "-c", SCAN])
                wait_for("the scan", in_state(admin, scan["id"], "running"), 30)
                seen: list[dict[int, tuple[bool, bool]]] = []
                with Balancer(admin, "chat", tenant="beta") as balancer:
                    stop = threading.Event()

                    def load() -> None:
                        while not stop.is_set():
                            balancer.send(1)
                            time.sleep(0.02)

                    sender = threading.Thread(target=load, daemon=True)
                    sender.start()
                    deadline = time.monotonic() + ATTACK_S + 30
                    while time.monotonic() < deadline:
                        state = ok(admin.get(f"/api/v1/jobs/{scan['id']}"))["state"]
                        seen.append({r["job_id"]: (r["ready"], r["parked"])
                                     for r in _replicas(admin)})  # fmt: skip
                        if state in ("succeeded", "failed"):
                            break
                        time.sleep(0.5)
                    stop.set()
                    sender.join(timeout=10)
                attack = job_log(admin, scan["id"])

                # detection: the parked engine woken behind the platform's back
                parked = next(j for j, p in before.items() if p)
                control = control_address([agent], parked)
                woken = httpx.post(f"http://{control}/wake_up", timeout=5, trust_env=False)
                assert woken.status_code == 200  # root on the host reaches it: the agent's place
                assert not _is_sleeping(control)
                at = time.monotonic()
                wait_for("asleep again", lambda: _is_sleeping(control), 10)
                found_in = time.monotonic() - at
                recorded = wait_for(
                    "the fault recorded",
                    lambda: [e for e in ok(admin.get(f"/api/v1/jobs/{parked}/events"))
                             if "awake while parked" in e["reason"]],
                    10,
                )  # fmt: skip
        finally:
            agent.launcher.networks.remove_all()
    print(f"parked engine woken from outside: back asleep {found_in:.2f} s later "
          f"(looks every {INTERVAL_S} s)")  # fmt: skip
    assert "passes" in attack and "open " in attack, attack  # it ran, and reached beta's port
    assert "obeyed" not in attack and "leak" not in attack, attack
    assert balancer.lost == 0 and sum(balancer.served.values()) > 100, balancer.served
    assert all(view == {j: (not p, p) for j, p in before.items()} for view in seen), seen[-1]
    assert found_in <= INTERVAL_S + 1.5
    assert recorded[0]["actor"] == "agent n1", recorded


def _is_sleeping(control: str) -> bool:
    answer = httpx.get(f"http://{control}/is_sleeping", timeout=5, trust_env=False)
    return bool(answer.json()["is_sleeping"])

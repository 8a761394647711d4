"""Warm-parked replicas end to end (issue 49): a real server with its scheduler loop and
service reconciler, an agent running real replica processes (examples/replica.py, which
speaks vLLM's sleep-mode protocol) and training that saves on a signal. A service keeps two
engines: the one it does not need parks — asleep, its card lent to training — and when the
service scales up it wakes on its card in seconds: the training there is vacated in its
checkpoint grace, the engine woken, and it serves. Measured over repeated wakes: the time
from the scale-up decision to the woken replica's first successful answer. A balancer in the
test sends requests all along and loses none; training resumes after each scale-in. The
agent restarts halfway, and a wake is decided while it is away."""

import statistics
import sys
import threading
import time

import httpx

from gpupool.server.settings import Settings
from tests.support.agents import (  # noqa: F401 (the fixture kills leftover workloads)
    agent_thread,
    in_state,
    make_agent,
    no_workload_outlives_its_test,
    wait_for,
    wait_for_cards,
)
from tests.support.balancer import Balancer
from tests.support.cluster import ok
from tests.support.live import live_server
from tests.support.replica import REPLICA

SAVES = (  # a training job that takes a second to save its checkpoint on SIGUSR1
    "import signal, sys, time\n"
    "def save(*_):\n"
    "    time.sleep(1.0); sys.exit(0)\n"
    "signal.signal(signal.SIGUSR1, save)\n"
    "while True: time.sleep(0.1)\n"
)
WAKES = 6  # half before the agent restarts, half after


def _replicas(admin) -> list[dict]:
    return ok(admin.get("/api/v1/services/chat"))["replicas"]


def _replica(admin, job_id: int) -> dict:
    return next(r for r in _replicas(admin) if r["job_id"] == job_id)


def _cards(admin, job_id: int) -> list[tuple[str, int]]:
    alloc = ok(admin.get(f"/api/v1/jobs/{job_id}"))["allocation"]
    return [(n["node"], d["device"]) for n in alloc["nodes"] for d in n["devices"]]


def _card_of(admin, replica: int) -> list[tuple[str, int]]:
    """The card a parked replica keeps for its wake (its allocation holds no device)."""
    r = next(r for r in _replicas(admin) if r["job_id"] == replica)
    assert _cards(admin, replica) == []  # lent: its allocation holds none
    return [(r["node"], d) for d in r["parked_on"]]


def _first_answer(endpoint: str, deadline: float) -> float:
    """When ``endpoint`` first answers a request (polled every 20 ms)."""
    while time.monotonic() < deadline:
        try:
            r = httpx.post(f"http://{endpoint}/infer", json={"tokens": 1}, timeout=2,
                           trust_env=False)  # fmt: skip
            if r.status_code == 200:
                return time.monotonic()
        except httpx.HTTPError:
            pass
        time.sleep(0.02)
    raise AssertionError(f"{endpoint} never answered")


def test_a_parked_replica_wakes_on_its_card_in_seconds_and_training_resumes(tmp_path):
    settings = Settings(data_dir=tmp_path, log_json=False, cycle_interval_s=0.2,
                        service_interval_s=0.3, service_drain_s=1)  # fmt: skip
    with live_server(settings, run_scheduler=True) as srv:
        admin = srv.admin()
        ok(admin.post("/api/v1/tenants", json={"name": "org"}), 201)
        for team, cards in (("inference", 2), ("training", 0)):  # training borrows idle cards
            ok(admin.post("/api/v1/tenants", json={"name": team, "parent": "org"}), 201)
            quota = {"resource": "gpu", "nominal": cards}
            ok(admin.put(f"/api/v1/tenants/{team}/quotas/gpu", json=quota))
        token = srv.token("agent-n1", "agent", node="n1")

        def agent():  # a restart halfway: the parked engine and its record outlive it
            return agent_thread(make_agent(srv.url, token, "n1", tmp_path / "n1", grace_s=20,
                                           labels={"gpupool.io/address": "127.0.0.1"}))  # fmt: skip

        took: list[float] = []
        with agent():
            wait_for_cards(admin)
            body = {
                "name": "chat", "tenant": "inference", "request": "gpu=1,mem=2GiB",
                "command": [sys.executable, "-c", REPLICA], "env": {"READY_AFTER": "0.5"},
                "min_replicas": 1, "max_replicas": 2, "metric": "concurrency", "target": 100,
                "startup_s": 30, "warm": 2,
            }  # fmt: skip
            ok(admin.post("/api/v1/services", json=body), 201)
            # two engines start; the one the service does not need parks
            wait_for("one parked", lambda: sum(r["parked"] for r in _replicas(admin)) == 1, 60)
            job = {"request": "gpu=1,mem=2GiB", "tenant": "training", "kind": "training",
                   "command": [sys.executable, "-c", SAVES],
                   "checkpoint": {"signal": "USR1", "grace_s": 2}}  # fmt: skip
            training = int(ok(admin.post("/api/v1/jobs", json=job), 201)["id"])
        for half in range(2):
            with agent(), Balancer(admin, "chat") as balancer:
                stop = threading.Event()

                def load(b: Balancer = balancer, stop: threading.Event = stop) -> None:
                    while not stop.is_set():
                        b.send(1)

                sender = threading.Thread(target=load, daemon=True)
                sender.start()
                for _ in range(WAKES // 2):
                    wait_for("training on the lent card", in_state(admin, training, "running"), 30)
                    parked = next(r for r in _replicas(admin) if r["parked"])
                    # the training runs on the card the parked engine holds (lent, not moved)
                    assert _cards(admin, training) == _card_of(admin, parked["job_id"])
                    decided = time.monotonic()
                    ok(admin.post("/api/v1/services/chat/scale", json={"replicas": 2}))
                    answered = _first_answer(parked["endpoint"], decided + 30)
                    took.append(answered - decided)
                    wait_for(
                        "two ready", lambda: ok(admin.get("/api/v1/services/chat"))["ready"] == 2
                    )
                    ok(admin.post("/api/v1/services/chat/scale", json={"replicas": 1}))
                    wait_for(
                        "parked again", lambda: sum(r["parked"] for r in _replicas(admin)) == 1, 30
                    )
                stop.set()
                sender.join(timeout=10)
                assert balancer.lost == 0 and sum(balancer.served.values()) > 0, half
        with agent():
            wait_for("training resumes", in_state(admin, training, "running"), 30)
            parked = next(r for r in _replicas(admin) if r["parked"])
        # a wake decided while the node's agent is away: the card is taken back in the
        # database at once; the agent, back, stops the training there, then wakes the engine
        ok(admin.post("/api/v1/services/chat/scale", json={"replicas": 2}))
        mine = parked["job_id"]
        wait_for("taken back", lambda: not _replica(admin, mine)["parked"], 30)
        assert ok(admin.get(f"/api/v1/jobs/{training}"))["state"] != "running"
        with agent():
            _first_answer(parked["endpoint"], time.monotonic() + 30)
            ok(admin.post("/api/v1/services/chat/scale", json={"replicas": 1}))
            wait_for("training resumes", in_state(admin, training, "running"), 30)
            p50 = statistics.median(took)
            p95 = sorted(took)[max(0, round(0.95 * len(took)) - 1)]
            each = [round(t, 2) for t in took]
            print(f"scale-up decision to the woken replica's first answer: p50 {p50:.2f} s, "
                  f"p95 {p95:.2f} s over {len(took)} wakes: {each}")  # fmt: skip
            assert max(took) < 12  # the agent's own grace is 20 s: the vacate took the short one
            replicas = _replicas(admin)
            assert all(r["woke_in_s"] is None or r["woke_in_s"] < 12 for r in replicas)
            lost = ok(admin.get(f"/api/v1/jobs/{training}"))["lost_gpu_s"]
            assert 0 < lost <= 2.0 * (WAKES + 1) + 1e-6  # each vacate cost it at most its grace

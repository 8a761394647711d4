"""An elastic inference service end to end on loopback: a server with its scheduler loop and
service reconciler, two agents running real replica processes, and a balancer in the test
that replays the Azure LLM trace's real arrivals (an excerpt, time compressed 5x, 600
requests in about 30 s) to the ready endpoints. The service scales 1 -> 4 replicas on both
nodes, taking back the cards a training team borrowed; a replica killed under load is
replaced and the balancer loses no request; when the load stops it scales back to 1 and the
training jobs take the freed cards again."""

import contextlib
import csv
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

import httpx

from gpupool.server.settings import Settings
from tests.support.agents import (  # noqa: F401 (the fixture kills leftover workloads)
    agent_thread,
    control_address,
    in_state,
    make_agent,
    no_workload_outlives_its_test,
    wait_for,
)
from tests.support.balancer import Balancer
from tests.support.cluster import ok, submit
from tests.support.live import live_server
from tests.support.paths import DATA
from tests.support.replica import REPLICA

ARRIVALS = DATA / "azure-llm-2023" / "conv-first-600.csv"
SPEEDUP = 5.0


def arrivals() -> list[tuple[float, int]]:
    """(seconds from the first request, generated tokens), time compressed."""
    rows = list(csv.DictReader(ARRIVALS.open()))
    times = [datetime.fromisoformat(r["TIMESTAMP"][:26]) for r in rows]
    return [
        ((t - times[0]).total_seconds() / SPEEDUP, int(r["GeneratedTokens"]))
        for t, r in zip(times, rows, strict=True)
    ]


def test_a_service_scales_with_real_load_replaces_a_dead_replica_and_gives_cards_back(
    tmp_path,
):
    settings = Settings(data_dir=tmp_path, log_json=False, cycle_interval_s=0.2, grace_s=1,
                        service_interval_s=0.3, service_drain_s=2)  # fmt: skip
    with live_server(settings, run_scheduler=True) as srv:
        admin = srv.admin()
        ok(admin.post("/api/v1/tenants", json={"name": "org"}), 201)
        for team, cards in (("inference", 4), ("training", 0)):  # training borrows idle cards
            ok(admin.post("/api/v1/tenants", json={"name": team, "parent": "org"}), 201)
            quota = {"resource": "gpu", "nominal": cards}
            ok(admin.put(f"/api/v1/tenants/{team}/quotas/gpu", json=quota))
        made = [
            make_agent(srv.url, srv.token(f"agent-{name}", "agent", node=name), name,
                       tmp_path / name, labels={"gpupool.io/address": "127.0.0.1"})
            for name in ("n1", "n2")
        ]  # fmt: skip
        with agent_thread(made[0]), agent_thread(made[1]):
            for name in ("n1", "n2"):
                wait_for(name, lambda n=name: admin.get(f"/api/v1/nodes/{n}").status_code == 200)
            body = {
                "name": "chat", "tenant": "inference", "request": "gpu=1",
                "command": [sys.executable, "-c", REPLICA], "env": {"READY_AFTER": "0.5"},
                "min_replicas": 1, "max_replicas": 4, "metric": "concurrency", "target": 1.5,
                "utilisation": 1.0, "stable_s": 6, "startup_s": 2,
            }  # fmt: skip
            svc = ok(admin.post("/api/v1/services", json=body), 201)
            assert svc["desired"] == 1 and svc["policy"] == "reactive"

            def ready(n: int):
                def check():
                    got = ok(admin.get("/api/v1/services/chat"))
                    return got if got["ready"] == n and got["desired"] == n else None

                return check

            wait_for("one ready replica", ready(1), timeout=30)
            # training borrows the three free cards
            training = [
                submit(admin, "gpu=1", "training", kind="training",
                       command=["python3", "-c", "import time; time.sleep(600)"])["id"]
                for _ in range(3)
            ]  # fmt: skip
            for job in training:
                wait_for("training runs", in_state(admin, job, "running"), timeout=30)

            load = arrivals()
            with Balancer(admin, "chat") as balancer, ThreadPoolExecutor(96) as pool:
                start = time.monotonic()
                crashed, replaced, polled = None, None, 0.0
                for at, tokens in load:
                    time.sleep(max(0.0, start + at - time.monotonic()))
                    pool.submit(balancer.send, tokens)
                    if time.monotonic() - polled < 0.5 or replaced is not None:
                        continue
                    polled = time.monotonic()
                    got = ok(admin.get("/api/v1/services/chat"))
                    serving = [r for r in got["replicas"] if r["ready"]]
                    if crashed is None and len(serving) == 4:
                        assert {r["node"] for r in serving} == {"n1", "n2"}  # spread
                        # the training jobs gave back the cards they borrowed
                        states = {ok(admin.get(f"/api/v1/jobs/{j}"))["state"] for j in training}
                        assert "running" not in states
                        crashed = serving[0]
                        where = control_address(made, crashed["job_id"])
                        with contextlib.suppress(httpx.HTTPError):  # it dies while answering
                            httpx.post(f"http://{where}/crash", timeout=2, trust_env=False)
                    elif crashed is not None and len(serving) == 4:
                        ids = {r["job_id"] for r in serving}
                        replaced = ids if crashed["job_id"] not in ids else None
                assert crashed is not None, "the service never reached 4 ready replicas"
                assert replaced is not None, "the dead replica was not replaced under load"
            assert balancer.lost == 0
            assert sum(balancer.served.values()) == len(load)
            # the dead replica's job failed and another took its place
            dead = ok(admin.get(f"/api/v1/jobs/{crashed['job_id']}"))
            assert dead["state"] in ("failed", "cancelled")
            # no load: back to one replica, and training runs again on the freed cards
            wait_for("one replica again", ready(1), timeout=40)
            for job in training:
                wait_for("training resumed", in_state(admin, job, "running"), timeout=30)
            final = ok(admin.get("/api/v1/services/chat"))
            assert crashed["job_id"] not in [r["job_id"] for r in final["replicas"]]
            assert len(ok(admin.get("/api/v1/services/chat/endpoints"))) == 1
            history = ok(admin.get("/api/v1/services/chat/history"))
            assert history["samples"] and history["metric"] == "concurrency"
            ok(admin.delete("/api/v1/services/chat"), 204)

"""A reservation and a production service (issue 59, finding 1), with a real server, its
scheduler loop and service reconciler, and agents running real replica processes
(examples/replica.py).

On the day, ``reservation create --nodes … --start now`` stopped both replicas of a service
(one serving, one parked); their replacements could not go to the two free nodes, reserved
later by another reservation, while a dev/test job took one of them: 0 ready of 2 until the
reservation was deleted, and what it would stop was said only once it existed. Now creation
previews what it will stop and move (``dry_run``), refuses to leave a service without a
place unless told (``allow_outage``), and a reservation that begins moves the replicas on
its nodes make-before-break: each copy starts elsewhere and the replica stops once its copy
is ready, so the service serves all along."""

import sys
import threading
import time

from gpupool.server.settings import Settings
from tests.support.agents import (  # noqa: F401 (the fixture kills leftover workloads)
    agent_thread,
    make_agent,
    no_workload_outlives_its_test,
    wait_for,
)
from tests.support.balancer import Balancer
from tests.support.cli import gpupool
from tests.support.cluster import node_body, ok, submit
from tests.support.live import live_server
from tests.support.replica import REPLICA

SLEEP = ["python3", "-c", "import time; time.sleep(600)"]
RESERVATIONS = "/api/v1/reservations"


def _teams(admin, **cards: float) -> None:
    """The seed's shape: teams under a company without a quota of its own."""
    ok(admin.post("/api/v1/tenants", json={"name": "company"}), 201)
    for team, n in cards.items():
        ok(admin.post("/api/v1/tenants", json={"name": team, "parent": "company"}), 201)
        ok(admin.put(f"/api/v1/tenants/{team}/quotas/gpu", json={"resource": "gpu",
                                                                  "nominal": n}))  # fmt: skip


def _service(admin, **extra) -> dict:
    body = {
        "name": "chat", "tenant": "inference", "request": "gpu=1,mem=1GiB",
        "command": [sys.executable, "-c", REPLICA], "env": {"READY_AFTER": "0.5"},
        "min_replicas": 1, "max_replicas": 2, "metric": "concurrency", "target": 100,
        "startup_s": 30, **extra,
    }  # fmt: skip
    return ok(admin.post("/api/v1/services", json=body), 201)


def _replicas(admin) -> list[dict]:
    return ok(admin.get("/api/v1/services/chat"))["replicas"]


class Watch:
    """The service's ready replicas, read every 0.1 s from another thread."""

    def __init__(self, admin):
        self.admin, self.least, self.reads = admin, None, 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            ready = ok(self.admin.get("/api/v1/services/chat"))["ready"]
            self.least = ready if self.least is None else min(self.least, ready)
            self.reads += 1
            self.stop.wait(0.1)

    def __enter__(self) -> "Watch":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(timeout=10)


def test_a_reservation_that_takes_a_services_nodes_moves_its_replicas_and_it_stays_ready(
    tmp_path,
):
    settings = Settings(data_dir=tmp_path, log_json=False, cycle_interval_s=0.2,
                        service_interval_s=0.3, service_drain_s=1, grace_s=1)  # fmt: skip
    with live_server(settings, run_scheduler=True) as srv:
        admin = srv.admin()
        _teams(admin, algorithm=2, inference=2, devtest=2)
        agents = [
            make_agent(srv.url, srv.token(f"agent-{name}", "agent", node=name), name,
                       tmp_path / name, labels={"gpupool.io/address": "127.0.0.1"})
            for name in ("n1", "n2", "n3")
        ]  # fmt: skip
        with agent_thread(agents[0]), agent_thread(agents[1]), agent_thread(agents[2]):
            for name in ("n1", "n2", "n3"):
                wait_for(name, lambda n=name: bool(
                    (r := admin.get(f"/api/v1/nodes/{n}")).status_code == 200
                    and r.json()["devices"]))  # fmt: skip
            now = time.time()
            # n1 is the algorithm team's from three hours on
            ahead = {"tenant": "algorithm", "nodes": ["n1"], "start": now + 3 * 3600,
                     "end": now + 86400}  # fmt: skip
            ok(admin.post(RESERVATIONS, json=ahead), 201)
            _service(admin, warm=2)  # one engine serves, one parks
            wait_for("one ready, one parked", lambda: sorted(
                (r["ready"], r["parked"]) for r in _replicas(admin)
            ) == [(False, True), (True, False)], timeout=60)  # fmt: skip
            old = {r["job_id"]: r for r in _replicas(admin)}
            # the reservation ahead keeps online work off n1 while other nodes have room
            assert {r["node"] for r in old.values()} <= {"n2", "n3"}
            listed = ok(admin.get(RESERVATIONS))
            assert listed[0]["plan"]["stops"] == [] and listed[0]["plan"]["moves"] == []
            assert "(online work only when no other node has room)" in listed[0]["status"]
            body = {"tenant": "algorithm", "nodes": ["n2", "n3"], "start": time.time(),
                    "end": time.time() + 7200}  # fmt: skip
            # the preview: nothing stopped or created, what it will do said
            preview = ok(admin.post(RESERVATIONS, json={**body, "dry_run": True}))
            assert preview["dry_run"] is True and preview["id"] is None
            plan = preview["plan"]
            assert {m["job_id"]: (m["service"], m["to"]) for m in plan["moves"]} == {
                job: ("chat", ["n1"]) for job in old
            }
            assert plan["stranded"] == [] and plan["stops"] == []
            assert len(ok(admin.get(RESERVATIONS))) == 1
            assert all(r["job_id"] in old for r in _replicas(admin))

            with Watch(admin) as watch, Balancer(admin, "chat") as balancer:
                stop = threading.Event()

                def load() -> None:
                    while not stop.is_set():
                        balancer.send(1)

                sender = threading.Thread(target=load, daemon=True)
                sender.start()
                time.sleep(1.0)
                began = time.monotonic()
                made = ok(admin.post(RESERVATIONS, json=body), 201)
                assert sorted(made["displaces"]) == sorted(old)
                # a dev/test job without a time limit, as on the day
                dev = submit(admin, "gpu=2", "devtest", kind="dev", command=SLEEP)

                def moved() -> bool:
                    now_ = _replicas(admin)
                    return (
                        {r["node"] for r in now_} == {"n1"}
                        and not {r["job_id"] for r in now_} & set(old)
                        and sorted((r["ready"], r["parked"]) for r in now_)
                        == [(False, True), (True, False)]
                    )

                wait_for("the replicas moved to n1, one serving, one parked", moved, 90)
                took = time.monotonic() - began
                time.sleep(1.0)
                stop.set()
                sender.join(timeout=10)
            print(f"moved in {took:.1f} s; ready replicas at least {watch.least} over "
                  f"{watch.reads} looks; {sum(balancer.served.values())} requests served, "
                  f"{balancer.retried} retried, {balancer.lost} lost")  # fmt: skip
            assert watch.reads > 20 and watch.least is not None and watch.least >= 1
            assert balancer.lost == 0 and sum(balancer.served.values()) > 0
            for job in old:
                ended = ok(admin.get(f"/api/v1/jobs/{job}"))
                assert ended["state"] == "cancelled"
                assert ended["reason"].startswith("replaced by job ")
                assert ended["reason"].endswith(" on n1 (reservation, make-before-break)")
            # the dev/test job did not take the room the service needed
            waiting = ok(admin.get(f"/api/v1/jobs/{dev['id']}"))
            assert waiting["state"] == "pending", waiting
            audit = ok(admin.get("/api/v1/audit", params={"action": "RESERVATION"}))["items"]
            assert {a["action"] for a in audit} >= {"RESERVATION copy", "RESERVATION replace"}
            ok(admin.delete("/api/v1/services/chat"), 204)
            ok(admin.post(f"/api/v1/jobs/{dev['id']}/cancel"))
            time.sleep(0.5)


def test_a_reservation_that_would_leave_a_service_without_a_place_is_refused_naming_it(
    tmp_path,
):
    settings = Settings(data_dir=tmp_path, log_json=False, cycle_interval_s=0.2,
                        service_interval_s=0.3)  # fmt: skip
    with live_server(settings, run_scheduler=True) as srv:
        admin = srv.admin()
        _teams(admin, algorithm=2, inference=2, devtest=2)
        for name in ("n1", "n2", "n3"):
            ok(admin.post("/api/v1/nodes", json=node_body(name, cards=2)))
        now = time.time()
        ahead = {"tenant": "algorithm", "nodes": ["n1"], "start": now + 3600, "end": now + 86400}
        ok(admin.post(RESERVATIONS, json=ahead), 201)
        _service(admin, min_replicas=2, command=SLEEP)  # two replicas, on n2 and n3
        wait_for("two replicas placed", lambda: sorted(
            r["node"] or "" for r in _replicas(admin)) == ["n2", "n3"], timeout=30)  # fmt: skip
        replicas = sorted(r["job_id"] for r in _replicas(admin))
        body = {"tenant": "algorithm", "nodes": ["n2", "n3"], "start": time.time() + 60,
                "end": time.time() + 7200}  # fmt: skip
        # their copies would go to n1, which reservation 1 takes an hour later: then
        # nowhere is left for them (it begins in a minute: the list shows what it will do)
        r = admin.post(RESERVATIONS, json=body)
        assert r.status_code == 409, r.text
        detail = r.json()["detail"]
        assert detail.startswith(
            "nodes: it would leave service chat of inference without a place: replica job(s) "
            f"{', '.join(map(str, replicas))} stopped at "
        )
        assert "when reservation r-1 of algorithm begins" in detail
        assert detail.endswith("; allow_outage (--allow-outage) stops them anyway")
        assert len(ok(admin.get(RESERVATIONS))) == 1  # nothing created
        preview = ok(admin.post(RESERVATIONS, json={**body, "dry_run": True}))
        stranded = preview["plan"]["stranded"]
        assert sorted(s["job_id"] for s in stranded) == replicas
        assert {(s["service"], s["by"]) for s in stranded} == {("chat", "r-1")}
        # the same from the command line: refused naming the service; the preview says why
        env = {"GPUPOOL_SERVER": srv.url, "GPUPOOL_TOKEN": srv.admin_token}
        args = ["reservation", "create", "--tenant", "algorithm", "--nodes", "n2,n3",
                "--start", "1m", "--end", "2h"]  # fmt: skip
        refused = gpupool(*args, env=env)
        assert refused.returncode == 2 and refused.stdout == ""
        assert "409 --nodes: it would leave service chat of inference without a place" in (
            refused.stderr
        )
        dry = gpupool(*args, "--dry-run", env=env)
        assert dry.returncode == 0, dry.stderr
        lines = dry.stdout.splitlines()
        assert lines[0].startswith("dry run, nothing created: a reservation of n2, n3 for "
                                   "algorithm from ")  # fmt: skip
        assert lines[1] == (
            f"when it begins it moves job {replicas[0]} (service chat) to n1; job "
            f"{replicas[1]} (service chat) to n1 (a copy starts there first; each stops once "
            "its copy runs)"
        )
        for job, line in zip(replicas, lines[2:], strict=True):
            assert line.startswith(f"it leaves job {job} (service chat) of inference without "
                                   "a place: stopped at ")  # fmt: skip
            assert " when reservation r-1 begins (" in line
        assert len(ok(admin.get(RESERVATIONS))) == 1  # nothing created
        made = ok(admin.post(RESERVATIONS, json={**body, "allow_outage": True}), 201)
        assert sorted(made["displaces"]) == replicas
        assert sorted(s["job_id"] for s in made["plan"]["stranded"]) == replicas
        # a member of another team sees the reservation, not what it does to others' jobs
        member = srv.client(srv.token("ann", "member", "devtest"))
        (seen,) = [x for x in ok(member.get(RESERVATIONS)) if x["id"] == made["id"]]
        plan = seen["plan"]
        assert plan["moves"] == [] and plan["stranded"] == [] and plan["hidden"] == 2
        assert (
            "chat" not in seen["status"] and "2 job(s) of teams you do not see" in (seen["status"])
        )
        listed = gpupool("reservation", "list", env=env)
        assert listed.returncode == 0 and "moves 2, strands chat" in listed.stdout


def test_online_work_of_no_service_left_without_a_place_is_said_not_refused(sqlite_server):
    srv = sqlite_server
    admin = srv.admin()
    _teams(admin, algorithm=2, inference=2)
    ok(admin.post("/api/v1/nodes", json=node_body("n1", cards=2)))
    job = submit(admin, "gpu=1", "inference", kind="inference", command=SLEEP)
    srv.cycle()
    body = {"tenant": "algorithm", "nodes": ["n1"], "start": time.time() + 600,
            "end": time.time() + 7200}  # fmt: skip
    made = ok(admin.post(RESERVATIONS, json=body), 201)
    (left,) = made["plan"]["stranded"]
    assert (left["job_id"], left["service"], left["own"]) == (job["id"], None, True)
    assert made["plan"]["moves"] == [] and made["displaces"] == [job["id"]]

"""One alert mechanism for operations and billing: rules over the state of record, alerts
deduplicated with a firing/resolved state, listed per tenant, delivered by a signed webhook
with retries to a real HTTP receiver on loopback; budgets that alert and, with stop-elastic,
hold a tenant's work beyond its guarantee."""

import hashlib
import hmac
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

from gpupool.server.alerts.rules import BudgetFact, DeviceFact, Facts, PendingFact, firing
from gpupool.server.alerts.webhook import SIGNATURE
from gpupool.server.db.tables import AlertRow, JobRow, NodeRow, UsageRow
from gpupool.server.settings import Settings
from tests.support.cli import gpupool
from tests.support.cluster import ok, seed_cluster, started, submit


def test_rules():
    now = 10_000.0
    facts = Facts(
        now=now,
        lost_nodes=("n9",),
        devices=(
            DeviceFact("n1", 0, healthy=False),
            DeviceFact("n1", 1, True, temp_c=91.0),
            DeviceFact("n1", 2, True, util_pct=1.0, held_by="algo", held_since=now - 3600),
            DeviceFact("n1", 3, True, util_pct=1.0, held_by="algo", held_since=now - 60),
            DeviceFact("n9", 0, healthy=False),  # on a lost node: the node's alert says it
        ),
        pending=(
            PendingFact(
                7, "algo", now - 3600, "0/1 nodes: 1 fewer than 4 free gpu", code="no-room"
            ),
            PendingFact(8, "beta", now - 60, "beta gpu 2/2 guaranteed", code="quota"),
            PendingFact(9, "beta", now - 7200, "held (gpupool job release 9)", held=True),
        ),
        budgets=(BudgetFact("algo", "2026-12", 850_000, 1_000_000, (50, 80, 100)),),
    )
    keys = [f.key for f in firing(facts)]
    assert keys == [
        "node-lost:n9", "device-unhealthy:n1:0", "device-hot:n1:1", "card-idle:n1:2",
        "job-pending:7", "quota-exhausted:beta", "budget:algo:2026-12:50",
        "budget:algo:2026-12:80",
    ]  # fmt: skip
    budget = next(f for f in firing(facts) if f.key == "budget:algo:2026-12:80")
    assert budget.message == (
        "algo has spent ¥8,500.00 of its ¥10,000.00 budget for 2026-12 (85%, threshold 80%)"
    )


def _alerts(server) -> dict[str, str]:
    with server.ctx.db.read() as s:
        return {r.key: r.state for r in s.query(AlertRow)}


def test_alerts_fire_once_resolve_and_fire_again(server):
    admin = server.admin()
    seed_cluster(admin, nodes=3, tenants={"algo": 12, "capped": 1})
    capped = {"resource": "gpu", "nominal": 1, "borrowing_limit": 0}
    ok(admin.put("/api/v1/tenants/capped/quotas/gpu", json=capped))
    loop = server.ctx.loop
    for _ in range(2):
        submit(admin, "gpu=4", "algo")
    submit(admin, "gpu=1", "capped")  # its whole guarantee
    server.cycle()
    job = submit(admin, "gpu=4", "algo")  # 3 cards are free: it waits
    starved = submit(admin, "gpu=1", "capped")  # may neither hold more nor borrow
    server.cycle()
    waits = {j: ok(admin.get(f"/api/v1/jobs/{j}"))["wait_code"] for j in (job["id"], starved["id"])}
    assert waits == {job["id"]: "no-room", starved["id"]: "quota"}
    agent = server.client(server.token("agent-n0", "agent", node="n0"))
    hot = [{"index": 0, "temp_c": 93.0}, {"index": 1, "healthy": False}]
    ok(agent.post("/api/v1/nodes/n0/heartbeat", json={"devices": hot}))
    with server.ctx.db.write() as s:
        s.get(JobRow, job["id"]).queued_at = time.time() - 3600
        s.get(NodeRow, "n1").state = "lost"
    loop.check_alerts()
    loop.check_alerts()  # nothing twice
    assert _alerts(server) == {
        "device-hot:n0:0": "firing", "device-unhealthy:n0:1": "firing",
        "node-lost:n1": "firing", f"job-pending:{job['id']}": "firing",
        "quota-exhausted:capped": "firing",
    }  # fmt: skip
    ok(agent.post("/api/v1/nodes/n0/heartbeat", json={"devices": [{"index": 0, "temp_c": 60}]}))
    ok(admin.post(f"/api/v1/jobs/{job['id']}/cancel"))
    loop.check_alerts()
    states = _alerts(server)
    assert states["device-hot:n0:0"] == "resolved" and states["node-lost:n1"] == "firing"
    assert states[f"job-pending:{job['id']}"] == "resolved"
    ok(agent.post("/api/v1/nodes/n0/heartbeat", json={"devices": [{"index": 0, "temp_c": 95}]}))
    loop.check_alerts()
    assert _alerts(server)["device-hot:n0:0"] == "firing"  # the same row, firing again
    listed = ok(admin.get("/api/v1/alerts"))
    assert {a["kind"] for a in listed} == {
        "device-hot", "device-unhealthy", "node-lost", "quota-exhausted"
    }  # fmt: skip
    assert all(a["delivered"] is False for a in listed)  # no webhook set
    member = server.client(server.token("mo", "member", "algo"))
    assert ok(member.get("/api/v1/alerts")) == []  # operations alerts are for admins


class Receiver(BaseHTTPRequestHandler):
    """A webhook receiver that fails its first ``failures`` requests with 500."""

    failures = 2
    got: ClassVar[list[tuple[bytes, str]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if Receiver.failures > 0:
            Receiver.failures -= 1
            self.send_response(500)
        else:
            Receiver.got.append((body, self.headers[SIGNATURE]))
            self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_webhook_deliveries_are_signed_and_retried_with_backoff(sqlite_server):
    receiver = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=receiver.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{receiver.server_address[1]}/hook"
    secret = "s3cret"
    try:
        admin = sqlite_server.admin()
        seed_cluster(admin, nodes=1, tenants={"algo": 1})
        with sqlite_server.ctx.db.write() as s:
            s.get(NodeRow, "n0").state = "lost"
        sqlite_server.ctx.loop.check_alerts()
        now = time.time()
        sent = []
        loop = sqlite_server.ctx.loop
        loop.settings = loop.settings.model_copy(
            update={"alert_webhook_url": url, "alert_webhook_secret": secret}
        )
        for step in range(4):  # 500, 500 (backing off 2 s, then 4 s), then delivered
            sent.append(loop.deliver_alerts(now))
            with sqlite_server.ctx.db.read() as s:
                row = s.query(AlertRow).one()
                attempts, next_at, error = row.attempts, row.next_attempt_at, row.last_error
            if step < 2:
                assert (attempts, error) == (step + 1, "HTTP 500")
                assert next_at == now + 2 ** (step + 1)
                assert loop.deliver_alerts(now + 1) == 0  # too early: nothing is sent
                now = next_at
        assert sent == [0, 0, 1, 0] and attempts == 0
        [(body, signature)] = Receiver.got
        expected = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        assert hmac.compare_digest(signature, expected)
        alert = json.loads(body)
        assert (alert["kind"], alert["state"], alert["subject"]) == ("node-lost", "firing", "n0")
        listed = ok(admin.get("/api/v1/alerts"))
        assert listed[0]["delivered"] is True
    finally:
        receiver.shutdown()
        receiver.server_close()


def test_a_spent_stop_elastic_budget_holds_work_beyond_the_guarantee(sqlite_server):
    admin = sqlite_server.admin()
    seed_cluster(admin, nodes=1, tenants={"algo": 1, "beta": 0})
    env = {"GPUPOOL_SERVER": sqlite_server.url, "GPUPOOL_TOKEN": sqlite_server.admin_token}
    r = gpupool("billing", "budget", "algo", "--monthly", "100", "--thresholds", "50,100",
                "--action", "stop-elastic", env=env)  # fmt: skip
    assert r.stdout.strip() == "algo: ¥100.00 a month, alerts at 50%, 100%, at 100%: stop-elastic"
    now = time.time()
    with sqlite_server.ctx.db.write() as s:  # 40 card-hours this month: ¥138.89 at list price
        s.add(UsageRow(tenant="algo", job_id=1, allocation_id=1, model="A100-80G",
                       start=now - 3600, end=now - 1800, devices=1, device_seconds=0,
                       compute_pct_seconds=100 * 40 * 3600, mem_mib_seconds=0,
                       cpu_milli_seconds=0))  # fmt: skip
    loop = sqlite_server.ctx.loop
    loop.check_alerts()
    month = time.strftime("%Y-%m", time.gmtime(now + 8 * 3600))
    assert {k for k, v in _alerts(sqlite_server).items() if v == "firing"} == {
        f"budget:algo:{month}:50",
        f"budget:algo:{month}:100",
    }
    within = submit(admin, "gpu=1", "algo")
    beyond = submit(admin, "gpu=2", "algo")
    sqlite_server.cycle()
    assert ok(admin.get(f"/api/v1/jobs/{within['id']}"))["state"] == "admitted"
    reason = ok(admin.get(f"/api/v1/jobs/{beyond['id']}"))["reason"]
    assert reason.startswith(f"budget: algo has spent its budget for {month} (¥138.89 of ¥100.00)")
    member = sqlite_server.client(sqlite_server.token("mo", "member", "algo"))
    assert [a["kind"] for a in ok(member.get("/api/v1/alerts"))] == ["budget", "budget"]
    r = gpupool("alerts", "--json", env=env)
    assert len(json.loads(r.stdout)) == 2
    r = admin.put("/api/v1/billing/budgets/algo", json={"monthly": "0"})
    assert r.status_code == 422 and r.json()["field"] == "monthly"
    r = admin.put("/api/v1/billing/budgets/algo", json={"monthly": "5", "thresholds": [0]})
    assert r.status_code == 422 and r.json()["field"] == "thresholds"


def test_a_budget_counts_what_runs_now_and_acts_within_a_cycle(tmp_path):
    """At list prices (A100-80G ¥2,500 a card-month): 8 cards for two hours cost ¥55.56, all
    of it in a live allocation no hourly checkpoint has metered yet. The running scheduler
    must see it: the alerts fire and work beyond the guarantee waits in the next cycle, not
    when the usage records are written."""
    from sqlalchemy import select

    from gpupool.server.db.tables import AllocationRow
    from tests.support.live import live_server

    settings = Settings(
        data_dir=tmp_path, log_json=False, cycle_interval_s=0.2, alert_interval_s=3600
    )  # fmt: skip  (no periodic alert pass helps)
    with live_server(settings, run_scheduler=True) as srv:
        admin = srv.admin()
        seed_cluster(admin, nodes=2, cards=8, tenants={})
        ok(admin.post("/api/v1/tenants", json={"name": "org"}), 201)
        for name, cards in (("algo", 1), ("beta", 15)):  # algo borrows beta's idle cards
            ok(admin.post("/api/v1/tenants", json={"name": name, "parent": "org"}), 201)
            quota = {"resource": "gpu", "nominal": cards}
            ok(admin.put(f"/api/v1/tenants/{name}/quotas/gpu", json=quota))
        body = {"monthly": "50", "thresholds": [80, 100], "action": "stop-elastic"}
        ok(admin.put("/api/v1/billing/budgets/algo", json=body))
        big = submit(admin, "gpu=8", "algo")  # borrows 7 cards: within budget so far
        deadline = time.monotonic() + 10
        while ok(admin.get(f"/api/v1/jobs/{big['id']}"))["state"] != "admitted":
            assert time.monotonic() < deadline, ok(admin.get(f"/api/v1/jobs/{big['id']}"))["reason"]
            time.sleep(0.05)
        with srv.ctx.db.write() as s:  # it has run for two hours, unmetered so far
            alloc = s.execute(select(AllocationRow)).scalar_one()
            alloc.created_at -= 7200
            assert alloc.metered_until is None
            granted, backdated = alloc.created_at, time.time()
        started(admin, big)  # its workload started as it was granted
        with srv.ctx.db.read() as s:
            assert s.execute(select(UsageRow)).first() is None
        month = time.strftime("%Y-%m", time.gmtime(time.time() + 8 * 3600))
        firing = {f"budget:algo:{month}:80": "firing", f"budget:algo:{month}:100": "firing"}
        deadline = time.monotonic() + 10  # the loop's next budget check sees the live spend
        while _alerts(srv) != firing:  # (alert_interval_s is an hour: not the periodic pass)
            assert time.monotonic() < deadline, _alerts(srv)
            time.sleep(0.05)
        beyond = submit(admin, "gpu=2", "algo")  # free cards, but beyond the guarantee
        deadline = time.monotonic() + 10
        while not ok(admin.get(f"/api/v1/jobs/{beyond['id']}"))["reason"].startswith("budget"):
            assert time.monotonic() < deadline, ok(admin.get(f"/api/v1/jobs/{beyond['id']}"))
            time.sleep(0.05)
        job = ok(admin.get(f"/api/v1/jobs/{beyond['id']}"))
        assert job["state"] == "pending"
        seen = time.time()
        prefix = f"budget: algo has spent its budget for {month} (¥"
        assert job["reason"].startswith(prefix), job["reason"]
        spent = float(job["reason"][len(prefix) :].split()[0].replace(",", ""))

        def at_list_price(until: float) -> float:  # 8 A100-80G cards at ¥2,500 / 720 an hour
            return 8 * (until - granted) / 3600 * 2500 / 720

        # ¥55.56 for the two hours, and what the seconds until the check added
        assert at_list_price(backdated) - 0.01 <= spent <= at_list_price(seen) + 0.01


def test_the_alerts_read_each_cards_temperature_and_utilisation_on_both_backends(database_url):
    from gpupool.bench.agent_swarm import NODE_BODY
    from gpupool.server.alerts.facts import gather
    from gpupool.server.alerts.rules import Limits
    from gpupool.server.db.engine import Database
    from gpupool.server.db.tables import DeviceRow
    from gpupool.server.node_registry import register_node
    from gpupool.server.schemas import NodeIn

    db = Database(database_url)
    db.migrate()
    with db.write() as s:
        register_node(s, NodeIn(name="a", **NODE_BODY), time.time())
        s.get(DeviceRow, ("a", 0)).telemetry = {"temp_c": 91.5, "util_pct": 3, "time": 1.0}
        s.get(DeviceRow, ("a", 1)).telemetry = {"temp_c": None, "time": 1.0}
    with db.read() as s:
        facts = gather(s, time.time(), "UTC", Limits())
    by_index = {d.index: d for d in facts.devices}
    assert (by_index[0].temp_c, by_index[0].util_pct) == (91.5, 3.0)
    assert (by_index[1].temp_c, by_index[1].util_pct) == (None, None)
    assert (by_index[2].temp_c, by_index[2].util_pct) == (None, None)  # no telemetry yet
    db.dispose()

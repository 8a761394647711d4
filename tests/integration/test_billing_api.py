"""Billing through the API and the CLI: the price catalog (admins set future prices, nobody
rewrites the past), invoices per tenant and month from the usage records, who may read them,
and bad input refused with the field."""

import json
import time
from datetime import UTC, datetime

from sqlalchemy import select

from gpupool.billing.invoice import month_bounds
from gpupool.server.db.tables import DeviceRow, JobRow, NodeRow
from tests.support.builders import usage_record
from tests.support.cli import gpupool
from tests.support.cluster import ok, seed_cluster, started


def test_invoices_from_usage_records_and_the_catalog(server):
    admin = server.admin()
    seed_cluster(admin, nodes=1, tenants={"algo": 4, "beta": 2})
    start, _ = month_bounds("2026-11")
    usage_record(server, "algo", start, 720)  # all of November (Asia/Shanghai) on one card
    usage_record(server, "algo", start - 3600, 2, pct=50)  # half a card across October's end
    usage_record(server, "beta", start, 10)
    out = ok(admin.get("/api/v1/billing/invoice", params={"tenant": "algo", "month": "2026-11"}))
    assert out["draft"] is False and out["zone"] == "Asia/Shanghai"
    assert out["lines"] == [
        {"description": "A100-80G (card-hours)", "quantity": "720.5000", "unit": "card-hour",
         "unit_price": "3.472222", "amount": "2501.74",
         "item": {"kind": "usage", "model": "A100-80G"}}
    ]  # fmt: skip
    assert out["total"] == "2501.74" and out["period"]["start"] == "2026-10-31T16:00:00Z"
    csv = admin.get(
        "/api/v1/billing/invoice", params={"tenant": "algo", "month": "2026-11", "format": "csv"}
    )
    assert csv.headers["content-type"].startswith("text/csv")
    assert csv.text.splitlines()[-1] == "total,,,,2501.74"
    beta = {"tenant": "beta", "month": "2026-11"}
    mem = ok(admin.get("/api/v1/billing/invoice", params={**beta, "mode": "gpu-mem"}))
    assert mem["lines"][0]["unit"] == "GB-hour" and mem["total"] == "34.72"  # 800 GB-h
    # who reads invoices: finance and admins all, a tenant-admin its subtree, members nobody's
    finance = server.client(server.token("fay", "finance"))
    assert ok(finance.get("/api/v1/billing/invoice", params=beta))["total"] == "34.72"
    lead = server.client(server.token("lee", "tenant-admin", "beta"))
    r = lead.get("/api/v1/billing/invoice", params={"tenant": "algo", "month": "2026-11"})
    assert r.status_code == 403
    member = server.client(server.token("mo", "member", "algo"))
    r = member.get("/api/v1/billing/invoice", params={"tenant": "algo", "month": "2026-11"})
    assert r.status_code == 403 and "reading invoices needs role" in r.text
    for params, field in (
        ({"tenant": "algo", "month": "2026-13"}, "month"),
        ({"tenant": "algo", "month": "2026-11", "zone": "Mars/Base"}, "zone"),
        ({"tenant": "algo", "month": "2026-11", "mode": "per-hug"}, "mode"),
    ):
        r = admin.get("/api/v1/billing/invoice", params=params)
        assert r.status_code == 422 and r.json()["field"] == field, r.text
    r = admin.get("/api/v1/billing/invoice", params={"tenant": "nobody", "month": "2026-11"})
    assert r.status_code == 404


def test_prices_change_from_now_on_never_for_the_past(server):
    admin = server.admin()
    seed_cluster(admin, nodes=1, tenants={"algo": 4})
    later = datetime.fromtimestamp(time.time() + 3600, UTC).isoformat()
    out = ok(admin.put("/api/v1/billing/prices/a100-80g",
                       json={"monthly": "2160", "effective_from": later}), 201)  # fmt: skip
    assert (out["model"], out["monthly"], out["hourly"], out["source"]) == (
        "A100-80G",
        "2160.00",
        "3.00",
        "set",
    )
    prices = [p for p in ok(admin.get("/api/v1/billing/prices")) if p["model"] == "A100-80G"]
    assert [(p["monthly"], p["source"]) for p in prices] == [
        ("2500.00", "list"),
        ("2160.00", "set"),
    ]
    past = datetime.fromtimestamp(time.time() - 86400, UTC).isoformat()
    r = admin.put("/api/v1/billing/prices/A100-80G", json={"monthly": "1", "effective_from": past})
    assert r.status_code == 422 and "never alters usage already metered" in r.text
    r = admin.put("/api/v1/billing/prices/A100-80G", json={"monthly": "-5"})
    assert r.status_code == 422 and "is not an amount in CNY" in r.text
    member = server.client(server.token("mo", "member", "algo"))
    assert member.put("/api/v1/billing/prices/T4", json={"monthly": "1"}).status_code == 403
    assert len(ok(member.get("/api/v1/billing/prices"))) >= 8  # everyone reads prices


def test_billing_cli(sqlite_server, tmp_path):
    admin = sqlite_server.admin()
    seed_cluster(admin, nodes=1, tenants={"algo": 4})
    start, _ = month_bounds("2026-11")
    usage_record(sqlite_server, "algo", start, 720)
    env = {"GPUPOOL_SERVER": sqlite_server.url, "GPUPOOL_TOKEN": sqlite_server.admin_token}
    r = gpupool("billing", "invoice", "--tenant", "algo", "--month", "2026-11", "--json", env=env)
    assert json.loads(r.stdout)["total"] == "2500.00"
    r = gpupool("billing", "invoice", "--tenant", "algo", "--month", "2026-11", env=env)
    assert "A100-80G (card-hours)" in r.stdout and "total ¥2500.00 CNY" in r.stdout
    r = gpupool("billing", "invoice", "--tenant", "algo", "--month", "2026-11", "--csv", env=env)
    assert r.stdout.splitlines()[-1] == "total,,,,2500.00"
    # the CLI follows the tenant's mode unless --mode is given
    prices = [f"--task-price={c}=20" for c in ("training", "dev-test", "online-inference")]
    r = gpupool("billing", "settings", "algo", "--mode", "per-task", *prices, env=env)
    assert r.returncode == 0, r.stderr
    r = gpupool("billing", "invoice", "--tenant", "algo", "--month", "2026-11", "--json", env=env)
    assert json.loads(r.stdout)["mode"] == "per-task", r.stdout
    r = gpupool("billing", "invoice", "--tenant", "algo", "--month", "2026-11", "--mode",
                "card-hour", "--json", env=env)  # fmt: skip
    assert json.loads(r.stdout)["total"] == "2500.00"
    r = gpupool("billing", "set-price", "T4", "--monthly", "800", env=env)
    assert r.returncode == 0 and r.stdout.startswith("T4: ¥800.00 a card-month")
    r = gpupool("billing", "prices", "--json", env=env)
    assert ("T4", "800.00") in {(p["model"], p["monthly"]) for p in json.loads(r.stdout)}
    r = gpupool("billing", "report", "usage", "--month", "2026-11", "--json", env=env)
    days = json.loads(r.stdout)
    assert len(days) == 30 and sum(d["card_hours"] for d in days) == 720
    r = gpupool("billing", "report", "top-jobs", "--month", "2026-11", "--csv", env=env)
    assert r.stdout.splitlines() == ["job_id,tenant,card_hours,cost", "1,algo,720.00,2500.00"]
    r = gpupool("billing", "report", "costs", "--month", "2026-11", env=env)
    assert r.returncode == 2 and "report: 'costs' is not one of" in r.stderr
    page = tmp_path / "invoice.html"
    r = gpupool("billing", "invoice", "--tenant", "algo", "--month", "2026-11", "--html",
                str(page), "--lang", "en", "--mode", "card-hour", env=env)  # fmt: skip
    assert r.returncode == 0 and "Invoice" in page.read_text() and "¥2,500.00" in page.read_text()
    r = gpupool("billing", "invoice", "--tenant", "algo", "--month", "11/2026", env=env)
    assert r.returncode == 2 and "month" in r.stderr


def test_a_rental_plan_grants_guaranteed_cards_and_is_billed(server):
    admin = server.admin()
    seed_cluster(admin, nodes=1, tenants={"beta": 4})
    ok(admin.post("/api/v1/tenants", json={"name": "algo"}), 201)
    none = {"resource": "gpu", "nominal": 0, "borrowing_limit": 0}
    ok(admin.put("/api/v1/tenants/algo/quotas/gpu", json=none))
    r = admin.post("/api/v1/jobs", json={"request": "gpu=2", "tenant": "algo", "command": ["x"]})
    assert r.status_code == 422 and "above what algo may ever hold" in r.text
    body = {"tenant": "algo", "model": "A100-80G", "cards": 2, "plan": "monthly"}
    plan = ok(admin.post("/api/v1/billing/plans", json=body), 201)
    assert (plan["total"], plan["active"], plan["plan"]) == ("5000.00", True, "monthly")
    job = ok(admin.post("/api/v1/jobs", json={"request": "gpu=2", "tenant": "algo",
                                               "command": ["x"]}), 201)  # fmt: skip
    server.cycle()
    got = ok(admin.get(f"/api/v1/jobs/{job['id']}"))
    assert got["state"] == "admitted" and got["reason"] == "allocate: within guarantee"
    month = datetime.now(UTC).astimezone().strftime("%Y-%m")
    bill = ok(admin.get("/api/v1/billing/invoice", params={"tenant": "algo", "month": month,
                                                             "zone": "UTC"}))  # fmt: skip
    assert bill["lines"][0]["description"] == f"plan {plan['id']}: 2 x A100-80G, monthly"
    assert bill["draft"] is True and float(bill["total"]) > 0
    finance = server.client(server.token("fay", "finance"))
    assert [p["id"] for p in ok(finance.get("/api/v1/billing/plans"))] == [plan["id"]]
    cancelled = ok(admin.post(f"/api/v1/billing/plans/{plan['id']}/cancel"))
    assert cancelled["active"] is False and cancelled["cancelled_at"] is not None
    assert cancelled["owed"] == "5000.00"  # the month it started, whatever was used
    params = {"tenant": "algo", "month": month, "zone": "UTC"}
    bill = ok(admin.get("/api/v1/billing/invoice", params=params))
    plan_lines = [x for x in bill["lines"] if x["item"]["kind"].startswith("plan")]
    assert sum(float(x["amount"]) for x in plan_lines) == 5000.00
    assert plan_lines[-1]["item"]["kind"] == "plan-cancellation"
    # an annual plan cancelled at once owes its first month without the 15% off
    year = ok(admin.post("/api/v1/billing/plans", json={**body, "plan": "annual"}), 201)
    assert (year["total"], year["payment"]) == ("51000.00", "upfront")
    year = ok(admin.post(f"/api/v1/billing/plans/{year['id']}/cancel"))
    assert year["owed"] == "5000.00"
    r = admin.post(f"/api/v1/billing/plans/{plan['id']}/cancel")
    assert r.status_code == 409 and "already ended" in r.text
    r = admin.post("/api/v1/jobs", json={"request": "gpu=1", "tenant": "algo", "command": ["x"]})
    assert r.status_code == 422  # the guarantee ended with the plan
    past = datetime.fromtimestamp(time.time() - 3600, UTC).isoformat()
    for bad, field in (
        ({**body, "plan": "weekly"}, "plan"),
        ({**body, "tenant": "nobody"}, "tenant"),
        ({**body, "start": past}, "start"),
        ({**body, "model": "L40S"}, "plan"),
    ):
        r = admin.post("/api/v1/billing/plans", json=bad)
        assert r.status_code == 422 and r.json()["field"] == field, r.text
    member = server.client(server.token("mo", "member", "algo"))
    assert member.post("/api/v1/billing/plans", json=body).status_code == 403


def test_plan_cli(sqlite_server):
    admin = sqlite_server.admin()
    seed_cluster(admin, nodes=1, tenants={"algo": 2})
    env = {"GPUPOOL_SERVER": sqlite_server.url, "GPUPOOL_TOKEN": sqlite_server.admin_token}
    r = gpupool("billing", "plan", "create", "--tenant", "algo", "--model", "A100-80G",
                "--cards", "1", "--plan", "annual", "--start", "1h", env=env)  # fmt: skip
    assert r.returncode == 0 and r.stdout.startswith("plan 1: 1 x A100-80G for algo")
    assert r.stdout.strip().endswith("¥25500.00")
    rows = json.loads(gpupool("billing", "plan", "list", "--json", env=env).stdout)
    assert [(p["id"], p["active"]) for p in rows] == [(1, False)]  # starts in an hour
    assert " year " in gpupool("billing", "plan", "list", env=env).stdout
    r = gpupool("billing", "plan", "cancel", "1", env=env)
    assert r.returncode == 0 and r.stdout.startswith("plan 1 cancelled at")
    assert r.stdout.strip().endswith("it owes ¥0.00 of ¥25500.00")  # it had not started
    r = gpupool("billing", "plan", "create", "--tenant", "algo", "--model", "A100-80G",
                "--cards", "0", env=env)  # fmt: skip
    assert r.returncode == 2 and "cards" in r.stderr


def _last_telemetry_ago(server, node: str, seconds: float) -> None:
    """The node's previous heartbeat and telemetry as if sent ``seconds`` ago."""
    with server.ctx.db.write() as s:
        s.get(NodeRow, node).heartbeat_at = time.time() - seconds
        for d in s.execute(select(DeviceRow).where(DeviceRow.node == node)).scalars():
            d.telemetry = {**(d.telemetry or {}), "time": time.time() - seconds}


def test_idle_time_runs_from_the_previous_telemetry_not_the_last_bare_beat(server):
    """A channel's bare beats move ``heartbeat_at`` every few seconds; the idle time a
    telemetry heartbeat adds is the time since the previous telemetry."""
    admin = server.admin()
    seed_cluster(admin, nodes=1, tenants={"algo": 4})
    job = ok(admin.post("/api/v1/jobs", json={"request": "gpu=4", "tenant": "algo",
                                              "command": ["x"]}), 201)  # fmt: skip
    server.cycle()
    started(admin, job)
    agent = server.client(server.token("agent-n0", "agent", node="n0"))
    _last_telemetry_ago(server, "n0", 40)
    with server.ctx.db.write() as s:  # a bare beat 2 s ago
        s.get(NodeRow, "n0").heartbeat_at = time.time() - 2
    telemetry = [{"index": i, "util_pct": 0.0} for i in range(4)]
    ok(agent.post("/api/v1/nodes/n0/heartbeat", json={"devices": telemetry}))
    month = datetime.now(UTC).strftime("%Y-%m")
    idle = ok(admin.get("/api/v1/billing/reports/idle", params={"month": month, "zone": "UTC"}))
    assert abs(idle["items"][0]["idle_card_hours"] - 4 * 40 / 3600) < 0.002


def test_idle_cards_from_heartbeats_and_the_reports(server):
    admin = server.admin()
    seed_cluster(admin, nodes=1, tenants={"algo": 4})
    job = ok(admin.post("/api/v1/jobs", json={"request": "gpu=2", "tenant": "algo",
                                               "command": ["x"]}), 201)  # fmt: skip
    server.cycle()
    started(admin, job)
    held = [d["device"] for n in ok(admin.get(f"/api/v1/jobs/{job['id']}"))["allocation"]["nodes"]
            for d in n["devices"]]  # fmt: skip
    agent = server.client(server.token("agent-n0", "agent", node="n0"))
    _last_telemetry_ago(server, "n0", 30)
    telemetry = [{"index": i, "util_pct": 1.0 if i == held[0] else 90.0} for i in range(4)]
    ok(agent.post("/api/v1/nodes/n0/heartbeat", json={"devices": telemetry}))
    month = datetime.now(UTC).strftime("%Y-%m")
    idle = ok(admin.get("/api/v1/billing/reports/idle", params={"month": month, "zone": "UTC"}))
    [row] = idle["items"]
    assert row["tenant"] == "algo" and abs(row["idle_card_hours"] - 30 / 3600) < 0.001
    # a silent node is not known to have been idle longer than a minute
    _last_telemetry_ago(server, "n0", 3600)
    ok(agent.post("/api/v1/nodes/n0/heartbeat", json={"devices": telemetry}))
    idle = ok(admin.get("/api/v1/billing/reports/idle", params={"month": month, "zone": "UTC"}))
    assert abs(idle["items"][0]["idle_card_hours"] - 90 / 3600) < 0.001
    ok(admin.post(f"/api/v1/jobs/{job['id']}/cancel"))
    usage = ok(admin.get("/api/v1/billing/reports/usage", params={"month": month, "zone": "UTC"}))
    assert [(r["tenant"], r["model"]) for r in usage["items"]] == [("algo", "A100-80G")]
    top = ok(admin.get("/api/v1/billing/reports/top-jobs", params={"month": month}))
    assert top["items"][0]["job_id"] == job["id"]
    member = server.client(server.token("mo", "member", "algo"))
    assert member.get("/api/v1/billing/reports/usage", params={"month": month}).status_code == 403
    # a member reads the cost of its own jobs only
    mine = ok(member.get("/api/v1/billing/reports/top-jobs", params={"month": month}))
    assert mine["items"] == []  # root submitted that job
    own = ok(member.post("/api/v1/jobs", json={"request": "gpu=1", "command": ["x"]}), 201)
    server.cycle()
    started(admin, own)
    ok(member.post(f"/api/v1/jobs/{own['id']}/cancel"))
    mine = ok(member.get("/api/v1/billing/reports/top-jobs", params={"month": month}))
    assert [j["job_id"] for j in mine["items"]] == [own["id"]]
    r = admin.get("/api/v1/billing/reports/costs", params={"month": month})
    assert r.status_code == 422


def test_the_printable_invoice_in_chinese_and_english(sqlite_server):
    import re

    admin = sqlite_server.admin()
    seed_cluster(admin, nodes=1, tenants={"algo": 4})
    start, _ = month_bounds("2026-11")
    usage_record(sqlite_server, "algo", start, 720)
    body = {"tenant": "algo", "model": "A100-80G", "cards": 1, "plan": "monthly"}
    ok(admin.post("/api/v1/billing/plans", json=body), 201)  # from now: not in November
    params = {"tenant": "algo", "month": "2026-11", "format": "html"}
    zh = admin.get("/api/v1/billing/invoice", params={**params, "lang": "zh"})
    assert zh.headers["content-type"].startswith("text/html")
    for label in ("账单", "租户", "2026 年 11 月", "按卡时", "A100-80G 用量", "卡时", "¥2,500.00"):
        assert label in zh.text, label
    text = re.sub(r"<style.*?</style>|<[^>]+>", " ", zh.text, flags=re.S)
    english = set(re.findall(r"[A-Za-z]{3,}", text)) - {"algo", "Asia", "Shanghai", "MIG"}
    assert english == set(), english  # every label translated
    en = admin.get("/api/v1/billing/invoice", params={**params, "lang": "en"})
    for label in ("Invoice", "November 2026", "A100-80G usage", "card-hours", "Total (CNY)"):
        assert label in en.text, label
    r = admin.get("/api/v1/billing/invoice", params={**params, "lang": "fr"})
    assert r.status_code == 422


def test_a_plans_guarantee_is_what_the_scheduler_enforces_during_its_period_only(sqlite_server):
    from gpupool.server.snapshot import tenant_tree

    admin = sqlite_server.admin()
    seed_cluster(admin, nodes=2, tenants={"algo": 1, "beta": 2})
    soon = float(int(time.time()) + 600)  # whole seconds: ISO strings keep them exact
    body = {"tenant": "algo", "model": "A100-80G", "cards": 3, "plan": "hourly", "periods": 2,
            "start": datetime.fromtimestamp(soon, UTC).isoformat()}  # fmt: skip
    plan = ok(admin.post("/api/v1/billing/plans", json=body), 201)
    with sqlite_server.ctx.db.read() as s:

        def guaranteed(at: float) -> float:
            return tenant_tree(s, at).nominal("algo", "gpu") / 100

        assert [guaranteed(t) for t in (soon - 1, soon, soon + 7199, soon + 7200)] == [1, 4, 4, 1]
        assert tenant_tree(s, soon).nominal("beta", "gpu") == 200  # nobody else's changes
    assert plan["end"] == datetime.fromtimestamp(soon + 7200, UTC).isoformat(
        timespec="seconds"
    ).replace("+00:00", "Z")


def test_plans_are_never_overbooked(sqlite_server):
    admin = sqlite_server.admin()
    seed_cluster(admin, nodes=1, tenants={"algo": 1, "beta": 1})  # four A100-80G
    body = {"tenant": "algo", "model": "A100-80G", "cards": 3, "plan": "daily"}
    first = ok(admin.post("/api/v1/billing/plans", json=body), 201)
    r = admin.post("/api/v1/billing/plans", json={**body, "tenant": "beta", "cards": 2})
    assert r.status_code == 409 and r.json()["detail"] == (
        "cards: overbooked: the pool has 4 A100-80G cards and plans already rent 3 of them "
        "over that time"
    )
    later = datetime.fromtimestamp(time.time() + 2 * 86400, UTC).isoformat()
    ok(admin.post("/api/v1/billing/plans", json={**body, "tenant": "beta", "start": later}), 201)
    ok(admin.post(f"/api/v1/billing/plans/{first['id']}/cancel"))
    ok(admin.post("/api/v1/billing/plans", json={**body, "tenant": "beta", "cards": 4}), 201)
    r = admin.post("/api/v1/billing/plans", json={**body, "model": "T4"})
    assert r.status_code == 422 and "no T4 card in the pool" in r.text
    r = admin.post("/api/v1/billing/plans", json={**body, "cards": -1})
    assert r.status_code == 422 and r.json()["field"] == "cards"


def test_per_tenant_billing_modes_showback_and_per_task(sqlite_server):
    admin = sqlite_server.admin()
    seed_cluster(admin, nodes=1, tenants={"algo": 4})
    start, _ = month_bounds("2026-11")
    usage_record(sqlite_server, "algo", start, 720)
    month = {"tenant": "algo", "month": "2026-11"}
    assert ok(admin.get("/api/v1/billing/tenants/algo")) == {
        "tenant": "algo", "mode": "card-hour", "kind": "chargeback", "task_prices": {},
        "discount_pct": 0,
    }  # fmt: skip
    settings = "/api/v1/billing/tenants/algo"
    r = admin.put(settings, json={"mode": "per-task", "task_prices": {"training": "20"}})
    assert r.status_code == 422 and "missing dev-test, online-inference" in r.text
    prices = {"training": "20", "dev-test": "2.5", "online-inference": "50"}
    body = {"mode": "per-task", "kind": "showback", "task_prices": prices}
    out = ok(admin.put(settings, json=body))
    assert out["task_prices"]["dev-test"] == "2.50"
    # two training jobs finished in November
    with sqlite_server.ctx.db.write() as s:
        for i in range(2):
            s.add(JobRow(tenant="algo", request="gpu=1", kind="training",
                         priority_class="training", submitted_by="root", state="succeeded",
                         submit_time=start, queued_at=start, finished_at=start + 100 + i,
                         command=["x"]))  # fmt: skip
    bill = ok(admin.get("/api/v1/billing/invoice", params=month))
    assert (bill["mode"], bill["kind"], bill["total"]) == ("per-task", "showback", "40.00")
    page = admin.get("/api/v1/billing/invoice", params={**month, "format": "html"}).text
    assert "费用报告（内部核算，不收费）" in page and "training 类任务" in page
    # the mode of the settings is the default; a request may still ask for another
    assert (
        ok(admin.get("/api/v1/billing/invoice", params={**month, "mode": "card-hour"}))["total"]
        == "2500.00"
    )
    env = {"GPUPOOL_SERVER": sqlite_server.url, "GPUPOOL_TOKEN": sqlite_server.admin_token}
    r = gpupool("billing", "settings", "algo", "--mode", "gpu-mem", "--kind", "chargeback",
                env=env)  # fmt: skip
    assert r.stdout.startswith("algo: gpu-mem, chargeback; per-task prices: dev-test ¥2.50")
    r = gpupool("billing", "settings", "algo", "--task-price", "oops", env=env)
    assert r.returncode == 2 and "task-price: 'oops' is not CLASS=CNY" in r.stderr


def test_discounts_and_credits_are_lines_of_their_own(sqlite_server):
    admin = sqlite_server.admin()
    seed_cluster(admin, nodes=1, tenants={"algo": 4})
    start, _ = month_bounds("2026-11")
    usage_record(sqlite_server, "algo", start, 720)
    env = {"GPUPOOL_SERVER": sqlite_server.url, "GPUPOOL_TOKEN": sqlite_server.admin_token}
    r = gpupool("billing", "settings", "algo", "--discount", "10", env=env)
    assert "10% off usage" in r.stdout
    r = gpupool("billing", "credit", "algo", "--month", "2026-11", "--amount", "100",
                "--reason", "outage on 11-12", env=env)  # fmt: skip
    assert r.stdout.strip() == "credit 1: ¥100.00 off algo's 2026-11 invoice"
    bill = ok(admin.get("/api/v1/billing/invoice", params={"tenant": "algo", "month": "2026-11"}))
    assert [(line["description"], line["amount"]) for line in bill["lines"]] == [
        ("A100-80G (card-hours)", "2500.00"),
        ("discount 10% on usage", "-250.00"),
        ("credit: outage on 11-12", "-100.00"),
    ]
    assert bill["total"] == "2150.00"
    # a credit larger than what is due takes the invoice to zero, never below
    big = {"tenant": "algo", "month": "2026-11", "amount": "5000", "reason": "goodwill"}
    ok(admin.post("/api/v1/billing/credits", json=big), 201)
    bill = ok(admin.get("/api/v1/billing/invoice", params={"tenant": "algo", "month": "2026-11"}))
    assert bill["total"] == "0.00" and bill["lines"][-1]["amount"] == "-2150.00"
    assert bill["lines"][-1]["item"]["applied"] == "2150.00"
    assert "¥2150.00 applies" in bill["lines"][-1]["description"]
    html = {"tenant": "algo", "month": "2026-11", "format": "html"}
    page = admin.get("/api/v1/billing/invoice", params=html).text
    assert "用量折扣 10%" in page and "抵扣：outage on 11-12" in page and "-¥250.00" in page
    for bad, field in (({"amount": "0"}, "amount"), ({"month": "2026-13"}, "month"),
                       ({"tenant": "nobody"}, "tenant")):  # fmt: skip
        body = {"tenant": "algo", "month": "2026-11", "amount": "5", "reason": "x", **bad}
        r = admin.post("/api/v1/billing/credits", json=body)
        assert r.status_code == 422 and field in r.text, r.text
    member = sqlite_server.client(sqlite_server.token("mo", "member", "algo"))
    body = {"tenant": "algo", "month": "2026-11", "amount": "5", "reason": "x"}
    assert member.post("/api/v1/billing/credits", json=body).status_code == 403

"""One number for a tenant's month, whichever view shows it (issue 47: within a minute the
overview said ¥25.16, the billing page ¥8.38, the month-end draft ¥22.36, `billing invoice`
1.54 card-h and `usage` 4.90). Every view counts usage records plus what running jobs used
up to now; a record crossing the period's edge counts for its part inside."""

import time
from decimal import Decimal

from sqlalchemy import select

from gpupool.billing.invoice import DEFAULT_ZONE, month_bounds
from gpupool.server.db.tables import AllocationRow
from tests.support.cluster import ok, seed_cluster, started, submit


def _card_hours(invoice: dict) -> float:
    return sum(float(x["quantity"]) for x in invoice["lines"] if x["unit"] == "card-hour")


def test_overview_invoice_draft_and_usage_agree_on_a_month_with_a_running_job(sqlite_server):
    admin = sqlite_server.admin()
    seed_cluster(admin, nodes=1, cards=4, tenants={"algo": 4})
    agent = sqlite_server.client(sqlite_server.token("agent-n0", "agent", node="n0"))
    done = submit(admin, "gpu=2", "algo")
    live = submit(admin, "gpu=1", "algo")
    sqlite_server.cycle()
    with sqlite_server.ctx.db.write() as s:  # both started hours ago
        for alloc in s.execute(select(AllocationRow)).scalars():
            alloc.created_at -= 3 * 3600 if alloc.job_id == live["id"] else 2 * 3600
    for job in (done, live):  # their workloads started as they were granted
        started(admin, job)
    sqlite_server.ctx.loop.checkpoint_usage()  # records up to the last hour for both
    finished = ok(admin.get(f"/api/v1/jobs/{done['id']}"))["allocation"]
    for state in ("running", "succeeded"):
        body = {"generation": finished["generation"], "state": state, "exit_code": 0}
        ok(agent.post(f"/api/v1/allocations/{finished['id']}/status", json=body))
    month = time.strftime("%Y-%m", time.gmtime(time.time() + 8 * 3600))  # Asia/Shanghai
    start, _ = month_bounds(month, DEFAULT_ZONE)

    invoice = ok(admin.get("/api/v1/billing/invoice", params={"tenant": "algo", "month": month}))
    overview = ok(admin.get("/api/v1/overview"))["month"]
    drafts = ok(admin.post("/api/v1/billing/invoices/issue", json={"month": month}))
    summary = ok(admin.get("/api/v1/usage/summary", params={"since": start}))["items"]

    draft = next(d for d in drafts if d["tenant"] == "algo")
    assert invoice["draft"] and invoice["as_of"] > start
    card_hours = _card_hours(invoice)
    assert card_hours > 0.5  # both jobs' hours in this month, the live one's up to now
    fen = int(invoice["total_fen"])
    assert abs(overview["cost_fen"] - fen) <= 2, (overview, invoice["total"])
    assert abs(int(Decimal(draft["total"]) * 100) - fen) <= 2, (draft, invoice["total"])
    used = sum(r["compute_pct_seconds"] for r in summary if r["tenant"] == "algo") / 360000
    assert abs(used - card_hours) < 0.01 and abs(overview["card_hours"] - card_hours) < 0.1
    # who used it (issue 47): the same card-hours, by user and job, all within the guarantee
    who = invoice["breakdown"]
    assert abs(float(who["card_hours"]) - card_hours) < 0.001
    assert (
        who["borrowed_card_hours"] == "0.0000" and who["guaranteed_card_hours"] == who["card_hours"]
    )
    assert [(u["user"], u["jobs"]) for u in who["by_user"]] == [("root", 2)]
    assert {j["job"] for j in who["by_job"]} == {done["id"], live["id"]}
    assert abs(sum(float(j["card_hours"]) for j in who["by_job"]) - card_hours) < 0.001


def test_a_period_split_anywhere_adds_up_to_the_whole(sqlite_server):
    """Records crossing the cut count for their part on each side (they counted wholly, or
    not at all, by their end)."""
    admin = sqlite_server.admin()
    seed_cluster(admin, nodes=1, cards=4, tenants={"algo": 4})
    job = submit(admin, "gpu=2", "algo")
    sqlite_server.cycle()
    with sqlite_server.ctx.db.write() as s:
        s.execute(select(AllocationRow)).scalar_one().created_at -= 3 * 3600 + 600
    started(admin, job)
    sqlite_server.ctx.loop.checkpoint_usage()
    ok(admin.post(f"/api/v1/jobs/{job['id']}/cancel"))  # its last record: the last hour's rest

    def card_seconds(**window: float) -> int:
        items = ok(admin.get("/api/v1/usage/summary", params=window))["items"]
        return sum(r["compute_pct_seconds"] for r in items if r["tenant"] == "algo") // 100

    now = time.time()
    whole = card_seconds(since=now - 5 * 3600, until=now + 60)
    assert abs(whole - 2 * (3 * 3600 + 600)) <= 4
    for cut in (now - 5000, now - 3 * 3600, now - 1234.5):
        before, after = card_seconds(since=now - 5 * 3600, until=cut), card_seconds(since=cut)
        assert abs(before + after - whole) <= 2, (cut, before, after, whole)
        assert abs(after - 2 * (now - cut)) <= 4  # two cards from the cut until it ended

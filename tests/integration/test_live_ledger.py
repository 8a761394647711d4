"""Every billing view reads one live ledger (issue 59, finding 3): the usage records plus what
running jobs used since their last checkpoint, up to the moment the view counted to, which it
says (``as_of``). The cost reports and the billing page's card-hours chart counted closed
records only, so the largest user — a job still running — was absent from them while the
invoice and ``usage`` showed it."""

import math
import time

from sqlalchemy import select

from gpupool.billing.invoice import DEFAULT_ZONE, month_bounds
from gpupool.server.db.tables import AllocationRow
from tests.support.cluster import ok, seed_cluster, started, submit

HOUR = 3600


def _this_month() -> str:
    return time.strftime("%Y-%m", time.gmtime(time.time() + 8 * HOUR))  # Asia/Shanghai


def test_a_running_job_counts_the_same_in_every_billing_view(sqlite_server):
    admin = sqlite_server.admin()
    seed_cluster(admin, nodes=1, cards=4, tenants={"big": 3, "small": 1})
    agent = sqlite_server.client(sqlite_server.token("agent-n0", "agent", node="n0"))
    month = _this_month()
    start, _ = month_bounds(month, DEFAULT_ZONE)
    live = submit(admin, "gpu=3", "big")  # the largest user, still running, never checkpointed
    done = submit(admin, "gpu=1", "small")  # ended: its usage is a closed record
    sqlite_server.cycle()
    began = max(time.time() - 2 * HOUR, start + 1) + 0.25  # a fraction of a second, as agents
    with sqlite_server.ctx.db.write() as s:
        for alloc in s.execute(select(AllocationRow)).scalars():
            alloc.created_at = began
    started(admin, live, at=began)
    started(admin, done, at=began)
    finished = ok(admin.get(f"/api/v1/jobs/{done['id']}"))["allocation"]
    body = {"generation": finished["generation"], "state": "succeeded", "exit_code": 0}
    ok(agent.post(f"/api/v1/allocations/{finished['id']}/status", json=body))
    params = {"month": month}

    def live_hours(as_of: float) -> float:
        """What the running job used up to ``as_of``: three cards, whole seconds."""
        return 3 * (math.floor(as_of) - math.floor(began)) / HOUR

    invoice = ok(admin.get("/api/v1/billing/invoice", params={**params, "tenant": "big"}))
    quantity = sum(float(x["quantity"]) for x in invoice["lines"] if x["unit"] == "card-hour")
    assert abs(quantity - live_hours(invoice["as_of"])) < 1e-4

    summary = ok(admin.get("/api/v1/usage/summary", params={"since": start}))
    big = sum(r["compute_pct_seconds"] for r in summary["items"] if r["tenant"] == "big")
    assert abs(big / 100 / HOUR - live_hours(summary["as_of"])) < 1e-4

    usage = ok(admin.get("/api/v1/billing/reports/usage", params=params))
    days = [r for r in usage["items"] if r["tenant"] == "big"]
    assert days, usage  # the billing page's card-hours chart draws this report
    assert abs(sum(r["card_hours"] for r in days) - live_hours(usage["as_of"])) < 1e-4 * len(days)

    top = ok(admin.get("/api/v1/billing/reports/top-jobs", params=params))
    assert top["items"][0]["job_id"] == live["id"], top  # the largest job, though running
    assert abs(top["items"][0]["card_hours"] - live_hours(top["as_of"])) < 1e-4

    overview = ok(admin.get("/api/v1/overview"))
    small = 1 * (math.floor(finished_end(admin, done)) - math.floor(began)) / HOUR
    expected = live_hours(overview["month"]["as_of"]) + small
    assert abs(overview["month"]["card_hours"] - expected) < 0.05 + 1e-9
    # the month's cost is priced from the same moment as its card-hours
    assert overview["month"]["cost_as_of"] == overview["month"]["as_of"]


def finished_end(admin, job: dict) -> float:
    return ok(admin.get(f"/api/v1/jobs/{job['id']}"))["finished_at"]


def test_reports_say_when_they_counted_to_and_leave_a_job_not_started_out(sqlite_server):
    """A report of the open month counts to now and says so; a granted job whose workload
    has not started costs nothing there either (docs/billing.md, "When the clock runs")."""
    admin = sqlite_server.admin()
    seed_cluster(admin, nodes=1, cards=4, tenants={"big": 4})
    submit(admin, "gpu=2", "big")
    sqlite_server.cycle()
    before = time.time()
    for report in ("usage", "top-jobs", "idle"):
        out = ok(admin.get(f"/api/v1/billing/reports/{report}", params={"month": _this_month()}))
        assert out["items"] == [], (report, out)
        assert before <= out["as_of"] <= time.time() and out["draft"] is True
    old = ok(admin.get("/api/v1/billing/reports/usage", params={"month": "2020-01"}))
    assert old["draft"] is False and old["as_of"] >= before

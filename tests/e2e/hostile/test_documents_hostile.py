"""Server-rendered documents are safe to open: a hostile string in an invoice (a credit's
reason) or a report (a team's name) is shown as text, never run; the invoice is served with a
Content-Security-Policy that runs no script at all. The reproduction: a finance user of one
team wrote a credit whose reason was a script, and an admin opening that invoice from the
billing page ran it (it created a new admin). Finance of one team cannot credit any team."""

import pytest

from gpupool.billing.invoice import month_bounds
from gpupool.sim.report import scenario_report_html
from gpupool.sim.team_replay import MODES
from tests.support.browser import needs_chromium
from tests.support.builders import usage_record
from tests.support.cluster import ok, seed_cluster

HOSTILE = "<script>document.title='pwned'</script><img src=x onerror=\"document.title='pwned'\">"


def _invoice_with_hostile_credit(srv) -> dict:
    admin = srv.admin()
    seed_cluster(admin, nodes=1, tenants={"algo": 4})
    start, _ = month_bounds("2026-11")
    usage_record(srv, "algo", start, 10)
    body = {"tenant": "algo", "month": "2026-11", "amount": "1", "reason": HOSTILE}
    ok(admin.post("/api/v1/billing/credits", json=body), 201)
    return {"tenant": "algo", "month": "2026-11", "format": "html"}


def test_a_hostile_credit_reason_is_escaped_and_the_invoice_runs_no_script(sqlite_server):
    params = _invoice_with_hostile_credit(sqlite_server)
    r = sqlite_server.admin().get("/api/v1/billing/invoice", params=params)
    assert r.status_code == 200
    assert "<script>" not in r.text and "<img" not in r.text
    assert "&lt;script&gt;document.title=" in r.text
    csp = r.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src" not in csp  # none at all
    assert "frame-ancestors 'none'" in csp and r.headers["x-content-type-options"] == "nosniff"


def test_finance_of_one_team_cannot_credit_any_team(sqlite_server):
    admin = sqlite_server.admin()
    seed_cluster(admin, nodes=1, tenants={"algo": 4, "infer": 2})
    scoped = sqlite_server.client(sqlite_server.token("fin-a", "finance", "algo"))
    for tenant in ("algo", "infer"):
        body = {"tenant": tenant, "month": "2026-11", "amount": "5", "reason": "x"}
        r = scoped.post("/api/v1/billing/credits", json=body)
        assert r.status_code == 403
        assert "company-wide finance; fin-a is finance of tenant algo" in r.json()["detail"]
    company = sqlite_server.client(sqlite_server.token("fay", "finance"))
    body = {"tenant": "algo", "month": "2026-11", "amount": "5", "reason": "x"}
    ok(company.post("/api/v1/billing/credits", json=body), 201)


@needs_chromium
def test_an_admin_opening_the_hostile_invoice_runs_nothing(sqlite_server, browser):
    params = _invoice_with_hostile_credit(sqlite_server)
    context = browser.new_context(
        extra_http_headers={"Authorization": f"Bearer {sqlite_server.admin_token}"}
    )
    page = context.new_page()
    query = "&".join(f"{k}={v}" for k, v in params.items())
    page.goto(f"{sqlite_server.url}/api/v1/billing/invoice?{query}")
    page.wait_for_load_state("load")
    assert page.title() != "pwned"
    assert HOSTILE in page.locator("body").inner_text()  # shown as the text it is
    context.close()


@pytest.mark.parametrize("name", [HOSTILE, "a&b\"'<>"])
def test_report_strings_are_escaped(name):
    html = scenario_report_html(_scenario_result(name))
    assert "<script>document" not in html and "<img src=x" not in html
    assert "&lt;script&gt;" in html or "a&amp;b&#34;&#39;&lt;&gt;" in html


def _scenario_result(team: str) -> dict:
    team_stats = {"jobs": 1, "started": 1, "finished": 1, "queue_delay_p50_s": 0.0,
                  "queue_delay_p95_s": 0.0}  # fmt: skip
    mode = {"cards_in_use": [(0.0, 1), (1.0, 2)], "tenants": {team: team_stats},
            "gpu_utilization": 0.5, "queue_delay_p95_s": 0.0, "preemptions": 0}  # fmt: skip
    return {"cards": 4, "jobs": 1, "scenario": team, **{m: mode for m in MODES}}

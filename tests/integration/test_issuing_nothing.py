"""Issuing a month with nothing in it (issue 59, finding 3): ``billing issue --month`` for a
month before the server existed numbered ¥0.00 final invoices — a department's, made for its
list of sub-teams though none of them used anything. It makes none, and says so."""

from tests.support.cli import gpupool
from tests.support.cluster import ok, seed_cluster


def test_a_month_before_any_usage_issues_nothing_and_says_so(sqlite_server):
    admin = sqlite_server.admin()
    seed_cluster(admin, nodes=1, cards=4, tenants={})
    ok(admin.post("/api/v1/tenants", json={"name": "company"}), 201)
    for team in ("algorithm", "inference"):
        ok(admin.post("/api/v1/tenants", json={"name": team, "parent": "company"}), 201)
    for final in (False, True):
        body = {"month": "2020-01", "final": final}
        assert ok(admin.post("/api/v1/billing/invoices/issue", json=body)) == []
    assert ok(admin.get("/api/v1/billing/invoices", params={"month": "2020-01"})) == []
    env = {"GPUPOOL_SERVER": sqlite_server.url, "GPUPOOL_TOKEN": sqlite_server.admin_token}
    r = gpupool("billing", "issue", "--month", "2020-01", "--final", env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == (
        "nothing to bill for 2020-01 (Asia/Shanghai): no usage, rental plan or credit in it; "
        "no invoice made"
    )

"""The dashboard's server side on a real loopback server: logging in turns a token into an
HttpOnly, SameSite=Strict session cookie; changes through the cookie need the page's CSRF
header and our Origin; pages need a session and the right role; the dashboard's reads
(overview, devices, history, job cost) count correctly and show one tenant nothing of
another's work or money."""

import json
import re
import time

import httpx
import pytest

from gpupool.server.alerts.rules import KINDS
from gpupool.server.session import CSRF_HEADER, SESSION_COOKIE, csrf_token
from gpupool.server.web.pages import HEADERS
from tests.support.cluster import node_body, ok, seed_cluster, started, submit
from tests.support.paths import ROOT

WEB = ROOT / "src" / "gpupool" / "server" / "web"


def _login(srv, token: str, **headers: str) -> tuple[httpx.Client, str]:
    """A cookie-carrying client logged in with ``token``; returns it and its CSRF token."""
    c = httpx.Client(base_url=srv.url, timeout=30, follow_redirects=False)
    r = c.post("/ui/session", json={"token": token}, headers=headers)
    assert r.status_code == 200, r.text
    session = c.cookies[SESSION_COOKIE]
    return c, csrf_token(session)


def test_login_sets_a_strict_httponly_cookie_of_a_new_session_token(sqlite_server):
    srv = sqlite_server
    c = httpx.Client(base_url=srv.url, timeout=30)
    r = c.post("/ui/session", json={"token": srv.admin_token})
    assert r.status_code == 200
    cookie = r.headers["set-cookie"]
    assert f"{SESSION_COOKIE}=gps_" in cookie
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
    assert "Secure" not in cookie  # plain HTTP on loopback; set behind an HTTPS proxy
    session = c.cookies[SESSION_COOKIE]
    assert session != srv.admin_token  # the typed token never sits in the browser
    # the session reads the API like the token would
    assert ok(c.get("/api/v1/status"))["user"] == "root"
    https = {"X-Forwarded-Proto": "https"}
    r = c.post("/ui/session", json={"token": srv.admin_token}, headers=https)
    assert "Secure" not in r.headers["set-cookie"]  # anyone may send that header
    srv.ctx.settings.trusted_proxies = ["127.0.0.1"]  # from a proxy the operator named
    try:
        r = c.post("/ui/session", json={"token": srv.admin_token}, headers=https)
        assert "Secure" in r.headers["set-cookie"]
    finally:
        srv.ctx.settings.trusted_proxies = []


def test_bad_logins_name_the_problem_and_machines_cannot_log_in(sqlite_server):
    srv = sqlite_server
    c = srv.client()
    r = c.post("/ui/session", json={"token": "gp_nonsense"})
    assert r.status_code == 401 and r.json()["field"] == "token"
    assert c.post("/ui/session", json={}).status_code == 422
    assert c.post("/ui/session", content=b"{not json").status_code == 422
    agent = srv.token("agent-1", "agent", node="n1")
    r = c.post("/ui/session", json={"token": agent})
    assert r.status_code == 403 and "cannot log in" in r.json()["detail"]
    r = c.post(
        "/ui/session", json={"token": srv.admin_token}, headers={"Origin": "http://evil.test"}
    )
    assert r.status_code == 403


def test_changes_through_the_cookie_need_the_csrf_header_and_our_origin(sqlite_server):
    srv = sqlite_server
    seed_cluster(srv.admin(), nodes=1)
    c, csrf = _login(srv, srv.admin_token)
    body = {"name": "team-x"}
    r = c.post("/api/v1/tenants", json=body)
    assert r.status_code == 403 and CSRF_HEADER in r.json()["detail"]
    r = c.post("/api/v1/tenants", json=body, headers={CSRF_HEADER: "0" * 40})
    assert r.status_code == 403
    origin = {CSRF_HEADER: csrf, "Origin": "http://evil.test"}
    assert c.post("/api/v1/tenants", json=body, headers=origin).status_code == 403
    assert srv.admin().get("/api/v1/tenants/team-x").status_code == 404  # nothing happened
    r = c.post("/api/v1/tenants", json=body, headers={CSRF_HEADER: csrf, "Origin": srv.url})
    assert r.status_code == 201
    # a bearer token needs no CSRF header (no browser sends it by itself)
    assert srv.admin().post("/api/v1/tenants", json={"name": "team-y"}).status_code == 201


def test_logout_revokes_the_session_and_sessions_are_not_api_tokens(sqlite_server):
    srv = sqlite_server
    c, csrf = _login(srv, srv.admin_token)
    session = c.cookies[SESSION_COOKIE]
    tokens = ok(srv.admin().get("/api/v1/tokens"))
    assert any(t["prefix"].startswith("gps_") for t in tokens)
    assert c.post("/ui/logout").status_code == 403  # no CSRF header: a forged logout
    r = c.post("/ui/logout", headers={CSRF_HEADER: csrf})
    assert r.status_code == 200 and SESSION_COOKIE in r.headers["set-cookie"]
    stale = httpx.Client(base_url=srv.url, cookies={SESSION_COOKIE: session}, timeout=30)
    assert stale.get("/api/v1/status").status_code == 401
    audit = ok(srv.admin().get("/api/v1/audit", params={"action": "/ui/"}))["items"]
    assert {a["action"] for a in audit} == {"POST /ui/session", "POST /ui/logout"}


def test_sessions_per_user_are_capped_by_ending_the_oldest(sqlite_server):
    srv = sqlite_server
    first, _ = _login(srv, srv.admin_token)
    for _ in range(20):
        _login(srv, srv.admin_token)
    assert first.get("/api/v1/status").status_code == 401
    # sessions do not count towards the cap on API tokens
    assert srv.admin().post("/api/v1/users/root/tokens", json={}).status_code == 201


def test_pages_need_a_session_and_billing_and_admin_need_their_roles(sqlite_server):
    srv = sqlite_server
    seed_cluster(srv.admin(), nodes=1)
    anon = httpx.Client(base_url=srv.url, timeout=30)
    r = anon.get("/nodes", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/login?next=/nodes"
    login = anon.get("/login")
    assert login.status_code == 200 and 'id="gp-token"' in login.text
    member, _ = _login(srv, srv.token("ann", "member", "algo"))
    for path in ("/", "/nodes", "/jobs", "/jobs/1", "/teams"):
        r = member.get(path)
        assert r.status_code == 200, path
        for name, value in HEADERS.items():
            assert r.headers[name] == value
    for path in ("/billing", "/admin"):
        r = member.get(path)
        assert r.status_code == 403 and '"page": "forbidden"' in r.text
    nav = re.findall(r'<a href="(/[a-z]*)"', member.get("/").text)
    assert "/billing" not in nav and "/admin" not in nav
    finance, _ = _login(srv, srv.token("fay", "finance"))
    assert finance.get("/billing").status_code == 200
    assert finance.get("/admin").status_code == 403
    assert member.get("/jobs/x").status_code in (200, 404, 422)  # never a 500


def test_overview_counts_cards_by_state_and_mode(sqlite_server):
    srv = sqlite_server
    admin = srv.admin()
    seed_cluster(admin, nodes=2, cards=4)  # n0, n1
    ok(admin.post("/api/v1/nodes", json=node_body("n2", model="T4", cards=2)))
    ok(admin.post("/api/v1/nodes/n1/drain", json={"reason": "maintenance"}))
    job = submit(admin, "gpu=A100-80G:3", tenant="algo")
    srv.cycle()
    o = ok(admin.get("/api/v1/overview"))
    rows = {r["model"]: r for r in o["models"]}
    assert rows["A100-80G"] == {
        "model": "A100-80G",
        "total": 8,
        "allocated": 3,
        "free": 1,
        "unavailable": 4,
        "whole": 8,
        "mig": 0,
        "share": 0,
    }
    assert rows["T4"]["free"] == 2
    assert o["utilisation"]["cards"] == 10 and o["utilisation"]["allocated"] == 3
    assert o["utilisation"]["allocated_pct"] == 30.0
    assert o["queue"]["running"] == 1 and o["queue"]["pending"] == 0
    assert "cost_fen" in o["month"]
    # the same numbers as the node and allocation listings the CLI reads
    nodes = ok(admin.get("/api/v1/nodes", params={"limit": 1000}))["items"]
    assert sum(len(n["devices"]) for n in nodes) == 10
    allocs = ok(admin.get("/api/v1/allocations", params={"state": "active"}))["items"]
    held = {(n["node"], d["device"]) for a in allocs for n in a["nodes"] for d in n["devices"]}
    assert len(held) == 3
    cost = ok(admin.get(f"/api/v1/jobs/{job['id']}/cost"))
    assert cost["card_hours"] >= 0 and cost["cost_fen"] is not None


def test_a_member_sees_the_pool_but_nothing_of_another_teams_work_or_money(sqlite_server):
    srv = sqlite_server
    admin = srv.admin()
    seed_cluster(admin, nodes=1, cards=4)
    submit(admin, "gpu=1", tenant="infer", name="secret-infer-job")
    mine = submit(admin, "gpu=1", tenant="algo", name="algo-job")
    submit(admin, "gpu=4", tenant="infer")  # pending: 2 of the 4 cards are held
    srv.cycle()
    member = srv.client(srv.token("ann", "member", "algo"))
    tiles = ok(member.get("/api/v1/devices"))
    held = [h for t in tiles for h in t["holders"]]
    assert len(held) == 2  # occupancy is shared knowledge ...
    assert {h["tenant"] for h in held} == {"algo", None}  # ... whose work it is, is not
    assert {h["job_id"] for h in held} == {mine["id"], None}
    o = ok(member.get("/api/v1/overview"))
    assert o["utilisation"]["allocated"] == 2
    assert o["queue"] == {"pending": 0, "running": 1, "oldest_wait_s": None}  # algo's only
    assert ok(admin.get("/api/v1/overview"))["queue"]["pending"] == 1
    assert "cost_fen" not in o["month"]  # members do not read invoices
    assert "secret-infer-job" not in member.get("/api/v1/devices").text
    other = ok(admin.get("/api/v1/jobs", params={"tenant": "infer"}))["items"][0]["id"]
    assert member.get(f"/api/v1/jobs/{other}/cost").status_code == 404
    # the same through a browser session
    c, _ = _login(srv, srv.token("bob", "member", "algo"))
    assert ok(c.get("/api/v1/overview"))["queue"]["pending"] == 0


def test_filters_and_history_buckets(sqlite_server):
    srv = sqlite_server
    admin = srv.admin()
    seed_cluster(admin, nodes=1, cards=4)
    ok(admin.post("/api/v1/nodes", json=node_body("t0", model="T4", cards=2)))
    submit(admin, "gpu=A100-80G:2", tenant="algo")
    srv.cycle()
    assert len(ok(admin.get("/api/v1/devices", params={"model": "T4"}))) == 2
    assert len(ok(admin.get("/api/v1/devices", params={"state": "allocated"}))) == 2
    assert admin.get("/api/v1/devices", params={"state": "bogus"}).status_code == 422
    assert admin.get("/api/v1/overview/history", params={"window": "1y"}).status_code == 422
    now = time.time()
    for at in (now - 3 * 3600, now - 60):
        srv.ctx.loop.sample_pool(at)
    h = ok(admin.get("/api/v1/overview/history", params={"window": "24h"}))
    filled = [p for p in h["points"] if p["allocated_pct"] is not None]
    assert len(h["points"]) == 96 and len(filled) == 2
    assert filled[-1]["allocated_pct"] == pytest.approx(100 * 2 / 6, abs=0.1)
    week = ok(admin.get("/api/v1/overview/history", params={"window": "7d"}))
    assert len(week["points"]) == 168
    rules = {r["kind"]: r for r in ok(admin.get("/api/v1/alerts/rules"))}
    assert rules.keys() == set(KINDS)
    assert rules["device-hot"]["limit"] == srv.ctx.settings.alert_temp_c


def test_every_label_exists_in_both_languages():
    en = json.loads((WEB / "messages" / "en.json").read_text(encoding="utf-8"))
    zh = json.loads((WEB / "messages" / "zh.json").read_text(encoding="utf-8"))
    assert en.keys() == zh.keys()
    untranslated = {k for k in en if en[k] == zh[k] and re.search("[a-z]{3}", en[k])}
    assert untranslated == set()
    used: set[str] = set()
    for path in [*WEB.glob("static/**/*.js"), *WEB.glob("templates/*.html")]:
        text = path.read_text(encoding="utf-8")
        used |= set(re.findall(r"""t\(\s*['"]([a-z_]+\.[a-z0-9_-]+)['"]""", text))
        used |= set(
            re.findall(r"""(?:label|panel\(|kpi\()\s*:?\s*'([a-z_]+\.[a-z0-9_-]+)'""", text)
        )
    used = {k for k in used if not k.endswith("_")}  # prefixes completed at run time
    assert used and used - en.keys() == set()


def test_boot_data_cannot_close_its_script_element():
    from gpupool.server.web.pages import _script_json

    text = _script_json({"name": "</script><script>alert(1)</script><!--"})
    assert "<" not in text and json.loads(text)["name"].startswith("</script>")


def test_the_months_cost_says_what_it_sums(sqlite_server):
    """The overview's cost is each team's invoice in its own mode, running jobs included;
    the card-hours beside it come with their price at list prices, so a per-task team's
    bill and the card-hours never pretend to multiply."""
    srv = sqlite_server
    admin = srv.admin()
    seed_cluster(admin, nodes=1, cards=4, tenants={"algo": 2, "infer": 2})
    prices = {"training": "20", "dev-test": "2.5", "online-inference": "50"}
    body = {"mode": "per-task", "kind": "chargeback", "task_prices": prices}
    ok(admin.put("/api/v1/billing/tenants/infer", json=body))
    now = time.time()
    jobs = [submit(admin, "gpu=2", tenant="algo"), submit(admin, "gpu=1", tenant="infer")]
    srv.cycle(now - 1800)  # running for half an hour, no usage record yet
    for job in jobs:
        started(admin, job)
    month = ok(admin.get("/api/v1/overview"))["month"]
    assert 1.4 < month["card_hours"] <= 1.6  # 3 cards x 0.5 h, live
    assert month["cost_by_mode"]["per-task"] == "0.00"  # no finished task
    card = float(month["cost_by_mode"]["card-hour"])
    assert abs(card - 2 * 0.5 * 2500 / 720) < 0.02  # algo's two cards, running, in the cost
    assert month["cost_fen"] == round(card * 100)
    assert abs(month["list_cost_fen"] - 3 * 0.5 * 250000 / 720) <= 2  # all card-hours, list

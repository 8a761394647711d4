"""Attacks on a notebook's proxy (docs/interactive.md, "Notebooks"; docs/security.md), with a
real server, agent and app: a path that climbs out of the notebook, another tenant's job id,
an oversized body, the app's cookies and origin-wide headers, a login link replayed (after
use, after expiry, on another job), a cookie on another notebook or outliving its token, a
cookie-authenticated WebSocket from another origin, and more requests at once than a
notebook takes."""

import http.client
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

import httpx
import pytest
from sqlalchemy import update
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from gpupool.agent import processes as proc
from gpupool.model import notebook
from gpupool.server.db.tables import NotebookPassRow
from gpupool.server.routes.notebook import MAX_APP_STREAMS, MAX_REQUEST_BODY
from tests.support.agents import agent_thread, make_agent, wait_for_cards, workload_groups
from tests.support.cluster import ok
from tests.support.live import live_server
from tests.support.notebooks import running_notebook
from tests.support.sessions import running_session


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    """Tenants alpha and beta, each with a notebook running the stand-in app on node n1."""
    from gpupool.server.settings import Settings

    tmp = tmp_path_factory.mktemp("notebooks")
    settings = Settings(data_dir=tmp / "data", log_json=False, cycle_interval_s=0.2)
    try:
        with live_server(settings, run_scheduler=True) as srv:
            admin = srv.admin()
            for name in ("alpha", "beta"):
                ok(admin.post("/api/v1/tenants", json={"name": name}), 201)
            agent = make_agent(srv.url, srv.token("agent-n1", "agent", node="n1"), "n1",
                               tmp / "agent")  # fmt: skip
            with agent_thread(agent):
                wait_for_cards(admin)
                srv.ann = srv.token("ann", "member", "alpha")
                srv.bea = srv.token("bea", "member", "beta")
                srv.a = running_notebook(srv.client(srv.ann), "alpha", "gpu=1,mem=1GiB")["id"]
                srv.b = running_notebook(srv.client(srv.bea), "beta", "gpu=1,mem=1GiB")["id"]
                yield srv
    finally:  # agents leave workloads running when they stop
        for pgid in workload_groups(tmp):
            proc.signal_group(pgid, proc.KILL)


def _raw(srv, method: str, path: str, token: str | None = None, **headers: str):
    """A request with its path exactly as written (no client tidies its dots)."""
    host = urlsplit(srv.url)
    conn = http.client.HTTPConnection(host.hostname, host.port, timeout=30)
    if token:
        headers["Authorization"] = f"Bearer {token}"
    conn.putrequest(method, path, skip_accept_encoding=True)
    for name, value in headers.items():
        conn.putheader(name, value)
    conn.endheaders()
    resp = conn.getresponse()
    body = resp.read().decode(errors="replace")
    conn.close()
    return resp.status, body


def _link(srv, token: str, job_id: int) -> str:
    made = ok(srv.client(token).post(f"/api/v1/jobs/{job_id}/notebook-link"))
    return srv.url + made["login_path"]


def _login(srv, link: str) -> httpx.Client | int:
    """A browser-like client logged in through ``link`` (or the status it was refused)."""
    browser = httpx.Client(base_url=srv.url, timeout=30)
    r = browser.get(link)
    if r.status_code != 303:
        browser.close()
        return r.status_code
    return browser


def test_a_path_that_climbs_out_of_the_notebook_is_refused(two):
    srv = two
    a, b = notebook.base_path(srv.a), notebook.base_path(srv.b)
    for path in (f"{a}../../{srv.b}/notebook/where", f"{a}%2e%2e/%2e%2e/{srv.b}/notebook/",
                 f"{a}%252e%252e/x", f"{a}..%5c..%5c{srv.b}/notebook/"):  # fmt: skip
        status, body = _raw(srv, "GET", path, srv.ann)
        assert status == 400 and '"job"' not in body, (path, status, body)
    status, _ = _raw(srv, "GET", f"{a}where", srv.ann)
    assert status == 200
    status, body = _raw(srv, "GET", f"{b}where", srv.ann)  # another tenant's job id
    assert status == 403 and "uid" not in body, body
    status, nothing = _raw(srv, "GET", notebook.base_path(10_000), srv.ann)
    assert status == 403 and nothing.replace("10000", str(srv.b)) == body  # alike


def test_another_tenant_makes_no_link_and_a_shell_job_is_no_notebook(two):
    srv = two
    assert srv.client(srv.bea).post(f"/api/v1/jobs/{srv.a}/notebook-link").status_code == 403
    viewer = srv.token("vic", "viewer", "alpha")
    assert srv.client(viewer).post(f"/api/v1/jobs/{srv.a}/notebook-link").status_code == 403
    agent = srv.token("agent-n1", "agent", node="n1")
    assert srv.client(agent).get(notebook.base_path(srv.a)).status_code == 403
    shell = running_session(srv.admin(), "alpha", "cpu=1,mem=256MiB")
    r = srv.client(srv.ann).get(notebook.base_path(shell["id"]))
    assert r.status_code == 409 and "not an interactive session" in r.text, r.text
    ok(srv.admin().post(f"/api/v1/jobs/{shell['id']}/cancel"))


def test_an_oversized_body_is_refused_before_it_reaches_the_app(two):
    srv = two
    path = notebook.base_path(srv.a) + "upload"
    status, body = _raw(srv, "POST", path, srv.ann, **{"Content-Length": str(MAX_REQUEST_BODY + 1)})
    assert status == 413, body

    def chunks():
        for _ in range(MAX_REQUEST_BODY // 65536 + 2):
            yield b"x" * 65536

    r = httpx.post(srv.url + path, content=chunks(), timeout=60,
                   headers={"Authorization": f"Bearer {srv.ann}"})  # fmt: skip
    assert r.status_code == 413, r.text
    r = httpx.post(srv.url + path, content=b"y" * 1000, timeout=60,
                   headers={"Authorization": f"Bearer {srv.ann}"})  # fmt: skip
    assert r.status_code == 200 and r.json()["size"] == 1000


def test_the_apps_cookies_stay_in_its_path_and_origin_wide_headers_are_dropped(two):
    srv = two
    base = notebook.base_path(srv.a)
    r = srv.client(srv.ann).get(base + "cookies")
    assert r.status_code == 200
    cookies = r.headers.get_list("set-cookie")
    names = {c.split("=", 1)[0] for c in cookies}
    assert names == {"app", "wide", "deep"}, cookies  # the server's names and __Host- refused
    for cookie in cookies:
        attributes = [a.strip().lower() for a in cookie.split(";")[1:]]
        paths = [a.split("=", 1)[1] for a in attributes if a.startswith("path=")]
        assert len(paths) == 1 and paths[0].startswith(base.lower()), cookie
        assert not any(a.startswith("domain") for a in attributes), cookie
    assert any(f"Path={base}sub/" in c for c in cookies), cookies  # a deeper path is kept
    for header in ("service-worker-allowed", "strict-transport-security", "clear-site-data"):
        assert header not in r.headers, header
    # what the caller sent the server is not the app's: its token, the dashboard's cookie
    # and CSRF header
    cookie = "gpupool_session=s; gpupool_notebook=n; x=1"
    sent = srv.client(srv.ann).get(base + "where", headers={"X-CSRF-Token": "t", "Cookie": cookie})
    seen = sent.json()["headers"]
    assert "authorization" not in seen and "x-csrf-token" not in seen, seen
    assert seen.get("cookie") == "x=1", seen


def test_a_login_link_works_once_for_its_own_job_and_dies_with_its_token(two):
    srv = two
    link = _link(srv, srv.ann, srv.a)
    browser = _login(srv, link)
    assert isinstance(browser, httpx.Client)
    assert browser.get(notebook.base_path(srv.a) + "where").status_code == 200
    assert _login(srv, link) == 403  # replayed after its use (by anyone)
    # its cookie opens only its own notebook: sent to another job's path (as a forger
    # would), it is refused
    secret = next(c.value for c in browser.cookies.jar if c.name == "gpupool_notebook")
    forged = httpx.get(srv.url + notebook.base_path(srv.b) + "where",
                       cookies={"gpupool_notebook": secret}, timeout=30)  # fmt: skip
    assert forged.status_code == 401 and "uid" not in forged.text
    # a link used on another job's login path is refused (and used up)
    other = _link(srv, srv.ann, srv.a).replace(f"/jobs/{srv.a}/", f"/jobs/{srv.b}/")
    assert _login(srv, other) == 403
    # expired before its use
    late = _link(srv, srv.ann, srv.a)
    with srv.ctx.db.write() as s:
        s.execute(update(NotebookPassRow).where(NotebookPassRow.kind == "link")
                  .values(expires_at=time.time() - 1))  # fmt: skip
    assert _login(srv, late) == 403
    # a cookie lives no longer than the token that made it
    short = srv.token("amy", "member", "alpha")
    amy = _login(srv, _link(srv, short, srv.a))
    assert isinstance(amy, httpx.Client)
    assert amy.get(notebook.base_path(srv.a)).status_code == 200
    tokens = ok(srv.client(short).get("/api/v1/tokens"))
    for t in tokens["items"] if isinstance(tokens, dict) else tokens:
        ok(srv.client(short).delete(f"/api/v1/tokens/{t['id']}"), 204)
    assert amy.get(notebook.base_path(srv.a)).status_code == 401
    browser.close()
    amy.close()


def test_a_cookie_opens_websockets_from_this_servers_own_pages_only(two):
    srv = two
    browser = _login(srv, _link(srv, srv.ann, srv.a))
    assert isinstance(browser, httpx.Client)
    secret = next(c.value for c in browser.cookies.jar if c.name == "gpupool_notebook")
    browser.close()
    url = "ws" + srv.url.removeprefix("http") + notebook.base_path(srv.a) + "echo"
    cookie = {"Cookie": f"gpupool_notebook={secret}"}
    with pytest.raises(InvalidStatus) as refused:
        connect(url, additional_headers=cookie, origin="http://evil.example")  # type: ignore[arg-type]
    assert refused.value.response.status_code == 403
    with connect(url, additional_headers=cookie, origin=srv.url) as ws:  # type: ignore[arg-type]
        ws.send("same origin")
        assert ws.recv(timeout=20).startswith("echo same origin")


def test_more_requests_at_once_than_a_notebook_takes_are_told_to_wait(two):
    srv = two
    url = srv.url + notebook.base_path(srv.a) + "slow"
    headers = {"Authorization": f"Bearer {srv.ann}"}
    with ThreadPoolExecutor(MAX_APP_STREAMS + 8) as pool:
        codes = list(pool.map(lambda _: httpx.get(url, headers=headers, timeout=60).status_code,
                              range(MAX_APP_STREAMS + 8)))  # fmt: skip
    assert set(codes) <= {200, 503}, codes
    assert codes.count(503) >= 1 and codes.count(200) >= MAX_APP_STREAMS // 2, codes
    assert srv.client(srv.ann).get(notebook.base_path(srv.a)).status_code == 200  # after


def test_requests_whose_caller_went_away_give_their_places_back(two):
    """A person who goes before the app's answer (a closed tab, a timeout): its exchange's
    place among the notebook's 32 comes back once the answer finds nobody to take it."""
    srv = two
    url = srv.url + notebook.base_path(srv.a) + "slow"  # the app answers after 3 s
    headers = {"Authorization": f"Bearer {srv.ann}"}

    def gone(_: int) -> str:
        try:
            httpx.get(url, headers=headers, timeout=0.5)
        except httpx.TimeoutException:
            return "gone"
        return "answered"

    with ThreadPoolExecutor(MAX_APP_STREAMS) as pool:
        assert set(pool.map(gone, range(MAX_APP_STREAMS))) == {"gone"}
    time.sleep(5)  # the answers come, to nobody
    with ThreadPoolExecutor(MAX_APP_STREAMS) as pool:
        codes = list(pool.map(lambda _: httpx.get(url, headers=headers, timeout=60).status_code,
                              range(MAX_APP_STREAMS)))  # fmt: skip
    assert codes == [200] * MAX_APP_STREAMS, codes


def test_a_notebook_that_cannot_be_one_is_refused_naming_why(two):
    srv = two
    member = srv.client(srv.ann)
    base = {"request": "cpu=1", "tenant": "alpha", "interactive": "notebook", "max_runtime_s": 60}
    wrong = [{"allocation": True}, {"command": []}, {"image": "python:3", "command": ["x"]},
             {"command": ["x"], "array": "0-1"}, {"command": ["x"], "gang_size": 2}]  # fmt: skip
    for extra in wrong:
        r = member.post("/api/v1/jobs", json={**base, **extra})
        assert r.status_code == 422 and "notebook" in r.text, (extra, r.text)

"""A notebook on a slice (docs/interactive.md, "Notebooks"), with a real server, a real agent
and real processes: ``gpupool notebook -- python APP`` runs a web app as the job's workload
and prints a link; the app is reached through the server's proxy with the member's token
(200, from inside the sandbox), not without it (401) nor with another tenant's (403), over
HTTP and WebSocket — and in Chromium through the printed link, which logs the browser in
with a path-scoped cookie."""

import json
import os
import shutil
import subprocess
import sys

import httpx
import pytest
from websockets.sync.client import connect

from gpupool.model import notebook
from tests.support.agents import (
    agent_thread,
    make_agent,
    no_namespace_outlives_its_test,  # noqa: F401 - used through usefixtures
    no_workload_outlives_its_test,  # noqa: F401 - autouse: kills what a test left
    wait_for_cards,
)
from tests.support.browser import CHROMIUM, needs_chromium
from tests.support.cluster import ok
from tests.support.live import live_server
from tests.support.notebooks import PYTHON, app_copy, cli_notebook, printed, running_notebook
from tests.support.sessions import session_pool


@pytest.fixture
def pool(tmp_path):
    """A server with its scheduler, tenants alpha and beta, and node n1 (two simulated A100s)
    whose agent runs workloads as the test's user."""
    from gpupool.server.settings import Settings

    settings = Settings(data_dir=tmp_path / "data", log_json=False, cycle_interval_s=0.2)
    with session_pool(settings, tmp_path / "agent", ("alpha", "beta")) as pool:
        yield pool


def _get(srv, path: str, token: str | None = None, **kw) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.get(srv.url + path, headers=headers, timeout=30, **kw)


def test_gpupool_notebook_serves_the_app_through_the_proxy_to_its_tenant_only(pool, tmp_path):
    srv, _ = pool
    ann = srv.token("ann", "member", "alpha")
    code, text = cli_notebook(srv.url, ann, "--gpu", "1", "--time", "30m", "--",
                              PYTHON, app_copy(tmp_path / "app"))  # fmt: skip
    assert code == 0, text
    job_id, login, url = printed(text)
    assert ann not in text  # the long-lived token is never printed, in a URL or otherwise
    assert url == srv.url + notebook.base_path(job_id)
    job = ok(srv.admin().get(f"/api/v1/jobs/{job_id}"))
    assert job["interactive"] == "notebook" and job["state"] == "running", job

    r = _get(srv, notebook.base_path(job_id) + "where", ann,
             cookies={"gpupool_session": "dash", "mine": "kept"})  # fmt: skip
    assert r.status_code == 200, r.text
    where = r.json()
    assert where["uid"] == os.getuid() and where["job"] == str(job_id), where
    assert where["path"] == notebook.base_path(job_id) + "where"
    # the caller's credentials never reach the app; the app's own cookie does
    assert "authorization" not in where["headers"], where
    assert where["headers"].get("cookie") == "mine=kept", where

    assert _get(srv, notebook.base_path(job_id)).status_code == 401
    bea = srv.token("bea", "member", "beta")
    refused = _get(srv, notebook.base_path(job_id), bea)
    assert refused.status_code == 403 and "where" not in refused.text, refused.text
    viewer = srv.token("vic", "viewer", "alpha")
    assert _get(srv, notebook.base_path(job_id), viewer).status_code == 403

    body = os.urandom(300_000)  # past a window of the relay: credit flows both ways
    up = httpx.post(srv.url + notebook.base_path(job_id) + "upload", content=body,
                    headers={"Authorization": f"Bearer {ann}"}, timeout=30)  # fmt: skip
    assert up.status_code == 200 and up.json()["size"] == len(body), up.text
    big = _get(srv, notebook.base_path(job_id) + "big?n=3000000", ann)
    assert big.status_code == 200 and len(big.content) == 3_000_000

    ws_url = "ws" + srv.url.removeprefix("http") + notebook.base_path(job_id) + "echo"
    with connect(ws_url, additional_headers={"Authorization": f"Bearer {ann}"}) as ws:
        ws.send("ping-1")
        assert ws.recv(timeout=20) == f"echo ping-1 uid {os.getuid()}"
        ws.send("x" * 1000)
        assert ws.recv(timeout=20).startswith("echo xxx")

    env = {**os.environ, "GPUPOOL_SERVER": srv.url, "GPUPOOL_TOKEN": ann, "COLUMNS": "200",
           "GPUPOOL_CONFIG_DIR": "/nonexistent-gpupool-config"}  # fmt: skip
    shown = subprocess.run([sys.executable, "-m", "gpupool.cli.main", "job", "show", str(job_id)],
                           env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    line = next((r for r in shown.stdout.splitlines() if r.strip().startswith("notebook ")), "")
    assert url in line, shown.stdout

    if shutil.which("jupyter") is None:  # the default app, where the job has no JupyterLab
        code, said = cli_notebook(srv.url, ann, "--gpu", "1")
        assert code != 0 and "exit code 127" in said and "gpupool job logs" in said, said
        failed = int(said.split("job ")[1].split()[0])
        logs = ok(srv.client(ann).get(f"/api/v1/jobs/{failed}/logs"))
        assert "jupyter is not installed" in json.dumps(logs), logs

    # a link, then a second one from the CLI for the running notebook
    code, again = cli_notebook(srv.url, ann, "--link", str(job_id), "--json")
    assert code == 0, again
    made = json.loads(again)
    assert made["login_url"] != login and made["url"] == url


@needs_chromium
def test_the_printed_link_opens_the_notebook_in_chromium(pool, tmp_path):
    from playwright.sync_api import sync_playwright

    from tests.support.browser import FLAGS

    srv, _ = pool
    ann = srv.token("ann", "member", "alpha")
    code, text = cli_notebook(srv.url, ann, "--gpu", "1", "--", PYTHON,
                              app_copy(tmp_path / "app"))  # fmt: skip
    assert code == 0, text
    job_id, login, _ = printed(text)
    base = notebook.base_path(job_id)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            context = browser.new_context()
            page = context.new_page()
            answer = page.goto(login)
            assert answer is not None and answer.status == 200
            assert page.url == srv.url + base  # sent on to the notebook, its cookie set
            assert json.loads(page.inner_text("body"))["job"] == str(job_id)
            cookie = next(c for c in context.cookies() if c["name"] == "gpupool_notebook")
            assert cookie["path"] == base and cookie["httpOnly"], cookie
            assert cookie["sameSite"] == "Strict", cookie
            assert not any(ann in c["value"] for c in context.cookies())
            page.goto(srv.url + base + "page")  # fetch and WebSocket, with the cookie
            page.wait_for_function(
                "document.getElementById('echo').textContent.startsWith('echo hello')",
                timeout=20_000,
            )
            assert page.inner_text("#where") == f"uid {os.getuid()} job {job_id}"
            # the link was used: opened again (another browser, a replay) it is refused
            other = browser.new_context().new_page()
            replay = other.goto(login)
            assert replay is not None and replay.status == 403
            assert other.goto(srv.url + base) is not None
            assert "gpupool_notebook" not in {c["name"] for c in other.context.cookies()}
            # the dashboard's job page opens it too, with a link of the dashboard's session
            dash = browser.new_context().new_page()
            dash.goto(srv.url + f"/jobs/{job_id}")
            dash.fill("#gp-token", ann)
            dash.click("#gp-login button[type=submit]")
            dash.wait_for_url(srv.url + f"/jobs/{job_id}")
            dash.click("#job-notebook")
            dash.wait_for_url(srv.url + base)
            assert json.loads(dash.inner_text("body"))["job"] == str(job_id)
        finally:
            browser.close()


@needs_chromium
def test_a_hostile_notebooks_scripts_reach_nothing_of_the_dashboard_an_admin_is_logged_in_to(
    pool,
):
    """The app is the tenant's and shares the server's origin: an admin logged in to the
    dashboard opens it; its scripts reach their own notebook, but not the API (the admin's
    session cookie), not through a redirect, not a popup or a frame of a dashboard page
    (its CSRF token)."""
    from playwright.sync_api import sync_playwright

    from tests.support.browser import FLAGS

    srv, _ = pool
    job = running_notebook(srv.client(srv.token("ann", "member", "alpha")), "alpha")
    base = srv.url + notebook.base_path(job["id"])
    made = ok(srv.admin().post(f"/api/v1/jobs/{job['id']}/notebook-link"))
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            page = browser.new_context().new_page()
            page.goto(srv.url + "/jobs")
            page.fill("#gp-token", srv.admin_token)
            page.click("#gp-login button[type=submit]")
            page.wait_for_url(srv.url + "/jobs")
            assert page.context.request.get(srv.url + "/api/v1/jobs").ok  # logged in
            page.goto(srv.url + made["login_path"])
            assert page.url == base
            page.goto(base + "evil")
            page.wait_for_function(
                "document.getElementById('results').textContent.startsWith('{')", timeout=30_000
            )
            results = json.loads(page.inner_text("#results"))
        finally:
            browser.close()
    assert results == {"own": "ok", "api": "blocked", "redirect": "status 502",
                       "redirect_port": "status 502", "popup": "blocked",
                       "frame": "blocked"}, results  # fmt: skip
    audit = ok(srv.admin().get("/api/v1/audit", params={"limit": 50}))
    rows = audit["items"] if isinstance(audit, dict) else audit
    assert any("notebook-login" in r["action"] and "admin" in r["detail"] for r in rows), rows


@pytest.mark.usefixtures("no_namespace_outlives_its_test")
def test_as_root_the_app_runs_as_the_tenants_user_in_its_network_namespace(tmp_path, work_root):
    """On a root agent with tenant users: the app answers as the tenant's user from the
    tenant's network namespace — its port is not the node's (nothing listens there)."""
    if os.geteuid() != 0:
        if os.environ.get("GPUPOOL_REQUIRE_ROOT"):
            raise RuntimeError("this test needs root (CI runs it as root)")
        pytest.skip("tenant users need root")
    import pwd
    import socket

    from gpupool.agent.workloads import IsolationConfig
    from gpupool.server.settings import Settings

    settings = Settings(data_dir=tmp_path / "data", log_json=False, cycle_interval_s=0.2)
    config = IsolationConfig(mode="tenant-users", user_prefix="gpt-", work_dir=work_root)
    with live_server(settings, run_scheduler=True) as srv:
        ok(srv.admin().post("/api/v1/tenants", json={"name": "alpha"}), 201)
        agent = make_agent(srv.url, srv.token("agent-n1", "agent", node="n1"), "n1",
                           tmp_path / "agent", isolation=config)  # fmt: skip
        try:
            with agent_thread(agent):
                wait_for_cards(srv.admin())
                ann = srv.token("ann", "member", "alpha")
                job = running_notebook(srv.client(ann), "alpha")
                where = ok(srv.client(ann).get(notebook.base_path(job["id"]) + "where"))
                with socket.socket() as s:  # the node's own loopback: no app there
                    assert s.connect_ex(("127.0.0.1", notebook.port_of(job["id"]))) != 0
                host_netns = os.readlink("/proc/self/ns/net")
        finally:
            if agent.launcher.networks is not None:
                agent.launcher.networks.remove_all()
    assert where["uid"] == pwd.getpwnam("gpt-alpha").pw_uid, where
    assert where["netns"] != host_netns, where

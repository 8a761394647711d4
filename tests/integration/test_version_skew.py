"""Real versions (issue 46): every answer says the server's release; an agent's registration
says its own, which the node records and the server judges — skew past the supported window is
refused naming both versions, an older agent that says nothing is accepted."""

import httpx

from gpupool import __version__
from gpupool.model.versions import parse
from tests.support.cli import gpupool
from tests.support.cluster import node_body, ok


def _register(srv, token: str, agent_header: str | None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"}
    if agent_header is not None:
        headers["User-Agent"] = agent_header
    return httpx.post(f"{srv.url}/api/v1/nodes", json=node_body("n1", cards=1), headers=headers)


def _shifted(minors: int) -> str:
    mine = parse(__version__)
    assert mine is not None, __version__
    return f"{mine.major}.{mine.minor + minors}.0"


def test_agents_versions_are_recorded_and_skew_past_the_window_refused(sqlite_server):
    token = sqlite_server.token("agent-n1", "agent", node="n1")
    too_new = _register(sqlite_server, token, f"gpupool-agent/{_shifted(2)}")
    assert too_new.status_code == 409
    detail = too_new.json()["detail"]
    assert f"agent {_shifted(2)}, server {__version__}" in detail and "newer" in detail
    assert too_new.headers["gpupool-version"] == __version__
    admin = sqlite_server.admin()
    assert admin.get("/api/v1/nodes").json()["items"] == []  # nothing registered
    newer = _register(sqlite_server, token, f"gpupool-agent/{_shifted(1)}")
    assert newer.status_code == 200, newer.text
    assert newer.json()["agent_version"] == _shifted(1)
    silent = _register(sqlite_server, token, None)  # an agent from before versions were said
    assert silent.status_code == 200 and silent.json()["agent_version"] is None
    assert ok(admin.get("/api/v1/status"))["agent_versions"] == {"unknown": 1}


def test_the_cli_shows_its_version_and_the_servers(sqlite_server):
    env = {"GPUPOOL_SERVER": sqlite_server.url, "GPUPOOL_TOKEN": sqlite_server.admin_token}
    out = gpupool("version", "--server", env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [__version__, f"server {sqlite_server.url}: {__version__}"]
    assert "warning" not in out.stderr


def test_the_dashboard_shows_the_servers_version(sqlite_server):
    c = httpx.Client(base_url=sqlite_server.url, timeout=30)
    assert c.post("/ui/session", json={"token": sqlite_server.admin_token}).status_code == 200
    page = c.get("/nodes")
    assert page.status_code == 200
    assert f'<footer class="foot">gpupool {__version__}</footer>' in page.text

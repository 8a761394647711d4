"""Mutual TLS for agents (issue 46): with ``--tls-client-ca`` a node's token alone runs
nothing — its agent must present a certificate of the site's CA naming that node. Copied to
another host without the certificate, presented beside another node's certificate, or with a
certificate of another CA, the token is refused; the node's own agent registers, takes orders
on its wss channel and runs a job. People and the CLI are not asked for a certificate."""

import ssl
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from gpupool.server.process import free_port
from tests.support.agents import (  # noqa: F401 (the fixture kills leftover workloads)
    a_job_runs_over_the_channel,
    agent_thread,
    make_agent,
    no_workload_outlives_its_test,
    wait_for,
)
from tests.support.cli import gpupool
from tests.support.cluster import node_body
from tests.support.process import admin_token


def _certs(folder: Path, *clients: str) -> None:
    assert gpupool("cert", "create", "--dir", str(folder), "--host", "127.0.0.1").returncode == 0
    for node in clients:
        made = gpupool("cert", "create", "--dir", str(folder), "--client", node)
        assert made.returncode == 0, made.stderr


def _register(url: str, ca: Path, token: str, cert: tuple[str, str] | None) -> httpx.Response:
    context = ssl.create_default_context(cafile=str(ca))
    if cert is not None:
        context.load_cert_chain(*cert)
    with httpx.Client(verify=context) as c:
        return c.post(f"{url}/api/v1/nodes", json=node_body("n1", cards=1),
                      headers={"Authorization": f"Bearer {token}"})  # fmt: skip


def _pair(folder: Path, node: str) -> tuple[str, str]:
    return str(folder / "clients" / f"{node}.pem"), str(folder / "clients" / f"{node}.key")


def test_an_agent_needs_its_own_nodes_certificate_and_people_need_none(tmp_path):
    site, rogue = tmp_path / "site", tmp_path / "rogue"
    _certs(site, "n1", "n2")
    _certs(rogue, "n1")
    ca = site / "ca.pem"
    admin = admin_token(tmp_path)
    token = admin_token(tmp_path, role="agent", name="agent-n1", node="n1")
    port = free_port()
    url = f"https://127.0.0.1:{port}"
    log = (tmp_path / "server.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "gpupool.cli.main", "server", "--data-dir", str(tmp_path),
         "--port", str(port), "--tls-cert", str(site / "server.pem"),
         "--tls-key", str(site / "server.key"), "--tls-client-ca", str(ca)],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        people = {"GPUPOOL_SERVER": url, "GPUPOOL_TOKEN": admin, "GPUPOOL_CA": str(ca)}
        wait_for("the server", lambda: server.poll() is None and _up(url, ca), 60)
        assert gpupool("whoami", env=people).stdout.startswith("root (admin")

        bare = _register(url, ca, token, None)  # the token copied to another host
        assert bare.status_code == 403 and "client certificate" in bare.json()["detail"]
        other = _register(url, ca, token, _pair(site, "n2"))
        assert other.status_code == 403 and "names n2, not node n1" in other.json()["detail"]
        with pytest.raises(httpx.HTTPError):  # another CA's certificate: no handshake
            _register(url, ca, token, _pair(rogue, "n1"))
        c = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {admin}"},
                         verify=ssl.create_default_context(cafile=str(ca)))  # fmt: skip
        assert c.get("/api/v1/nodes").json()["items"] == []

        cert, key = _pair(site, "n1")
        agent = make_agent(url, token, "n1", tmp_path / "agent", ca_file=str(ca),
                           cert_file=cert, key_file=key)  # fmt: skip
        assert c.post("/api/v1/tenants", json={"name": "t"}).status_code == 201
        with agent_thread(agent):  # registers, takes orders on its wss channel, runs a job
            done = a_job_runs_over_the_channel(c, agent, "t")
        assert done["state"] == "succeeded"
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()
    assert "Traceback" not in (tmp_path / "server.log").read_text()


def _up(url: str, ca: Path) -> bool:
    try:
        return httpx.get(
            f"{url}/healthz", verify=ssl.create_default_context(cafile=str(ca))
        ).is_success
    except httpx.HTTPError:
        return False

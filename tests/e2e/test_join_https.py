"""Joining over HTTPS (issue 46): a new server that knows only the pin the admin printed
trusts the real server and no other, sends its bootstrap token only after the pin matched,
and its agent then runs as the service would, trusting the chain the join wrote; removing the
node revokes that agent's credential."""

import shutil
import ssl
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from gpupool.model.cert_pins import fingerprint
from gpupool.server.process import free_port
from tests.support.agents import wait_for
from tests.support.cli import gpupool
from tests.support.process import admin_token
from tests.support.tls import make_certificates

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")


def _ready(c: httpx.Client, node: str) -> bool:
    r = c.get(f"/api/v1/nodes/{node}")
    return r.status_code == 200 and r.json()["state"] == "ready"


def test_a_server_joins_over_https_by_its_pin_and_its_agent_runs_on_what_it_wrote(tmp_path):
    ca, cert, key = make_certificates(tmp_path)
    chain = tmp_path / "chain.pem"  # the server's certificate and its CA, as operators ship it
    chain.write_text(Path(cert).read_text() + Path(ca).read_text())
    admin = admin_token(tmp_path)
    port = free_port()
    url = f"https://127.0.0.1:{port}"
    server = subprocess.Popen(
        [sys.executable, "-m", "gpupool.cli.main", "server", "--data-dir", str(tmp_path),
         "--port", str(port), "--tls-cert", str(chain), "--tls-key", key],
        stdout=subprocess.DEVNULL, stderr=(tmp_path / "server.log").open("w"),
    )  # fmt: skip
    agent = None
    try:
        c = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {admin}"},
                         verify=ssl.create_default_context(cafile=ca))  # fmt: skip
        wait_for("the HTTPS server", lambda: server.poll() is None and _answers(c), 30)
        made = c.post("/api/v1/join-tokens", json={"ttl_s": 600}).json()
        assert made["ca_hash"] == fingerprint(Path(ca).read_text())  # the CA, the chain's top
        env_file, ca_file = tmp_path / "etc" / "agent.env", tmp_path / "etc" / "ca.pem"
        argv = ["join", url, "--token", made["token"], "--name", "gpu01",
                "--env-file", str(env_file), "--ca-file", str(ca_file)]  # fmt: skip
        wrong = gpupool(*argv, "--ca-hash", "sha256:" + "0" * 64)
        assert wrong.returncode == 2 and "not sending it the token" in wrong.stderr
        assert c.get("/api/v1/join-tokens").json()[0]["uses_left"] == 1  # the token never left
        unpinned = gpupool(*argv)  # its CA is not trusted here: nothing is sent
        assert unpinned.returncode == 2 and "give --ca-hash" in unpinned.stderr
        joined = gpupool(*argv, "--ca-hash", made["ca_hash"].upper())  # as openssl prints it
        assert joined.returncode == 0, joined.stderr
        assert ca_file.read_text() == chain.read_text()
        settings = dict(line.split("=", 1) for line in env_file.read_text().splitlines())
        assert settings["GPUPOOL_CA"] == str(ca_file) and settings["GPUPOOL_SERVER"] == url
        agent = subprocess.Popen(
            [sys.executable, "-m", "gpupool.cli.main", "agent", "--server", url,
             "--state-dir", str(tmp_path / "state"), "--devices", "simulated:1xA100-80G",
             "--isolation", "none", "--no-cgroups", "--work-dir", str(tmp_path / "work")],
            env={"PATH": "/usr/bin:/bin", **settings}, stdout=subprocess.DEVNULL,
            stderr=(tmp_path / "agent.log").open("w"),
        )  # fmt: skip
        wait_for("the joined node ready", lambda: _ready(c, "gpu01"), 60)
        removed = gpupool(
            "node",
            "remove",
            "gpu01",
            env={"GPUPOOL_SERVER": url, "GPUPOOL_TOKEN": admin, "GPUPOOL_CA": ca},
        )
        assert removed.returncode == 0, removed.stderr
        time.sleep(3)  # the agent beats every second or two: it cannot register again
        assert c.get("/api/v1/nodes/gpu01").status_code == 404
        # a server whose certificate is trusted here already (GPUPOOL_CA) needs no pin
        token = c.post("/api/v1/join-tokens", json={}).json()["token"]
        trusted = gpupool(
            "join",
            url,
            "--token",
            token,
            "--name",
            "gpu01",
            "--env-file",
            str(tmp_path / "again.env"),
            env={"GPUPOOL_CA": ca},
        )
        assert trusted.returncode == 0, trusted.stderr
    finally:
        for proc in (agent, server):
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=30)


def _answers(c: httpx.Client) -> bool:
    try:
        return c.get("/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False

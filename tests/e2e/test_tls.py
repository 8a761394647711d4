"""HTTPS end to end (issue 46: a passive capture recorded every agent token): the server
serves a certificate of a site's own CA; the CLI and an agent — its calls and its channel —
trust that CA and work; without it they refuse the server, saying why, and plain HTTP gets
no answer on that port."""

import shutil
import ssl
import subprocess
import sys
import time

import httpx
import pytest

from gpupool.server.process import free_port
from tests.support.agents import a_job_runs_over_the_channel, agent_thread, make_agent
from tests.support.cli import gpupool
from tests.support.process import admin_token
from tests.support.tls import make_certificates


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl (.ci/run installs it)")
def test_server_cli_and_agent_over_https_with_a_sites_own_ca(tmp_path):
    ca, cert, key = make_certificates(tmp_path)
    trusted = ssl.create_default_context(cafile=ca)
    admin = admin_token(tmp_path)
    agent_token = admin_token(tmp_path, role="agent", name="agent-n0", node="n0")
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "gpupool.cli.main", "server", "--data-dir", str(tmp_path),
         "--port", str(port), "--tls-cert", cert, "--tls-key", key],
        stdout=subprocess.DEVNULL, stderr=(tmp_path / "server.log").open("w"),
    )  # fmt: skip
    url = f"https://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            assert server.poll() is None and time.monotonic() < deadline, "no HTTPS server"
            try:
                if httpx.get(url + "/healthz", verify=trusted, timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        env = {"GPUPOOL_SERVER": url, "GPUPOOL_TOKEN": admin, "GPUPOOL_CA": ca}
        assert gpupool("whoami", env=env).stdout.startswith("root (admin")
        untrusted = gpupool("whoami", env={k: v for k, v in env.items() if k != "GPUPOOL_CA"})
        assert untrusted.returncode == 2 and "Traceback" not in untrusted.stderr
        assert "CERTIFICATE_VERIFY_FAILED" in untrusted.stderr, untrusted.stderr
        with pytest.raises(httpx.HTTPError):  # no plain HTTP on that port: tokens stay wrapped
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
        c = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {admin}"}, verify=trusted)
        assert c.post("/api/v1/tenants", json={"name": "t"}).status_code == 201
        agent = make_agent(url, agent_token, "n0", tmp_path / "agent", ca_file=ca)
        with agent_thread(agent):  # its channel over wss, a job over HTTPS
            done = a_job_runs_over_the_channel(c, agent, "t")
    finally:
        server.terminate()
        server.wait(timeout=30)  # within 3 s of the signal, a client's idle connection open
    assert done["state"] == "succeeded"


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl (.ci/run installs it)")
def test_a_profile_keeps_the_ca_it_logged_in_with_and_says_when_it_becomes_current(tmp_path):
    """Issue 59, finding 7: ``GPUPOOL_CA=ca.pem gpupool login ...`` saved the server and token
    but not the CA, so every later command failed CERTIFICATE_VERIFY_FAILED unless GPUPOOL_CA
    was exported again; and ``login --profile X`` made X current without a word."""
    ca, cert, key = make_certificates(tmp_path)
    admin = admin_token(tmp_path)
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "gpupool.cli.main", "server", "--data-dir", str(tmp_path),
         "--port", str(port), "--tls-cert", cert, "--tls-key", key],
        stdout=subprocess.DEVNULL, stderr=(tmp_path / "server.log").open("w"),
    )  # fmt: skip
    url = f"https://127.0.0.1:{port}"
    trusted = ssl.create_default_context(cafile=ca)
    home = {"GPUPOOL_CONFIG_DIR": str(tmp_path / "config"), "GPUPOOL_CA": "",
            "GPUPOOL_SERVER": "", "GPUPOOL_TOKEN": "", "GPUPOOL_PROFILE": ""}  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            assert server.poll() is None and time.monotonic() < deadline, "no HTTPS server"
            try:
                if httpx.get(url + "/healthz", verify=trusted, timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        logged = gpupool("login", "--server", url, "--token", admin,
                         env={**home, "GPUPOOL_CA": ca})  # fmt: skip
        assert logged.returncode == 0, logged.stderr
        later = gpupool("whoami", env=home)  # GPUPOOL_CA no longer set
        assert later.returncode == 0, later.stderr
        assert later.stdout.startswith("root (admin")
        # --ca says the same as GPUPOOL_CA; the CA file may go once it is saved
        copy = tmp_path / "copy-of-ca.pem"
        shutil.copy(ca, copy)
        lab = gpupool("login", "--server", url, "--token", admin, "--profile", "lab",
                      "--ca", str(copy), env=home)  # fmt: skip
        assert lab.returncode == 0, lab.stderr
        assert "profile lab is now current (it was default" in lab.stdout, lab.stdout
        assert "gpupool profile use default" in lab.stdout
        copy.unlink()
        assert gpupool("whoami", env=home).returncode == 0
        assert gpupool("--profile", "default", "whoami", env=home).returncode == 0
        missing = gpupool("login", "--server", url, "--token", admin, "--ca",
                          str(tmp_path / "nope.pem"), env=home)  # fmt: skip
        assert missing.returncode == 2 and "nope.pem" in missing.stderr
        assert "Traceback" not in missing.stderr
    finally:
        server.terminate()
        server.wait(timeout=30)

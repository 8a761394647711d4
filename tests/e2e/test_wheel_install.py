"""Installed as an operator installs it (issue 46): a wheel built from this tree, installed
without extras into a fresh virtual environment, runs the server over HTTPS with a certificate
from ``gpupool cert`` and an agent that joined with a bootstrap token and the CA's pin — the
token cannot be used twice, the server listens on its HTTPS port only, node removal revokes
the agent's credential, every part says the same real version, and what only extras bring
(Kubernetes mode) is refused in one line naming the extra.

Needs PyPI (or pip's cache) for the build backend and the runtime dependencies, as any install
does."""

import os
import ssl
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from packaging.version import Version

from gpupool.server.process import free_port
from tests.support.agents import wait_for
from tests.support.paths import ROOT
from tests.support.sockets import listening_ports

LEAN_LEFT_OUT = ("kubernetes", "grpcio", "statsmodels", "scipy", "pandas", "aiohttp", "pytest")


def _run(*argv: str, env: dict[str, str] | None = None, timeout: float = 600):
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})}
    )


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A fresh virtual environment with the wheel of this tree installed, no extras."""
    root = tmp_path_factory.mktemp("wheel")
    built = _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                 str(root / "dist"), str(ROOT))  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (root / "dist").glob("gpupool-*.whl")
    made = _run(sys.executable, "-m", "venv", str(root / "venv"))
    assert made.returncode == 0, made.stderr
    pip = str(root / "venv" / "bin" / "pip")
    installed = _run(pip, "install", "-q", str(wheel))
    assert installed.returncode == 0, installed.stderr[-3000:]
    return root / "venv"


def test_the_wheel_installs_lean_and_says_its_version(venv):
    listed = _run(str(venv / "bin" / "pip"), "list", "--format=freeze").stdout.lower()
    names = {line.split("==")[0] for line in listed.splitlines()}
    assert "gpupool" in names and "weasyprint" in names and "cryptography" in names
    assert not names & set(LEAN_LEFT_OUT), names & set(LEAN_LEFT_OUT)
    version = _run(str(venv / "bin" / "gpupool"), "version").stdout.strip()
    Version(version)  # a real version, which packaging reads
    head = _run("git", "-C", str(ROOT), "rev-parse", "HEAD").stdout.strip()
    tagged = _run("git", "-C", str(ROOT), "describe", "--tags", "--exact-match").returncode == 0
    assert tagged or f"+g{head[:7]}" in version, (version, head)  # the commit it was built from
    for plugin in ("device-plugin", "dra-plugin"):
        kube = _run(str(venv / "bin" / "gpupool"), "kube", plugin, "--node", "n1")
        assert kube.returncode == 2 and "Traceback" not in kube.stderr, kube.stderr
        assert "pip install 'gpupool[kube]'" in kube.stderr, kube.stderr


def test_server_and_agent_from_the_wheel_over_https_joined_by_pin(venv, tmp_path):
    gp = str(venv / "bin" / "gpupool")
    version = _run(gp, "version").stdout.strip()
    tls, data = tmp_path / "tls", tmp_path / "data"
    made = _run(gp, "cert", "create", "--dir", str(tls), "--host", "127.0.0.1")
    assert made.returncode == 0, made.stderr
    admin = _run(gp, "admin", "token", "create", "--name", "root", "--data-dir", str(data))
    assert admin.returncode == 0, admin.stderr
    admin_token = admin.stdout.split()[-1]
    port = free_port()
    url = f"https://127.0.0.1:{port}"
    server = subprocess.Popen(
        [gp, "server", "--data-dir", str(data), "--port", str(port),
         "--tls-cert", str(tls / "server.pem"), "--tls-key", str(tls / "server.key")],
        stdout=subprocess.DEVNULL, stderr=(tmp_path / "server.log").open("w"),
    )  # fmt: skip
    agent = None
    trusted = ssl.create_default_context(cafile=str(tls / "ca.pem"))
    admin_env = {"GPUPOOL_SERVER": url, "GPUPOOL_TOKEN": admin_token,
                 "GPUPOOL_CA": str(tls / "ca.pem")}  # fmt: skip
    try:
        c = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {admin_token}"},
                         verify=trusted)  # fmt: skip
        wait_for("the HTTPS server", lambda: _answers(c, server), 60)
        assert listening_ports(server.pid) == {port}  # HTTPS only: no plain HTTP port
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
        assert c.get("/healthz").headers["gpupool-version"] == version

        token = _run(gp, "node", "token", "create", "--ttl", "10m", env=admin_env)
        assert token.returncode == 0, token.stderr
        join = token.stdout.splitlines()[-1].split()
        assert join[:3] == ["gpupool", "join", url] and "--ca-hash" in join
        env_file = tmp_path / "etc" / "agent.env"
        argv = [gp, *join[1:], "--name", "gpu01", "--env-file", str(env_file),
                "--ca-file", str(tmp_path / "etc" / "ca.pem")]  # fmt: skip
        calls = tmp_path / "systemctl-calls"
        systemctl = tmp_path / "systemctl"  # records what join asks of systemd
        systemctl.write_text(  # a host that systemd runs
            f'#!/bin/sh\necho "$@" >> {calls}\n[ "$1" = is-system-running ] && echo running\n'
            "exit 0\n"
        )
        systemctl.chmod(0o755)
        installing = [*argv, "--install-service", "--unit-dir", str(tmp_path / "units")]
        # the pin alone vouches for the server; the unit comes from the wheel itself
        joined = _run(*installing, env={"GPUPOOL_CA": "", "GPUPOOL_SYSTEMCTL": str(systemctl)})
        assert joined.returncode == 0, joined.stderr
        unit = (tmp_path / "units" / "gpupool-agent.service").read_text()
        assert f"ExecStart={gp} agent --server ${{GPUPOOL_SERVER}}" in unit
        assert calls.read_text().splitlines() == [
            "is-system-running", "daemon-reload", "enable --now gpupool-agent",
        ]  # fmt: skip
        again = _run(*argv[:-4], "--name", "gpu02", "--env-file", str(tmp_path / "b.env"))
        assert again.returncode == 2 and "spent bootstrap token" in again.stderr, again.stderr
        settings = dict(line.split("=", 1) for line in env_file.read_text().splitlines())
        agent = subprocess.Popen(
            [gp, "agent", "--server", settings["GPUPOOL_SERVER"], "--state-dir",
             str(tmp_path / "state"), "--devices", "simulated:1xA100-80G",
             "--isolation", "none", "--no-cgroups", "--work-dir", str(tmp_path / "work")],
            env={"PATH": "/usr/bin:/bin", **settings}, stdout=subprocess.DEVNULL,
            stderr=(tmp_path / "agent.log").open("w"),
        )  # fmt: skip
        wait_for("the joined node ready", lambda: _state(c, "gpu01") == "ready", 60)
        assert c.get("/api/v1/nodes/gpu01").json()["agent_version"] == version
        assert c.post("/api/v1/tenants", json={"name": "t"}).status_code == 201
        job = c.post("/api/v1/jobs", json={"request": "gpu=1", "tenant": "t",
                                           "command": ["true"]}).json()  # fmt: skip
        wait_for("the job", lambda: c.get(f"/api/v1/jobs/{job['id']}").json()["finished_at"], 60)
        assert c.get(f"/api/v1/jobs/{job['id']}").json()["state"] == "succeeded"

        removed = _run(gp, "node", "remove", "gpu01", env=admin_env)
        assert removed.returncode == 0, removed.stderr
        credential = {"Authorization": f"Bearer {settings['GPUPOOL_AGENT_TOKEN']}"}
        refused = httpx.get(f"{url}/api/v1/nodes/gpu01", headers=credential, verify=trusted)
        assert refused.status_code == 401
        time.sleep(3)  # the agent's next beats cannot register it again
        assert c.get("/api/v1/nodes/gpu01").status_code == 404
    finally:
        for proc in (agent, server):
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=30)
    assert "Traceback" not in (tmp_path / "server.log").read_text()


def _answers(c: httpx.Client, server: subprocess.Popen) -> bool:
    assert server.poll() is None, "the server exited"
    try:
        return c.get("/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _state(c: httpx.Client, node: str) -> str | None:
    r = c.get(f"/api/v1/nodes/{node}")
    return r.json()["state"] if r.status_code == 200 else None

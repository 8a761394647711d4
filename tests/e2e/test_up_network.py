"""``gpupool up`` beyond loopback (issue 59, finding 5): the pool is shared over HTTPS with
``--tls-cert/--tls-key`` (or the settings' TLS variables) or over plain HTTP only with the
``--allow-plain-http`` it suggests; it prints the URL it serves, says "ready", its embedded
agents register; and a start it refuses leaves no database, token or folder behind."""

import shutil
import signal
import ssl
import subprocess
import sys
import time

import httpx
import pytest

from gpupool.server.process import free_port
from tests.support.tls import make_certificates

NODES = "2"


def _up(data_dir, port, *extra, env=None):
    cmd = [sys.executable, "-m", "gpupool.cli.main", "up", "--data-dir", str(data_dir)]
    cmd += ["--port", str(port), "--nodes", NODES, *extra]
    return subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**__import__("os").environ, **(env or {})},
    )  # fmt: skip


def _refused(data_dir, port, *extra, env=None) -> str:
    up = _up(data_dir, port, *extra, env=env)
    out, err = up.communicate(timeout=60)
    assert up.returncode == 2, out + err
    assert "Traceback" not in err
    return err


def _ready_nodes(url: str, token: str, verify) -> int:
    c = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, verify=verify)
    return c.get("/api/v1/nodes", params={"state": "ready"}).json()["total"]


def _serve_until_ready(up, data_dir, url, verify) -> tuple[str, str]:
    """Wait for both embedded agents to be ready over ``url``; stop ``up``; its output."""
    deadline = time.monotonic() + 60
    try:
        while True:
            assert up.poll() is None, up.communicate()
            assert time.monotonic() < deadline, "the embedded agents never registered"
            token_file = data_dir / "admin-token"
            try:
                if token_file.exists() and _ready_nodes(url, token_file.read_text().strip(),
                                                        verify) == int(NODES):  # fmt: skip
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        time.sleep(1.5)  # the "ready" lines come once /healthz answered
    finally:
        up.send_signal(signal.SIGTERM)
        out, err = up.communicate(timeout=60)
    assert up.returncode == 0, err
    return out, err


def test_plain_http_beyond_loopback_is_refused_naming_flags_up_has_and_leaves_nothing(tmp_path):
    data_dir = tmp_path / "fresh"
    err = _refused(data_dir, free_port(), "--host", "0.0.0.0")
    assert "--allow-plain-http" in err and "--tls-cert" in err and "--tls-key" in err, err
    assert not data_dir.exists(), sorted(p.name for p in data_dir.rglob("*"))
    # a data folder there before keeps only what it had
    (kept := tmp_path / "kept").mkdir()
    (kept / "notes").write_text("mine")
    _refused(kept, free_port(), "--host", "0.0.0.0")
    assert sorted(p.name for p in kept.iterdir()) == ["notes"]
    # a certificate that cannot be read: refused before anything is made too
    missing = tmp_path / "missing.pem"
    err = _refused(data_dir, free_port(), "--tls-cert", str(missing), "--tls-key", str(missing))
    assert str(missing) in err and not data_dir.exists(), err
    helped = subprocess.run(
        [sys.executable, "-m", "gpupool.cli.main", "up", "--help"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    for flag in ("--allow-plain-http", "--tls-cert", "--tls-key"):
        assert flag in helped.stdout, helped.stdout


def test_up_serves_plain_http_beyond_loopback_when_allowed(tmp_path):
    port = free_port()
    up = _up(tmp_path, port, "--host", "0.0.0.0", "--allow-plain-http")
    out, err = _serve_until_ready(up, tmp_path, f"http://127.0.0.1:{port}", True)
    assert "warning: serving plain HTTP on 0.0.0.0" in err, err
    assert "gpupool is ready on http://" in out and f":{port}" in out, out
    assert "0.0.0.0" not in out.split("ready on ", 1)[1].split()[0], out  # a reachable name


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl (.ci/run installs it)")
@pytest.mark.parametrize("how", ["flags", "environment"])
def test_up_serves_https_prints_https_and_its_agents_register(tmp_path, how):
    ca, cert, key = make_certificates(tmp_path)
    port = free_port()
    data_dir = tmp_path / "data"
    if how == "flags":
        up = _up(data_dir, port, "--host", "0.0.0.0", "--tls-cert", cert, "--tls-key", key)
    else:
        tls = {"GPUPOOL_TLS_CERT_FILE": cert, "GPUPOOL_TLS_KEY_FILE": key}
        up = _up(data_dir, port, "--host", "0.0.0.0", env=tls)
    trusted = ssl.create_default_context(cafile=ca)
    out, err = _serve_until_ready(up, data_dir, f"https://127.0.0.1:{port}", trusted)
    assert "http://" not in out, out
    assert "gpupool is ready on https://" in out, out + err
    login = next(line for line in out.splitlines() if line.startswith("try: "))
    assert "--server https://" in login and cert in login, login  # the CLI is told what to trust

"""HTTPS for a newcomer, and certificates renewed without a restart (issue 46): ``gpupool cert
create`` makes a site CA and a server certificate; a running server — its worker processes
each — serves a renewed certificate to new connections within seconds, keeps serving the old
one while the files on disk do not load (a rotation caught half-way), and the CA's pin that
agents joined with stays the same."""

import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

import httpx
from cryptography import x509

from gpupool.server.process import free_port
from tests.support.agents import wait_for
from tests.support.cli import gpupool


def _served_serial(port: int, ca: Path) -> int:
    """The serial of the certificate a new connection is shown (verified against ``ca``)."""
    context = ssl.create_default_context(cafile=str(ca))
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def _file_serial(chain: Path) -> int:
    return x509.load_pem_x509_certificates(chain.read_bytes())[0].serial_number


def _pin(out: str) -> str:
    return out.split("joins pin ")[1].split()[0]


def test_a_renewed_certificate_is_served_without_a_restart(tmp_path):
    tls = tmp_path / "tls"
    made = gpupool("cert", "create", "--dir", str(tls), "--host", "127.0.0.1", "--host", "gp.test")
    assert made.returncode == 0, made.stderr
    assert "made a site CA" in made.stdout
    assert (
        (tls / "server.key").stat().st_mode & 0o077 == 0 == (tls / "ca.key").stat().st_mode & 0o077
    )
    ca, chain, first = tls / "ca.pem", tls / "server.pem", _file_serial(tls / "server.pem")
    port = free_port()
    log = (tmp_path / "server.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "gpupool.cli.main", "server", "--data-dir", str(tmp_path),
         "--port", str(port), "--workers", "2", "--tls-cert", str(chain),
         "--tls-key", str(tls / "server.key")],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        url = f"https://127.0.0.1:{port}/healthz"
        wait_for("the HTTPS server", lambda: _healthy(url, ca, server), 60)
        assert {_served_serial(port, ca) for _ in range(6)} == {first}

        good = chain.read_bytes()
        chain.write_text("-----BEGIN CERTIFICATE-----\nhalf written\n")  # a rotation mid-way
        time.sleep(5)  # past two checks
        assert server.poll() is None
        assert {_served_serial(port, ca) for _ in range(6)} == {first}
        chain.write_bytes(good)
        # a certificate replaced before its key (certbot writes the two apart): the new
        # certificate with the old key does not load, and no handshake may fail meanwhile
        other = tmp_path / "other"
        assert gpupool("cert", "create", "--dir", str(other), "--host", "127.0.0.1").returncode == 0
        chain.write_bytes((other / "server.pem").read_bytes())
        time.sleep(5)  # past two checks
        assert {_served_serial(port, ca) for _ in range(6)} == {first}
        chain.write_bytes(good)

        renewed = gpupool("cert", "create", "--dir", str(tls), "--host", "127.0.0.1")
        assert renewed.returncode == 0, renewed.stderr
        assert "made a site CA" not in renewed.stdout and _pin(renewed.stdout) == _pin(made.stdout)
        second = _file_serial(chain)
        assert second != first
        # every worker: six new connections, all shown the renewed certificate
        wait_for(
            "the renewed certificate",
            lambda: {_served_serial(port, ca) for _ in range(6)} == {second},
            15,
        )
        assert httpx.get(url, verify=ssl.create_default_context(cafile=str(ca))).status_code == 200
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()
    text = (tmp_path / "server.log").read_text()
    assert "do not load" in text and "reloaded the certificate" in text, text[-2000:]
    assert "Traceback" not in text


def _healthy(url: str, ca: Path, server: subprocess.Popen) -> bool:
    assert server.poll() is None, "the server exited"
    try:
        return httpx.get(url, verify=ssl.create_default_context(cafile=str(ca))).status_code == 200
    except httpx.HTTPError:
        return False

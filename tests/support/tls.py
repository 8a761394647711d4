"""Certificates for HTTPS tests, made with openssl as an operator makes them."""

import subprocess
from pathlib import Path


def make_certificates(folder: Path) -> tuple[str, str, str]:
    """A CA, and a certificate it signed for 127.0.0.1 (openssl, as an operator makes them)."""
    names = ("ca.key", "ca.pem", "server.key", "server.csr", "server.pem")
    ca_key, ca, key, csr, cert = (str(folder / n) for n in names)
    ext = folder / "san.ext"
    ext.write_text("subjectAltName=IP:127.0.0.1\n")

    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key, "-out", ca,
        "-days", "2", "-subj", "/CN=gpupool test CA")  # fmt: skip
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr,
        "-subj", "/CN=127.0.0.1")  # fmt: skip
    run("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial",
        "-out", cert, "-days", "2", "-extfile", str(ext))  # fmt: skip
    return ca, cert, key

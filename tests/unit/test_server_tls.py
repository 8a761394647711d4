"""Plain HTTP beyond loopback (issue 46): refused unless allowed — every token would cross the
network in clear — and then said in a warning; HTTPS files both or neither; mutual TLS only
over HTTPS."""

from pathlib import Path

import pytest

from gpupool.cli.server_tls import TlsFiles, tls_options
from gpupool.model import SpecError
from gpupool.server.settings import Settings


def test_plain_http_beyond_loopback_is_refused_unless_allowed(capsys):
    with pytest.raises(SpecError, match=r"plain HTTP on 0.0.0.0:8080.*gpupool cert create"):
        tls_options(Settings(host="0.0.0.0"))
    assert tls_options(Settings(host="0.0.0.0", allow_plain_http=True)) == TlsFiles()
    assert "warning: serving plain HTTP on 0.0.0.0:8080" in capsys.readouterr().err
    assert tls_options(Settings(host="127.0.0.1")) == TlsFiles()  # loopback: quietly
    assert capsys.readouterr().err == ""


def test_half_a_certificate_or_mutual_tls_without_https_is_said():
    with pytest.raises(SpecError, match="give both"):
        tls_options(Settings(tls_cert_file=Path("/etc/gpupool/server.pem")))
    with pytest.raises(SpecError, match="mutual TLS needs HTTPS"):
        tls_options(Settings(tls_client_ca_file=Path("/etc/gpupool/ca.pem")))

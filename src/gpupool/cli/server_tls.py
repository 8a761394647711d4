"""The server's HTTPS settings as uvicorn takes them: certificate and key (reloaded when they
change, ``gpupool.server.tls_reload``), and mutual TLS for agents (``tls_client_ca_file``:
``gpupool.server.client_certs``)."""

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from gpupool.model import SpecError

if TYPE_CHECKING:
    from gpupool.server.settings import Settings

LOOPBACK = ("127.0.0.1", "::1", "localhost")


@dataclass(frozen=True)
class TlsFiles:
    cert: str | None = None
    key: str | None = None
    client_ca: str | None = None


def _readable(what: str, path: Path) -> str:
    if not path.is_file():
        raise SpecError(f"{what}: {path} is not a readable file", field=what)
    return str(path)


def tls_options(settings: "Settings") -> TlsFiles:
    """The HTTPS files from the settings (certificate and key both, or neither: said plainly).
    Plain HTTP beyond loopback is refused — every token would cross the network in clear —
    unless ``allow_plain_http``, and then said in a warning."""
    cert, key, client_ca = (
        settings.tls_cert_file,
        settings.tls_key_file,
        settings.tls_client_ca_file,
    )
    if (cert is None) != (key is None):
        raise SpecError("tls_cert_file and tls_key_file: give both (HTTPS), or neither")
    if cert is not None and key is not None:
        return TlsFiles(
            _readable("tls_cert_file", cert),
            _readable("tls_key_file", key),
            _readable("tls_client_ca_file", client_ca) if client_ca is not None else None,
        )
    if client_ca is not None:
        raise SpecError(
            "tls_client_ca_file: mutual TLS needs HTTPS (tls_cert_file and tls_key_file)",
            field="tls_client_ca_file",
        )
    if settings.host not in LOOPBACK:
        where = f"plain HTTP on {settings.host}:{settings.port}: tokens cross the network in clear"
        if not settings.allow_plain_http:
            raise SpecError(
                f"{where}; serve HTTPS with --tls-cert and --tls-key (tls_cert_file, "
                "tls_key_file; gpupool cert create makes them), or allow plain HTTP behind a "
                "TLS proxy with --allow-plain-http (allow_plain_http, "
                "GPUPOOL_ALLOW_PLAIN_HTTP=true) (docs/operations.md)",
                field="host",
            )
        typer.echo(f"warning: serving {where} (allow_plain_http)", err=True)
    return TlsFiles()


def uvicorn_tls(tls: TlsFiles) -> dict[str, Any]:
    """uvicorn's keyword arguments for ``tls`` (none for plain HTTP)."""
    if tls.cert is None or tls.key is None:
        return {}
    from gpupool.server.tls_reload import ReloadingContext

    options: dict[str, Any] = {
        "ssl_certfile": tls.cert,
        "ssl_keyfile": tls.key,
        "ssl_context_factory": ReloadingContext(tls.cert, tls.key, client_ca=tls.client_ca),
    }
    if tls.client_ca is not None:
        from gpupool.server.client_certs import PeerCertProtocol

        options["http"] = PeerCertProtocol
    return options

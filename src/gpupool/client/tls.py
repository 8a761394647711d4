"""Whom a client trusts when it speaks HTTPS to a gpupool server: the system's certificate
authorities, or a CA file of the site's own (a self-signed control plane)."""

import functools
import os
import ssl
from pathlib import Path

import httpx

from gpupool.model import SpecError


def system_trust() -> ssl.SSLContext:
    """The system's authorities as httpx trusts them by default (``SSL_CERT_FILE`` and
    ``SSL_CERT_DIR`` honoured), made once per process: each costs ~30 ms, and a process
    that makes many clients (the CLI run in-process, a dashboard) paid it for every one."""
    return _system_context(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


@functools.lru_cache(maxsize=4)
def _system_context(cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    return httpx.create_ssl_context()


def trust(
    ca_file: str | Path | None, cert_file: str | None = None, key_file: str | None = None
) -> ssl.SSLContext | bool:
    """``verify`` for httpx (and ``ssl`` for a WebSocket): the CA file's context, or True (the
    system's authorities) without one; a CA file that cannot be read is said plainly. A
    certificate in the file is trusted as it is, an intermediate or the server's own too (what
    ``gpupool join`` wrote when the server's chain file holds no CA; Python 3.13's default).
    ``cert_file``/``key_file``: a client certificate presented to the server (mutual TLS)."""
    if not ca_file and not cert_file:
        return True
    try:
        context = ssl.create_default_context(cafile=str(ca_file) if ca_file else None)
    except (OSError, ssl.SSLError) as exc:
        raise SpecError(f"CA file {ca_file}: {exc}", field="ca") from None
    if cert_file:
        try:
            context.load_cert_chain(cert_file, key_file)
        except (OSError, ssl.SSLError) as exc:
            raise SpecError(
                f"client certificate {cert_file} (key {key_file}): {exc}", field="tls_cert"
            ) from None
    return _as_anchors(context) if ca_file else context


def trust_chain(chain: str) -> ssl.SSLContext:
    """``trust`` for certificates in hand (PEM) rather than in a file."""
    return _as_anchors(ssl.create_default_context(cadata=chain))


def _as_anchors(context: ssl.SSLContext) -> ssl.SSLContext:
    context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
    return context

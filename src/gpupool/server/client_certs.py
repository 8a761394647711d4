"""Mutual TLS for agents (``tls_client_ca_file``): a token alone no longer runs a node — its
agent must also present a certificate of the site's CA naming that node, so a token copied off
a host is useless elsewhere. People, the CLI and joining servers present none and are not
asked for one (the handshake asks, CERT_OPTIONAL; only agents' calls are refused without).

uvicorn does not put the peer's certificate in the ASGI scope; ``PeerCertProtocol`` (uvicorn's
HTTP protocol with one addition) puts the verified certificate of each connection into the
state every request of that connection starts with — WebSocket upgrades included, which
inherit it."""

import asyncio
from functools import lru_cache
from typing import Any

from cryptography import x509
from cryptography.x509.oid import NameOID
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

TLS_PEER = "gpupool_tls_peer"  # the connection's verified client certificate (DER) or None


class PeerCertProtocol(HttpToolsProtocol):
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        tls = transport.get_extra_info("ssl_object")
        der = tls.getpeercert(binary_form=True) if tls is not None else None
        self.app_state = {**self.app_state, TLS_PEER: der}


@lru_cache(maxsize=4096)
def names(der: bytes) -> frozenset[str]:
    """The common name and DNS names a certificate gives (remembered: every call of an
    agent over a connection presents the same certificate)."""
    cert = x509.load_der_x509_certificate(der)
    found = {str(a.value) for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)}
    try:
        alt = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        found |= set(alt.get_values_for_type(x509.DNSName))
    except x509.ExtensionNotFound:
        pass
    return frozenset(found)


def agent_refusal(state: dict[str, Any], node: str | None) -> str | None:
    """Why an agent's call is refused under mutual TLS, or None: no certificate, or one that
    names another node (a token scoped to every node, ``*``, needs a certificate only)."""
    der = state.get(TLS_PEER)
    if not der:
        return (
            "this server needs agents to present a client certificate of its CA naming their "
            "node (mutual TLS): give the agent --tls-cert and --tls-key "
            "(gpupool cert create --client NODE)"
        )
    if node in (None, "*"):
        return None
    named = names(der)
    if node not in named:
        return (
            f"the client certificate names {', '.join(sorted(named)) or 'nothing'}, not node "
            f"{node}: each node presents its own"
        )
    return None

"""Who is calling: the address the connection comes from, or — only when that address is one
of the proxies the operator configured (setting ``trusted_proxies``) — the client a proxy
names in ``X-Forwarded-For`` / ``X-Forwarded-Proto``. Any other caller's forwarding headers
are ignored: a job on the node could otherwise claim to be anyone (and dodge the
failed-authentication throttle, or pass the loopback check of ``/metrics``).

uvicorn's own proxy-header handling is turned off where gpupool starts it (it trusts
127.0.0.1 by default, which on a node running jobs is everyone).
"""

import ipaddress
from collections.abc import Sequence

from starlette.requests import HTTPConnection


def _in(address: str, proxies: Sequence[str]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    for entry in proxies:
        try:
            if ip in ipaddress.ip_network(entry, strict=False):
                return True
        except ValueError:
            continue
    return False


def forwarded_client(peer: str, header: str | None, proxies: Sequence[str]) -> str:
    """The first address, from the right of ``X-Forwarded-For``, that is not a trusted proxy
    (the rightmost hops were added by our proxies; what is left of them the client wrote)."""
    if not proxies or not _in(peer, proxies) or not header:
        return peer
    hops = [h.strip() for h in header.split(",") if h.strip()]
    for hop in reversed(hops):
        if not _in(hop, proxies):
            return hop
    return hops[0] if hops else peer


def client_address(conn: HTTPConnection) -> str:
    peer = conn.client.host if conn.client else ""
    proxies = conn.app.state.ctx.settings.trusted_proxies
    return forwarded_client(peer, conn.headers.get("x-forwarded-for"), proxies)


def is_https(conn: HTTPConnection) -> bool:
    """HTTPS as the client sees it: ``X-Forwarded-Proto`` counts only from a trusted proxy."""
    peer = conn.client.host if conn.client else ""
    proxies = conn.app.state.ctx.settings.trusted_proxies
    proto = conn.url.scheme
    if proxies and _in(peer, proxies):
        proto = conn.headers.get("x-forwarded-proto", proto)
    return proto.split(",")[0].strip() == "https"

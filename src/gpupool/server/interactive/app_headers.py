"""What of a request reaches a session's web app, and what of its answer reaches the browser
(docs/interactive.md, "Notebooks"; docs/security.md). Pure functions of header lists.

To the app: never the caller's ``Authorization``, the server's own cookies (the dashboard's
session, a notebook's pass, the language) or the dashboard's CSRF header; no hop-by-hop
header; ``Connection: close`` (one exchange a stream). From the app: a ``Set-Cookie`` is
kept only scoped to the notebook's path (its ``Path`` put under it, its ``Domain`` dropped,
the server's own names and ``__Host-`` names refused), and the headers that would act on the
whole origin — a service worker's wider scope, HSTS, ``Clear-Site-Data``, ``Alt-Svc`` — are
dropped."""

from gpupool.server.interactive.passes import COOKIE
from gpupool.server.session import CSRF_HEADER, SESSION_COOKIE

SERVER_COOKIES = frozenset({COOKIE, SESSION_COOKIE, "gpupool_lang"})
HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
     "transfer-encoding", "upgrade"}
)  # fmt: skip
NOT_TO_APP = HOP_BY_HOP | {"authorization", "cookie", "content-length", CSRF_HEADER.lower()}
NOT_FROM_APP = HOP_BY_HOP | {
    "set-cookie", "service-worker-allowed", "strict-transport-security", "clear-site-data",
    "alt-svc", "public-key-pins",
}  # fmt: skip


def app_cookies(cookie_header: str) -> str:
    """The ``Cookie`` header without the server's own cookies ("" if none is left)."""
    kept = []
    for part in cookie_header.split(";"):
        name = part.split("=", 1)[0].strip()
        if name and name not in SERVER_COOKIES:
            kept.append(part.strip())
    return "; ".join(kept)


def to_app(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The request's headers as the app gets them."""
    out = [(k, v) for k, v in headers if k.lower() not in NOT_TO_APP and k.lower() != "host"]
    host = next((v for k, v in headers if k.lower() == "host"), "localhost")
    cookies = app_cookies("; ".join(v for k, v in headers if k.lower() == "cookie"))
    out = [("Host", host), *out, ("Connection", "close")]
    if cookies:
        out.append(("Cookie", cookies))
    return out


def scoped_cookie(value: str, base: str) -> str | None:
    """The app's ``Set-Cookie`` value kept within ``base`` (the notebook's path, with its
    trailing slash), or None to drop it."""
    first, *attributes = value.split(";")
    name = first.split("=", 1)[0].strip()
    if not name or name in SERVER_COOKIES or name.startswith(("__Host-", "__Secure-")):
        return None
    kept = []
    for attribute in attributes:
        key = attribute.split("=", 1)[0].strip().lower()
        if key in ("domain", "path", "partitioned"):
            if key == "path":
                path = attribute.split("=", 1)[1].strip() if "=" in attribute else ""
                if path.startswith(base) and ".." not in path and "\\" not in path:
                    base = path
            continue
        kept.append(attribute.strip())
    return "; ".join([first.strip(), f"Path={base}", *kept])


def from_app(headers: list[tuple[bytes, bytes]], base: str) -> list[tuple[str, str]]:
    """The app's answer's headers as the browser gets them."""
    out = []
    for raw_name, raw_value in headers:
        name, value = raw_name.decode("latin-1"), raw_value.decode("latin-1")
        if name.lower() == "set-cookie":
            scoped = scoped_cookie(value, base)
            if scoped is not None:
                out.append((name, scoped))
        elif name.lower() not in NOT_FROM_APP:
            out.append((name, value))
    return out

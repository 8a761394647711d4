"""What of a request reaches a session's web app, and what of its answer reaches the browser
(docs/interactive.md, "Notebooks"; docs/security.md). Pure functions of header lists.

To the app: never the caller's ``Authorization``, the server's own cookies (the dashboard's
session, a notebook's pass, the language) or the dashboard's CSRF header; no hop-by-hop
header; ``Connection: close`` (one exchange a stream). From the app: a ``Set-Cookie`` is
kept only scoped to the notebook's path (its ``Path`` put under it, its ``Domain`` dropped,
the server's own names and ``__Host-`` names refused), and the headers that would act on the
whole origin — a service worker's wider scope, HSTS, ``Clear-Site-Data``, ``Alt-Svc`` — are
dropped, as are ``Refresh`` (a navigation no redirect check sees) and the app's
``Cache-Control`` (every answer is ``private, no-store``: it was made for one person's
credentials).

The app is served from the server's own origin, where the dashboard lives: its scripts are
the tenant's, and the person looking may be another member or an admin logged in to the
dashboard. So every answer also carries ``confinement``: a Content-Security-Policy (added to
the app's own; browsers enforce both) that lets its scripts connect, frame and post forms
only under the notebook's path, and sandboxes the page without popups (a popup of a
dashboard page would be same-origin, its DOM readable); and a redirect is let through only
as a relative reference inside the notebook's path (CSP ignores paths after a redirect, and
an absolute one may name this server in spellings no text comparison catches). See
docs/security.md, "Notebooks"."""

from urllib.parse import unquote, urljoin, urlsplit

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
    "alt-svc", "public-key-pins", "refresh", "cache-control",
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


SANDBOX = "sandbox allow-scripts allow-same-origin allow-forms allow-modals allow-downloads"


def confinement(base: str, host: str, https: bool) -> str:
    """The Content-Security-Policy added to every answer of the app under ``base``."""
    http, ws = ("https", "wss") if https else ("http", "ws")
    here = f"{http}://{host}{base} {ws}://{host}{base}"
    return (
        f"{SANDBOX}; connect-src {here}; frame-src {here} blob: data:; "
        f"worker-src {here} blob:; form-action {here}; object-src 'none'; "
        f"base-uri {http}://{host}{base}; frame-ancestors 'self'"
    )


def leaves(location: str, request_path: str, base: str) -> bool:
    """Whether a redirect to ``location`` may lead anywhere but the notebook's own path.

    Only a relative reference that stays under ``base`` is let through. Any absolute or
    scheme-relative one is refused, whatever host it names: comparing its host with the
    request's as text let ``127.0.0.1:08123``, ``0x7f.0.0.1``, ``user@host`` or an explicit
    default port through, which a browser reads as this very server, where a notebook's
    script then follows the redirect with the viewer's cookie (review finding F1). Anything
    a browser reads otherwise than Python (backslashes, control characters, white space) is
    refused too, as are dot segments, encoded or not."""
    if any(c == "\\" or ord(c) < 0x21 or ord(c) == 0x7F for c in location):
        return True
    parts = urlsplit(location)
    if parts.scheme or parts.netloc or location.startswith("//"):
        return True
    target = urlsplit(urljoin(f"http://notebook.invalid{request_path}", location))
    if target.netloc != "notebook.invalid":
        return True
    path = unquote(target.path)
    segments = path.split("/")
    if ".." in segments or "." in segments or "\\" in path:
        return True
    return not path.startswith(base)

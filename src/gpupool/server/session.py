"""Browser sessions for the dashboard: a session is a short-lived token of the user who
logged in, kept in an HttpOnly, SameSite=Strict cookie. A call that changes something with
the cookie (not a bearer header) must also carry the page's CSRF token in a header, which a
page of another site can neither read nor forge; its Origin, when sent, must be ours."""

import hashlib
import hmac

from fastapi import Request

from gpupool.server.client_address import is_https
from gpupool.server.errors import forbidden

SESSION_COOKIE = "gpupool_session"
LANG_COOKIE = "gpupool_lang"
CSRF_HEADER = "X-CSRF-Token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def csrf_token(session_token: str) -> str:
    """Derived from the session's secret: only a page served to this session knows it."""
    return hmac.new(session_token.encode(), b"gpupool-csrf", hashlib.sha256).hexdigest()[:40]


def same_origin(request: Request) -> bool:
    """True when the request sends no Origin (same-origin GETs, old browsers) or ours."""
    origin = request.headers.get("origin")
    if origin is None:
        return True
    host = request.headers.get("host", "")
    scheme = "https" if is_https(request) else "http"
    return origin == f"{scheme}://{host}"


def check_csrf(request: Request, session_token: str) -> None:
    """Raise 403 unless a cookie-authenticated change carries this session's CSRF token."""
    if request.method in SAFE_METHODS:
        return
    sent = request.headers.get(CSRF_HEADER, "")
    if not same_origin(request):
        raise forbidden("a browser session's change must come from this server's own pages")
    if not hmac.compare_digest(sent, csrf_token(session_token)):
        raise forbidden(f"a browser session's change needs its page's {CSRF_HEADER} header")

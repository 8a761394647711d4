"""What of a request reaches a notebook's app and what of its answer reaches the browser
(``server.interactive.app_headers``): pure functions, every case a hostile app or caller
would try."""

from gpupool.model.relay import FrameError, open_request
from gpupool.server.interactive.app_headers import (
    app_cookies,
    confinement,
    from_app,
    leaves,
    scoped_cookie,
    to_app,
)

BASE = "/api/v1/jobs/7/notebook/"


def test_the_callers_credentials_never_reach_the_app():
    sent = to_app([("Host", "gp.example"), ("Authorization", "Bearer gp_secret"),
                   ("Cookie", "gpupool_session=s; a=1; gpupool_notebook=n; gpupool_lang=zh"),
                   ("X-CSRF-Token", "t"), ("Connection", "keep-alive"),
                   ("Transfer-Encoding", "chunked"), ("Content-Length", "9"),
                   ("Accept", "text/html")])  # fmt: skip
    names = [k.lower() for k, _ in sent]
    assert ("Host", "gp.example") in sent and ("Accept", "text/html") in sent
    assert ("Cookie", "a=1") in sent and ("Connection", "close") in sent
    for gone in ("authorization", "x-csrf-token", "transfer-encoding", "content-length"):
        assert gone not in names, sent
    assert app_cookies("gpupool_session=s") == ""


def test_the_apps_cookies_stay_under_its_path():
    assert scoped_cookie("a=1; Path=/; HttpOnly", BASE) == f"a=1; Path={BASE}; HttpOnly"
    assert scoped_cookie("a=1; Domain=.example.com; Path=/api/", BASE) == f"a=1; Path={BASE}"
    assert scoped_cookie("a=1", BASE) == f"a=1; Path={BASE}"
    assert scoped_cookie(f"a=1; Path={BASE}lab/", BASE) == f"a=1; Path={BASE}lab/"
    assert scoped_cookie(f"a=1; Path={BASE}../../8/notebook/", BASE) == f"a=1; Path={BASE}"
    assert scoped_cookie("a=1; Path=/api/v1/jobs/70/notebook/", BASE) == f"a=1; Path={BASE}"
    for refused in ("gpupool_session=x; Path=/", "gpupool_notebook=x", "__Host-a=1; Path=/",
                    "__Secure-a=1", "=nameless"):  # fmt: skip
        assert scoped_cookie(refused, BASE) is None, refused


def test_headers_acting_on_the_whole_origin_are_dropped():
    out = from_app([(b"Content-Type", b"text/html"), (b"Service-Worker-Allowed", b"/"),
                    (b"Strict-Transport-Security", b"max-age=1"), (b"Clear-Site-Data", b"*"),
                    (b"Alt-Svc", b"h3"), (b"Set-Cookie", b"a=1; Path=/"),
                    (b"Transfer-Encoding", b"chunked")], BASE)  # fmt: skip
    assert out == [("Content-Type", "text/html"), ("Set-Cookie", f"a=1; Path={BASE}")]


def test_the_confinement_names_only_the_notebooks_path():
    csp = confinement(BASE, "gp.example:8443", https=True)
    assert f"connect-src https://gp.example:8443{BASE} wss://gp.example:8443{BASE};" in csp
    assert "allow-popups" not in csp and "allow-top-navigation" not in csp
    assert csp.startswith("sandbox allow-scripts allow-same-origin")


def test_only_a_relative_redirect_inside_the_notebook_is_let_through():
    """Review finding F1: the host of an absolute redirect was compared with the request's as
    text, so spellings a browser reads as this same server (a leading-zero port, another
    form of the address, userinfo, the default port written out) got through; now no
    absolute or scheme-relative redirect does, nor anything a browser reads otherwise."""
    assert not leaves("lab", BASE + "tree", BASE)
    assert not leaves(BASE + "lab", BASE, BASE)
    assert not leaves("?token=x", BASE + "tree", BASE)
    for out in (
        "/api/v1/jobs",
        "../../8/notebook/",
        "%2e%2e/%2e%2e/8/notebook/",
        "./../x",
        "//gp.example/jobs",
        "http://GP.example/ui/session",
        "http://127.0.0.1:08123/api/v1/tenants",
        "http://0x7f.0.0.1:8123/api/v1/tenants",
        "http://2130706433:8123/api/v1/tenants",
        "http://127.1:8123/api/v1/tenants",
        "http://user@127.0.0.1:8123/api/v1/tenants",
        "https://pool.example:443/api/v1/tenants",
        "https://elsewhere.example/x",
        "/\\gp.example/x",
        "\\\\gp.example/x",
        "/api/v1/jobs/7/notebook/\t/../../x",
        " /api/v1/jobs",
        "HTTP:/api/v1/jobs",
    ):
        assert leaves(out, BASE + "tree", BASE), out


def test_a_port_stream_names_no_port():
    assert open_request({"t": "open", "kind": "port", "port": 22}) == {"kind": "port"}
    try:
        open_request({"t": "open", "kind": "socket"})
    except FrameError as exc:
        assert "port" in str(exc)
    else:
        raise AssertionError("an unknown kind was taken")

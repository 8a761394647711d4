"""``ApiClient``: httpx with the bearer token, and errors a person can read."""

import os
import ssl
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from gpupool import __version__
from gpupool.client import profiles
from gpupool.client.profiles import DEFAULT_PROFILE
from gpupool.client.tls import system_trust, trust, trust_chain
from gpupool.model import SpecError
from gpupool.model.versions import CLI_PRODUCT, user_agent


class ClientError(Exception):
    """A failed call, with the HTTP status (0 when the server could not be reached) and the
    request field the server named (its answer's ``field``), if any."""

    def __init__(self, message: str, status: int = 0, field: str | None = None):
        super().__init__(message)
        self.status = status
        self.field = field
        self.options: dict[str, str] = {}  # field -> the option it was sent as (a CLI's)


def save_credentials(
    server: str, token: str, profile: str = DEFAULT_PROFILE, ca: str | None = None
) -> Path:
    """Save a server and token (and the CA it is trusted from, PEM) as ``profile`` and make
    it current (mode 0600)."""
    return profiles.save(profile, server, token, ca)


def load_credentials() -> tuple[str, str | None]:
    """Server URL and token for a command (``gpupool.client.profiles`` says which wins)."""
    try:
        return profiles.credentials()
    except profiles.ProfileError as exc:
        raise ClientError(str(exc)) from None


def explain(resp: httpx.Response) -> str:
    try:
        body = resp.json()
    except ValueError:
        return resp.text[:200] or resp.reason_phrase
    if isinstance(body, dict) and "detail" in body:
        return str(body["detail"])
    return str(body)[:200]


def _field(resp: httpx.Response) -> str | None:
    """The field an error answer names (``{"detail": ..., "field": ...}``), if any."""
    try:
        body = resp.json()
    except ValueError:
        return None
    field = body.get("field") if isinstance(body, dict) else None
    return field if isinstance(field, str) and field else None


def server_url(server: str) -> str:
    """The server's URL as given, or a ClientError saying what is wrong with it (httpx's own
    words were "Request URL is missing an 'http://' or 'https://' protocol")."""
    url = server.strip().rstrip("/")
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise ClientError(f"server {server!r} has no scheme: did you mean http://{url}?")
    if scheme not in ("http", "https") or not rest:
        raise ClientError(f"server {server!r}: expected http://HOST:PORT or https://HOST:PORT")
    return url


CA_ENV = "GPUPOOL_CA"  # a CA file the CLI trusts for an HTTPS server (a site's own CA)


def read_ca(path: str, what: str = CA_ENV) -> str:
    """The PEM certificates of a CA file (to keep in a profile), or a clear error."""
    try:
        text = Path(path).read_text()
        trust_chain(text)
    except (OSError, UnicodeDecodeError, ssl.SSLError, ValueError) as exc:
        raise ClientError(f"{what}: {path} is not a readable CA file ({exc})") from None
    return text


class ApiClient:
    def __init__(
        self, server: str, token: str | None, *, timeout: float = 30.0, ca: str | None = None
    ):
        """``ca``: the PEM of the CA the server is trusted from (a profile's, ``--ca``);
        without it the file ``GPUPOOL_CA`` names, else the system's authorities."""
        headers = {"User-Agent": user_agent(CLI_PRODUCT, __version__)}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self.server = server_url(server)
        verify: ssl.SSLContext | bool
        try:
            verify = trust_chain(ca) if ca else trust(os.environ.get(CA_ENV))
            if verify is True:
                verify = system_trust()
        except SpecError as exc:
            raise ClientError(f"{CA_ENV}: {exc}") from None
        except (ssl.SSLError, ValueError) as exc:
            raise ClientError(f"the CA saved with this profile: {exc}") from None
        self.http = httpx.Client(
            base_url=self.server, headers=headers, timeout=timeout, verify=verify
        )

    @classmethod
    def from_env(cls) -> "ApiClient":
        server, token = load_credentials()
        if os.environ.get(CA_ENV):  # named for this command: it wins over the profile's
            return cls(server, token)
        try:
            ca = profiles.ca_for(server_url(server))
        except profiles.ProfileError as exc:
            raise ClientError(str(exc)) from None
        return cls(server, token, ca=ca)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> "ApiClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            resp = self.http.request(method, path, **kwargs)
        except httpx.ConnectError as exc:
            if "CERTIFICATE_VERIFY_FAILED" in str(exc):
                raise ClientError(
                    f"the server at {self.server} shows a certificate this client does not "
                    f"trust (CERTIFICATE_VERIFY_FAILED): set {CA_ENV} to its CA file, or keep "
                    "it in your profile: gpupool login --ca FILE ..."
                ) from None
            raise ClientError(f"cannot reach the gpupool server at {self.server}") from None
        except httpx.TimeoutException:
            raise ClientError(f"the gpupool server at {self.server} did not answer") from None
        except httpx.HTTPError as exc:
            raise ClientError(f"request to {self.server} failed: {exc}") from None
        if resp.status_code == 401:
            raise ClientError(f"401 not logged in: {explain(resp)} (gpupool login)", 401)
        if resp.status_code >= 400:
            raise ClientError(f"{resp.status_code} {explain(resp)}", resp.status_code, _field(resp))
        if resp.status_code == 204 or not resp.content:
            return None
        kind = resp.headers.get("content-type", "")
        if kind.startswith("application/json"):
            return resp.json()
        if kind.startswith("application/pdf"):
            return resp.content  # a document's bytes
        return resp.text

    def server_version(self) -> str | None:
        """The server's release, from the version header of its health check."""
        try:
            resp = self.http.get("/healthz", timeout=10)  # a busy server still answers
        except httpx.HTTPError:
            return None
        return resp.headers.get("gpupool-version")

    def get(self, path: str, **params: Any) -> Any:
        return self.call("GET", path, params={k: v for k, v in params.items() if v is not None})

    def post(self, path: str, body: Any = None, **kwargs: Any) -> Any:
        return self.call("POST", path, json=body, **kwargs)

    def put(self, path: str, body: Any) -> Any:
        return self.call("PUT", path, json=body)

    def patch(self, path: str, body: Any) -> Any:
        return self.call("PATCH", path, json=body)

    def delete(self, path: str) -> Any:
        return self.call("DELETE", path)


def wait_until_healthy(
    url: str,
    alive: Callable[[], bool],
    timeout: float = 60,
    verify: ssl.SSLContext | bool = True,
) -> None:
    """Poll ``url``/healthz until it answers 200; ``alive`` says whether the server process
    still runs (a dead one fails at once instead of after ``timeout``); ``verify``: whom an
    HTTPS server's certificate is trusted from."""
    deadline = time.monotonic() + timeout
    while True:
        if not alive():
            raise ClientError(f"the server at {url} exited before it was ready")
        try:
            if httpx.get(url + "/healthz", timeout=1, verify=verify).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise ClientError(f"the server at {url} was not ready within {timeout:g} s")
        time.sleep(0.1)

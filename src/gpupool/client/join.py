"""The joining server's side of ``gpupool join``: trust the server by its pinned certificate,
trade the bootstrap token for the node's own credential, and write what the agent's service
reads (``deploy/systemd/gpupool-agent.service``'s environment file, and the server's chain as
the CA to trust from then on).

The first contact cannot verify the server the usual way — the new machine does not know the
site's CA yet — so, as ``kubeadm join`` does, it fetches the server's chain without verifying,
accepts it only if one of its certificates has the fingerprint the admin handed over, and then
talks to the server over TLS verified against that chain: the bootstrap token is sent only to
a server holding the key of a certificate the admin vouched for."""

import os
import ssl
from dataclasses import dataclass
from pathlib import Path

import httpx

from gpupool.client.http import CA_ENV, ClientError, explain, server_url
from gpupool.client.tls import trust, trust_chain
from gpupool.model.cert_pins import certificates, normal_pin, pinned


@dataclass(frozen=True)
class Joined:
    server: str
    node: str
    token: str  # the node's own credential
    chain: str | None  # the server's certificates (https), the CA the agent trusts


def fetch_pinned_chain(url: str, pin: str, timeout_s: float) -> str:
    """The server's chain, if a certificate in it has the fingerprint ``pin``."""
    try:
        resp = httpx.get(url + "/api/v1/join/ca", verify=False, timeout=timeout_s)
    except httpx.HTTPError as exc:
        raise ClientError(f"cannot reach {url}: {exc}") from None
    if resp.status_code != 200:
        raise ClientError(f"{url} gave no certificate chain: {resp.status_code} {explain(resp)}")
    chain = resp.text
    if not certificates(chain):
        raise ClientError(f"{url} answered /api/v1/join/ca with no PEM certificate")
    if not pinned(chain, pin):
        raise ClientError(
            f"no certificate of {url} has the fingerprint {pin}: not sending it the token "
            "(someone else may be answering; check the address and the --ca-hash)"
        )
    return chain


def join(server: str, token: str, node: str, pin: str | None, timeout_s: float = 30) -> Joined:
    url = server_url(server)
    chain: str | None = None
    verify: ssl.SSLContext | bool = True
    if url.startswith("https://") and pin is not None:
        try:
            wanted = normal_pin(pin)
        except ValueError as exc:
            raise ClientError(f"--ca-hash: {exc}") from None
        chain = fetch_pinned_chain(url, wanted, timeout_s)
        verify = trust_chain(chain)
    elif url.startswith("https://"):  # a certificate trusted here already (a public CA, GPUPOOL_CA)
        verify = trust(os.environ.get(CA_ENV))
    elif pin is not None:
        raise ClientError(f"--ca-hash pins an https:// server's certificate; {url} is plain HTTP")
    try:
        resp = httpx.post(
            url + "/api/v1/join", json={"token": token, "node": node}, verify=verify,
            timeout=timeout_s,
        )  # fmt: skip
    except httpx.ConnectError as exc:
        if "CERTIFICATE_VERIFY_FAILED" in str(exc):
            raise ClientError(
                f"{url} shows a certificate not trusted here: give --ca-hash (gpupool node "
                f"token create prints it) or {CA_ENV}"
            ) from None
        raise ClientError(f"cannot join through {url}: {exc}") from None
    except httpx.HTTPError as exc:
        raise ClientError(f"cannot join through {url}: {exc}") from None
    if resp.status_code != 200:
        raise ClientError(f"{resp.status_code} {explain(resp)}", resp.status_code)
    return Joined(url, node, resp.json()["token"], chain)


def write_join(joined: Joined, env_file: Path, ca_file: Path) -> list[Path]:
    """The agent service's environment file (mode 0600: it holds the credential) and, for an
    https:// server, the CA file it names; returns what was written."""
    lines = [f"GPUPOOL_SERVER={joined.server}", f"GPUPOOL_NODE={joined.node}"]
    written = []
    if joined.chain is not None:
        ca_file.parent.mkdir(parents=True, exist_ok=True)
        ca_file.write_text(joined.chain)
        written.append(ca_file)
        lines.append(f"GPUPOOL_CA={ca_file}")
    lines.append(f"GPUPOOL_AGENT_TOKEN={joined.token}")
    env_file.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(env_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.chmod(env_file, 0o600)  # an existing file keeps its mode through O_CREAT
    return [env_file, *written]

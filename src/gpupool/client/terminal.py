"""A terminal of an interactive session, as a client holds it (``gpupool shell``, ``exec``,
``attach``, ``srun``; the tests): the WebSocket ``/api/v1/jobs/{id}/terminal`` of the
server, opened with the API client's server, token and trust (docs/interactive.md)."""

import json
import ssl
from typing import Any

from websockets.exceptions import InvalidStatus, WebSocketException
from websockets.sync.client import ClientConnection, connect

from gpupool.client.http import ApiClient, ClientError
from gpupool.model.relay import CHUNK, MAX_CONTROL


def terminal_url(server: str, job_id: int) -> str:
    return "ws" + server.rstrip("/").removeprefix("http") + f"/api/v1/jobs/{job_id}/terminal"


def refusal(exc: InvalidStatus) -> str:
    """The server's reason for refusing the upgrade (its JSON ``detail``), or its status."""
    body = exc.response.body or b""
    try:
        detail = json.loads(body).get("detail")
    except (ValueError, AttributeError):
        detail = None
    return f"{exc.response.status_code} {detail or exc.response.reason_phrase}"


def open_terminal(
    api: ApiClient,
    job_id: int,
    *,
    command: list[str] | None = None,
    pty: bool = True,
    cols: int = 80,
    rows: int = 24,
    term: str = "xterm-256color",
    attach: int | str | None = None,
    timeout: float = 30.0,
) -> tuple[ClientConnection, dict[str, Any]]:
    """Connect and open a terminal; (the socket, the server's ``opened`` frame). Raises
    ClientError with the server's words (403 for another tenant's session)."""
    url = terminal_url(api.server, job_id)
    tls = api.verify if isinstance(api.verify, ssl.SSLContext) else None
    headers = {"Authorization": f"Bearer {api.token}"} if api.token else {}
    try:
        # entered, not used in a with-block: the caller holds the socket (websockets 17
        # warns about a connect() that is neither)
        ws = connect(
            url, additional_headers=headers, ssl=tls if url.startswith("wss:") else None,
            open_timeout=timeout, close_timeout=2, max_size=MAX_CONTROL + CHUNK + 16,
            compression=None,
        ).__enter__()  # fmt: skip
    except InvalidStatus as exc:
        raise ClientError(refusal(exc), exc.response.status_code) from None
    except (OSError, TimeoutError, WebSocketException) as exc:
        raise ClientError(f"cannot reach the gpupool server at {api.server}: {exc}") from None
    frame = {"t": "open", "command": command, "pty": pty, "cols": cols, "rows": rows,
             "term": term, "attach": attach}  # fmt: skip
    try:
        ws.send(json.dumps(frame))
        answer = ws.recv(timeout=timeout)
    except (OSError, TimeoutError, WebSocketException) as exc:
        ws.close()
        raise ClientError(f"job {job_id}: the terminal did not open: {exc}") from None
    reply = json.loads(answer) if isinstance(answer, str) else {}
    if reply.get("t") != "opened":
        ws.close()
        raise ClientError(f"job {job_id}: {reply.get('detail') or 'the terminal did not open'}",
                          409)  # fmt: skip
    return ws, reply

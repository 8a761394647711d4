"""The agent's side of the REST API: a thin client that turns transport problems into
``AgentApiError`` so the agent's loop retries instead of dying."""

import logging
import ssl
from typing import Any

import httpx

from gpupool import __version__
from gpupool.model.protocol import OrdersOut, OrdersUnreadable, read_orders
from gpupool.model.versions import AGENT_PRODUCT, Skew, judge_skew, user_agent

log = logging.getLogger("gpupool.agent")


class AgentApiError(Exception):
    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


def agent_client(
    server: str, token: str, timeout_s: float = 10, verify: ssl.SSLContext | bool = True
) -> httpx.Client:
    """The HTTP client an agent talks to the server with. It may hold one connection in a
    long poll for orders while it heartbeats on another. ``verify``: a TLS context to share
    between the clients of many agents in one process."""
    connections = 8
    return httpx.Client(
        base_url=server.rstrip("/") + "/api/v1",
        headers={
            "Authorization": f"Bearer {token}",
            "User-Agent": user_agent(AGENT_PRODUCT, __version__),  # the server judges skew
        },
        timeout=timeout_s,
        verify=verify,
        # idle connections are dropped before the server's keep-alive (5 s) closes them under
        # a request: heartbeats every 5 s would otherwise meet "server disconnected"
        limits=httpx.Limits(
            max_connections=connections, max_keepalive_connections=connections, keepalive_expiry=4.0
        ),
    )


def server_list(server: str) -> list[str]:
    """The servers an agent may talk to: one URL, or several separated by commas (servers of
    one database: any of them answers an agent)."""
    servers = [s.strip().rstrip("/") for s in server.split(",") if s.strip()]
    return servers or [server]


class AgentApi:
    def __init__(
        self,
        server: str,
        token: str,
        node: str,
        timeout_s: float = 10,
        client: httpx.Client | None = None,
        verify: ssl.SSLContext | bool = True,
    ):
        self.node = node
        self.verify = verify  # whom it trusts over HTTPS (its channel too)
        self._plain = False  # the server refused newer telemetry fields once
        self._plain_reports = False  # ... and a workload's start in a status report
        self._own = client is None
        self.servers = server_list(server)
        self._current = 0
        self.server_version: str | None = None  # from the last answer's Gpupool-Version
        self.http = (
            client
            if client is not None
            else agent_client(self.servers[0], token, timeout_s, verify)
        )

    @property
    def server(self) -> str:
        """The server talked to now."""
        return self.servers[self._current]

    def _next_server(self, failed: str) -> None:
        """``failed`` could not be reached: the next call goes to the next server (a standby,
        another address of the same control plane) — once, however many calls in flight
        failed on it (the poller's and the heartbeat's both did, and moved back)."""
        if self._own and len(self.servers) > 1 and self.server == failed:
            self._current = (self._current + 1) % len(self.servers)
            self.http.base_url = httpx.URL(self.server + "/api/v1")

    def _heard_version(self, version: str | None) -> None:
        """A server of another release than this agent's is logged once per version heard
        (an upgrade in progress; the server refuses skew it does not support)."""
        if version is None or version == self.server_version:
            return
        self.server_version = version
        skew = judge_skew(version, __version__)
        if skew.skew is not Skew.SAME:
            log.warning("agent %s: %s", self.node, skew.explain())

    def close(self) -> None:
        if self._own:  # a shared client is closed by whoever made it
            self.http.close()

    def _call(
        self,
        method: str,
        path: str,
        body: Any = None,
        params: dict[str, Any] | None = None,
        timeout: float | None = None,
    ) -> Any:
        target = self.server  # what this call goes to, whatever other threads see meanwhile
        try:
            extra: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
            resp = self.http.request(method, path, json=body, params=params, **extra)
        except httpx.TransportError as exc:
            self._next_server(target)
            moved = f"; next: {self.server}" if self.server != target else ""
            raise AgentApiError(
                f"{method} {target}{path}: {type(exc).__name__}: {exc}{moved}"
            ) from None
        except httpx.HTTPError as exc:
            raise AgentApiError(f"{method} {path}: {type(exc).__name__}: {exc}") from None
        self._heard_version(resp.headers.get("gpupool-version"))
        if resp.status_code >= 300:
            try:
                detail = resp.json().get("detail", resp.text)
            except ValueError:
                detail = resp.text
            raise AgentApiError(f"{method} {path}: {resp.status_code} {detail}", resp.status_code)
        return resp.json() if resp.content else None

    def register(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._call("POST", "/nodes", body)

    # telemetry fields newer servers read; an older server's strict schema refuses them
    NEWER_FIELDS = ("mig", "mode", "mode_error")

    def heartbeat(self, devices: list[dict[str, Any]]) -> dict[str, Any]:
        """Send telemetry. A server older than this agent refuses the newer fields (422):
        the heartbeat goes again without them, and from then on, so a rolling upgrade that
        starts with the agents never lets a node look lost."""
        if self._plain:
            devices = [self._without_newer(d) for d in devices]
        try:
            return self._call("POST", f"/nodes/{self.node}/heartbeat", {"devices": devices})
        except AgentApiError as exc:
            newer = any(k in d for d in devices for k in self.NEWER_FIELDS)
            if exc.status != 422 or not newer:
                raise
            self._plain = True
            plain = [self._without_newer(d) for d in devices]
            return self._call("POST", f"/nodes/{self.node}/heartbeat", {"devices": plain})

    def _without_newer(self, device: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in device.items() if k not in self.NEWER_FIELDS}

    def orders(self, wait: float = 0.0, known: str | None = None) -> OrdersOut:
        """The node's orders; with ``wait`` and the last ``etag`` as ``known``, a long poll
        (servers without it answer at once and send no etag)."""
        if not wait or known is None:
            answer = self._call("GET", f"/nodes/{self.node}/orders")
        else:
            answer = self._call(
                "GET",
                f"/nodes/{self.node}/orders",
                params={"wait": wait, "known": known},
                timeout=wait + 15.0,
            )
        try:
            return read_orders(answer)
        except OrdersUnreadable as exc:
            raise AgentApiError(str(exc)) from None

    def reconcile(self, running: list[int]) -> dict[str, Any]:
        return self._call("POST", f"/nodes/{self.node}/reconcile", {"running": running})

    def report(self, alloc_id: int, generation: int, state: str, **extra: Any) -> bool:
        """Report a workload's state; False when the server refuses it as stale (409). A
        server older than this agent refuses the workload's ``started_at`` (422): the report
        goes again without it, and from then on (that server meters from when it hears)."""
        body = {"generation": generation, "state": state, **extra}
        if self._plain_reports:
            body.pop("started_at", None)
        try:
            self._call("POST", f"/allocations/{alloc_id}/status", body)
        except AgentApiError as exc:
            if exc.status == 422 and "started_at" in body and "started_at" in str(exc):
                self._plain_reports = True
                return self.report(alloc_id, generation, state, **extra)
            if exc.status in (404, 409):
                return False
            raise
        return True

    def checkpointed(self, alloc_id: int, generation: int, at: float) -> bool:
        """Pass on that a job saved a checkpoint; False when the server cannot take it (stale,
        gone, or a server older than this route)."""
        body = {"generation": generation, "at": at}
        try:
            self._call("POST", f"/allocations/{alloc_id}/checkpointed", body)
        except AgentApiError as exc:
            if exc.status in (404, 405, 409, 422):
                return False
            raise
        return True

    def readings(self, readings: list[dict[str, Any]]) -> None:
        """What the agent found looking at its replicas (``replica_watch``). A server older
        than this route (404, 405) probes them itself."""
        try:
            self._call("POST", f"/nodes/{self.node}/readings", {"readings": readings})
        except AgentApiError as exc:
            if exc.status not in (404, 405):
                raise

    def logs(self, alloc_id: int, stream: str, text: str) -> None:
        try:
            self._call("POST", f"/allocations/{alloc_id}/logs", {"stream": stream, "text": text})
        except AgentApiError as exc:
            if exc.status != 404:
                raise

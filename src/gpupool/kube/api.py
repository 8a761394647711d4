"""The API server over HTTPS: the calls gpupool makes, and typed errors.

Credentials come from a kubeconfig or the in-cluster service account, read by the official
client library's loaders (tokens, client certificates, exec plugins); the calls themselves go
through one thread-safe httpx client, which parses JSON without building typed models (a
list of 5,000 pods is read in a fraction of the time).
"""

import contextlib
import json
import socket
import ssl
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, cast

import httpx
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from gpupool.model import SpecError


class ApiError(Exception):
    def __init__(self, status: int, message: str, reason: str = ""):
        super().__init__(f"{status} {reason}: {message}".strip())
        self.status = status
        self.reason = reason
        self.message = message


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: str  # ADDED, MODIFIED, DELETED, BOOKMARK, ERROR
    object: dict[str, Any]


def _configuration(kubeconfig: str | None) -> k8s_client.Configuration:
    cfg = k8s_client.Configuration()
    if kubeconfig is None:
        try:
            k8s_config.load_incluster_config(client_configuration=cfg)
            return cfg
        except k8s_config.ConfigException:
            pass
    try:
        k8s_config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
    except (k8s_config.ConfigException, OSError, ValueError, TypeError) as exc:
        where = kubeconfig or "$KUBECONFIG / ~/.kube/config"
        raise SpecError(f"kubeconfig {where}: {exc}", field="kubeconfig") from None
    return cfg


class KubeApi:
    """The API server's REST calls gpupool needs. ``connections`` bounds parallel calls."""

    def __init__(self, kubeconfig: str | None = None, connections: int = 32, timeout_s: float = 30):
        self._cfg = _configuration(kubeconfig)
        try:
            context = ssl.create_default_context(cafile=self._cfg.ssl_ca_cert)
            if not self._cfg.verify_ssl:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            if self._cfg.cert_file:
                context.load_cert_chain(self._cfg.cert_file, self._cfg.key_file)
        except (OSError, ssl.SSLError) as exc:
            raise SpecError(f"kubeconfig: certificates not usable ({exc})") from None
        self.host = self._cfg.host
        self.http = httpx.Client(
            base_url=self._cfg.host,
            verify=context,
            timeout=timeout_s,
            limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
        )
        self._auth_at = 0.0
        self._auth: dict[str, str] = {}
        self._watching: set[socket.socket] = set()
        self._watching_lock = threading.Lock()
        self._watches_ended = False

    def end_watches(self) -> None:
        """End every watch, now and any begun after: its reader sees the end of the stream
        in its own thread.

        Closing the client under a watch instead frees the socket's number while its reader
        may still read it; the next connection that gets the number has its bytes taken."""
        with self._watching_lock:
            self._watches_ended = True
            for sock in self._watching:
                _shut(sock)

    def close(self) -> None:
        """Close the connections; call once no thread uses this client any more."""
        self.http.close()

    def _headers(self, content_type: str | None = None) -> dict[str, str]:
        now = time.monotonic()
        if now - self._auth_at > 60:  # in-cluster tokens rotate: the loader re-reads the file
            if self._cfg.refresh_api_key_hook is not None:
                self._cfg.refresh_api_key_hook(self._cfg)
            self._auth = {
                a["key"]: a["value"]
                for a in cast(dict[str, dict[str, Any]], self._cfg.auth_settings()).values()
                if a.get("in") == "header" and a.get("value")
            }
            self._auth_at = now
        headers = {"Accept": "application/json", **self._auth}
        if content_type:
            headers["Content-Type"] = content_type
        return headers

    def request(
        self,
        method: str,
        path: str,
        body: object = None,
        params: Mapping[str, Any] | None = None,
        content_type: str = "application/json",
        timeout_s: float | None = None,
    ) -> dict[str, Any]:
        """One call; ``timeout_s`` replaces the client's timeout for a call known to be long
        (a collection delete of thousands of objects)."""
        data = None if body is None else json.dumps(body, separators=(",", ":"))
        resp = self.http.request(
            method,
            path,
            content=data,
            params=params,
            headers=self._headers(content_type if data else None),
            timeout=httpx.USE_CLIENT_DEFAULT if timeout_s is None else timeout_s,
        )
        if resp.status_code >= 400:
            raise _error(resp.status_code, resp.content)
        return resp.json() if resp.content else {}

    # -- reads -------------------------------------------------------------------------
    def list(self, path: str, **params: Any) -> dict[str, Any]:
        """A whole collection, following ``continue`` tokens."""
        items: list[dict[str, Any]] = []
        query = {"limit": 2000, **params}
        while True:
            page = self.request("GET", path, params=query)
            items.extend(page.get("items") or [])
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                page["items"] = items
                return page
            query["continue"] = token

    def watch(self, path: str, resource_version: str, timeout_s: int = 300) -> Iterator[WatchEvent]:
        """Events after ``resource_version`` until the server ends the watch."""
        params = {
            "watch": "1",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout_s),
        }
        timeout = httpx.Timeout(10.0, read=timeout_s + 30)
        with self.http.stream(
            "GET", path, params=params, headers=self._headers(), timeout=timeout
        ) as resp:
            if resp.status_code >= 400:
                raise _error(resp.status_code, resp.read())
            stream = resp.extensions.get("network_stream")
            sock = stream.get_extra_info("socket") if stream is not None else None
            if sock is not None:
                with self._watching_lock:
                    self._watching.add(sock)
                    if self._watches_ended:
                        _shut(sock)
            try:
                for line in resp.iter_lines():
                    if line:
                        event = json.loads(line)
                        yield WatchEvent(event.get("type", ""), event.get("object") or {})
            finally:
                if sock is not None:
                    with self._watching_lock:
                        self._watching.discard(sock)

    # -- writes ------------------------------------------------------------------------
    def bind(
        self,
        namespace: str,
        name: str,
        node: str,
        annotations: Mapping[str, str] | None = None,
        uid: str = "",
    ) -> None:
        """Bind through the Binding subresource; its annotations are copied onto the pod.
        With ``uid``, only that pod (not one created since under the same name)."""
        meta = {"name": name, "namespace": namespace, "annotations": dict(annotations or {})}
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {**meta, "uid": uid} if uid else meta,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        self.request("POST", f"/api/v1/namespaces/{namespace}/pods/{name}/binding", body)

    def annotate_pod(
        self, namespace: str, name: str, annotations: Mapping[str, str | None], uid: str = ""
    ) -> dict[str, Any]:
        """Merge ``annotations`` in; with ``uid``, refused if the pod is another by now."""
        meta: dict[str, Any] = {"annotations": dict(annotations)}
        body = {"metadata": {**meta, "uid": uid} if uid else meta}
        return self.request(
            "PATCH",
            f"/api/v1/namespaces/{namespace}/pods/{name}",
            body,
            content_type="application/merge-patch+json",
        )

    def set_pod_condition(self, namespace: str, name: str, condition: Mapping[str, str]) -> None:
        """Add or replace one condition (by type) in the pod's status."""
        body = {"status": {"conditions": [dict(condition)]}}
        self.request(
            "PATCH",
            f"/api/v1/namespaces/{namespace}/pods/{name}/status",
            body,
            content_type="application/strategic-merge-patch+json",
        )

    def delete_pod(self, namespace: str, name: str, grace_s: int) -> None:
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": grace_s}
        self.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}", body)

    def create_event(self, event: Mapping[str, Any]) -> None:
        namespace = event["metadata"]["namespace"]
        self.request("POST", f"/api/v1/namespaces/{namespace}/events", event)


def reachable(api: KubeApi) -> str:
    """The API server's version, or a SpecError saying why it cannot be reached."""
    try:
        return str(api.request("GET", "/version").get("gitVersion", "?"))
    except httpx.HTTPError as exc:
        raise SpecError(f"cannot reach the API server at {api.host}: {exc}") from None
    except ApiError as exc:
        raise SpecError(f"the API server at {api.host} refused: {exc}") from None


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # the plain socket's: an SSLSocket's drops its TLS state
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


def _error(status: int, content: bytes) -> ApiError:
    try:
        body = json.loads(content)
        return ApiError(status, str(body.get("message", "")), str(body.get("reason", "")))
    except ValueError:
        return ApiError(status, content[:200].decode("utf-8", "replace"))

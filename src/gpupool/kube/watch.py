"""List + watch one collection into memory, as client-go's reflector does: list, then watch
from the list's resourceVersion; a watch the server ends is resumed from the last version
seen; "410 Gone" (too old) lists again. Objects are replaced, never changed in place, so a
snapshot is a plain list of references."""

import logging
import threading
from collections.abc import Callable
from typing import Any

import httpx

from gpupool.kube.api import ApiError, KubeApi

log = logging.getLogger(__name__)


def object_key(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name', '')}" if ns else str(meta.get("name", ""))


class Reflector:
    def __init__(
        self,
        api: KubeApi,
        path: str,
        on_change: Callable[[], None],
        watch_timeout_s: int = 60,
        on_event: Callable[[str, dict[str, Any]], None] | None = None,
    ):
        self.api = api
        self.path = path
        self.on_change = on_change
        self.watch_timeout_s = watch_timeout_s
        self.on_event = on_event  # (type, object) for each watched change, listed ones as ADDED
        self.items: dict[str, dict[str, Any]] = {}
        self.synced = threading.Event()
        self.relists = 0
        self._lock = threading.Lock()

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.items.values())

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            return self.items.get(key)

    def run(self, stop: threading.Event) -> None:
        backoff = 0.2
        while not stop.is_set():
            try:
                version: str | None = self._list()
                backoff = 0.2
                while version is not None and not stop.is_set():
                    version = self._watch(version, stop)  # None: too old, list again
            except (httpx.HTTPError, ApiError, ValueError) as exc:
                if stop.is_set():
                    return
                log.warning("watch %s: %s; again in %.1f s", self.path, exc, backoff)
                stop.wait(backoff)
                backoff = min(backoff * 2, 10.0)

    def _list(self) -> str:
        page = self.api.list(self.path)
        with self._lock:
            self.items = {object_key(o): o for o in page["items"]}
        if self.on_event is not None:
            for obj in page["items"]:
                self.on_event("ADDED", obj)
        self.relists += 1
        self.synced.set()
        self.on_change()
        return str(page["metadata"]["resourceVersion"])

    def _watch(self, version: str, stop: threading.Event) -> str | None:
        for event in self.api.watch(self.path, version, self.watch_timeout_s):
            if stop.is_set():
                return version
            obj = event.object
            if event.type == "ERROR":
                if obj.get("code") == 410:
                    return None
                raise ApiError(int(obj.get("code") or 500), str(obj.get("message", "")))
            version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
            if event.type == "BOOKMARK":
                continue
            key = object_key(obj)
            with self._lock:
                if event.type == "DELETED":
                    self.items.pop(key, None)
                else:
                    self.items[key] = obj
            if self.on_event is not None:
                self.on_event(event.type, obj)
            self.on_change()
        return version

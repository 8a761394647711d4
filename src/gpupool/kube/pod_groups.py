"""PodGroups as Volcano and the coscheduling plugin write them: a gang's size is its
PodGroup's ``spec.minMember``, so their manifests need no gpupool annotation. Read from the
API server every few seconds where the CRD exists (a cluster without Volcano answers 404:
looked for again once a minute); pure parsing in ``sizes_from``."""

import logging
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

from gpupool.kube.api import ApiError, KubeApi

log = logging.getLogger(__name__)
PATHS = (
    "/apis/scheduling.volcano.sh/v1beta1/podgroups",  # Volcano
    "/apis/scheduling.x-k8s.io/v1alpha1/podgroups",  # the coscheduling plugin
)
REFRESH_S = 5.0
ABSENT_RETRY_S = 60.0

GroupSizes = Mapping[tuple[str, str], int]  # (namespace, name) -> minMember


def sizes_from(items: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], int]:
    """minMember of each PodGroup that says one (a positive integer)."""
    out: dict[tuple[str, str], int] = {}
    for pg in items:
        meta, spec = pg.get("metadata") or {}, pg.get("spec") or {}
        size = spec.get("minMember")
        if isinstance(size, int) and size > 0 and meta.get("name"):
            out[(meta.get("namespace", ""), meta["name"])] = size
    return out


class PodGroups:
    def __init__(self, api: KubeApi):
        self.api = api
        self._sizes: dict[tuple[str, str], int] = {}
        self._read_at = 0.0
        self._absent_until: dict[str, float] = {}
        self._lock = threading.Lock()

    def sizes(self) -> dict[tuple[str, str], int]:
        """The PodGroups' sizes, read again when older than ``REFRESH_S``."""
        with self._lock:
            now = time.monotonic()
            if now - self._read_at >= REFRESH_S:
                self._read_at = now
                self._sizes = self._read(now)
            return self._sizes

    def _read(self, now: float) -> dict[tuple[str, str], int]:
        found: dict[tuple[str, str], int] = {}
        for path in PATHS:
            if self._absent_until.get(path, 0.0) > now:
                continue
            try:
                found.update(sizes_from(self.api.list(path).get("items") or []))
            except ApiError as exc:
                if exc.status in (403, 404):  # no such CRD here, or not ours to read
                    self._absent_until[path] = now + ABSENT_RETRY_S
                else:
                    log.warning("podgroups %s: %s", path, exc)
                    found.update(self._sizes)  # keep what was known
            except Exception as exc:  # the API away: keep what was known
                log.warning("podgroups %s: %s", path, exc)
                found.update(self._sizes)
        return found

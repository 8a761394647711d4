"""Leader election on a coordination.k8s.io Lease, as client-go's leaderelection does: the
holder renews ``renewTime`` every ``renew_s``; another candidate takes the lease once it has
not been renewed for ``duration_s``. Updates carry the resourceVersion read, so two candidates
never both win a race. Only the leader schedules; a standby keeps its watches warm."""

import logging
import threading
import time
from datetime import UTC, datetime
from typing import Any

from gpupool.kube.api import ApiError, KubeApi

log = logging.getLogger(__name__)


def _micro(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(text: str | None) -> float:
    if not text:
        return 0.0
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


class LeaderElector:
    def __init__(
        self,
        api: KubeApi,
        identity: str,
        namespace: str = "gpupool-system",
        name: str = "gpupool-scheduler",
        duration_s: int = 15,
        renew_s: float = 5.0,
    ):
        self.api = api
        self.identity = identity
        self.path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        self.namespace = namespace
        self.name = name
        self.duration_s = duration_s
        self.renew_s = renew_s
        self._leader_until = 0.0  # monotonic: lead no longer than our last renewal allows

    def is_leader(self) -> bool:
        return time.monotonic() < self._leader_until

    def try_acquire(self) -> bool:
        """One attempt to take or renew the lease; True while this process holds it."""
        started = time.monotonic()
        now = time.time()
        spec = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": self.duration_s,
            "renewTime": _micro(now),
        }
        try:
            lease = self.api.request("GET", f"{self.path}/{self.name}")
        except ApiError as exc:
            if exc.status != 404:
                raise
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": {**spec, "acquireTime": _micro(now), "leaseTransitions": 0},
            }
            return self._won(self.api.request("POST", self.path, body), started)
        held = lease.get("spec") or {}
        holder = held.get("holderIdentity")
        renewed = _parse(held.get("renewTime"))
        expired = now > renewed + int(held.get("leaseDurationSeconds") or self.duration_s)
        if holder not in (None, "", self.identity) and not expired:
            self._leader_until = 0.0
            return False
        if holder != self.identity:
            spec["acquireTime"] = _micro(now)
            spec["leaseTransitions"] = int(held.get("leaseTransitions") or 0) + 1
        lease["spec"] = {**held, **spec}
        try:
            updated = self.api.request("PUT", f"{self.path}/{self.name}", lease)
        except ApiError as exc:
            if exc.status == 409:  # someone else wrote it first
                self._leader_until = 0.0
                return False
            raise
        return self._won(updated, started)

    def _won(self, lease: dict[str, Any], started: float) -> bool:
        if (lease.get("spec") or {}).get("holderIdentity") != self.identity:
            return False
        # counted from before the request: a slow answer shortens, never lengthens, the lead
        self._leader_until = started + self.duration_s - self.renew_s
        return True

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                was = self.is_leader()
                now_leader = self.try_acquire()
                if now_leader != was:
                    log.info("%s %s the lease", self.identity, "holds" if now_leader else "lost")
            except Exception as exc:  # the API server away: keep trying, lead lapses by time
                log.warning("lease %s/%s: %s", self.namespace, self.name, exc)
            stop.wait(self.renew_s if self.is_leader() else self.renew_s / 2)

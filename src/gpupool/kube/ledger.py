"""Reports the cluster to the gpupool server, the state of record for usage and invoices
(``gpupool.server.kube_mirror``): its GPU nodes when they change, each pod gpupool bound (a
running job of the namespace's tenant holding its grant) and each such pod's end (succeeded,
failed, deleted, or preempted by gpupool), with the time it ended, so the server meters it.
Reports are idempotent (pods by UID); after a restart the server's list of running pods is
reconciled with the cluster, so a pod that ended meanwhile is ended there too."""

import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

import httpx

from gpupool.kube.config import KubeConfig
from gpupool.kube.grants import GrantKey, grant_of
from gpupool.kube.inventory import node_from_object
from gpupool.kube.pods import granted_pct, is_terminal, job_for, node_of, pod_key, uid_of
from gpupool.kube.policy import Policy
from gpupool.model import SpecError
from gpupool.scheduler.placement_json import placement_to_json
from gpupool.scheduler.types import Placement

log = logging.getLogger(__name__)
CLUSTER_LABEL = "gpupool.io/cluster"  # the server's mirrored nodes: which cluster's they are
MIRRORED_LABELS = (
    "kubernetes.io/hostname",
    "topology.kubernetes.io/zone",
    "nvidia.com/gpu.product",
)


def node_report(obj: Mapping[str, Any], cluster: str = "") -> dict[str, Any]:
    kn = node_from_object(obj)
    node = kn.node
    labels = {
        k: v for k, v in node.labels.items() if k in MIRRORED_LABELS or k.startswith("gpupool.io/")
    }
    labels.pop(CLUSTER_LABEL, None)  # the cluster's name is the settings', not a node's label
    if cluster:
        labels[CLUSTER_LABEL] = cluster
    return {
        "name": node.name,
        "cpu_millis": max(1, node.cpu_millis),
        "memory_mib": max(1, node.memory_mib),
        "labels": labels,
        "closed": kn.closed,
        "devices": [
            {
                "index": d.index,
                "model": d.model,
                "vendor": str(d.vendor),
                "memory_mib": d.memory_mib,
                "uuid": d.uuid,
                "healthy": d.healthy,
                "mode": str(d.mode),
                "island": d.island,
                "pcie_switch": d.pcie_switch,
            }
            for d in node.devices
        ],
    }


def bound_report(
    pod: Mapping[str, Any], config: KubeConfig, key: GrantKey
) -> dict[str, Any] | None:
    """What the server records of a pod gpupool bound; None when it is not one (or its grant
    does not verify: the scheduler evicts it)."""
    try:
        grant = grant_of(pod, key)
        if grant is None or grant[2].node != node_of(pod):
            return None
        job_id, policy, piece = grant
        job = job_for(pod, job_id, config, 1, granted_pct(piece))
    except SpecError:
        return None
    meta = pod.get("metadata") or {}
    conditions = (pod.get("status") or {}).get("conditions") or []
    scheduled: Mapping[str, Any] = next(
        (c for c in conditions if c.get("type") == "PodScheduled"), {}
    )
    return {
        "uid": uid_of(pod),
        "pod": pod_key(pod),
        "tenant": job.tenant,
        "request": job.request.to_spec(),
        "kind": str(job.kind),
        "priority_class": job.priority_class,
        "policy": policy,
        "placement": placement_to_json(Placement(job_id, (piece,), policy))["nodes"][0],
        "bound_at": _time(scheduled.get("lastTransitionTime")) or time.time(),
        "submitted_at": _time(meta.get("creationTimestamp")) or time.time(),
    }


def _time(raw: object) -> float | None:
    if not raw:
        return None
    try:
        return datetime.fromisoformat(str(raw).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def finished_at(pod: Mapping[str, Any]) -> float | None:
    times = (
        _time(((c.get("state") or {}).get("terminated") or {}).get("finishedAt"))
        for c in (pod.get("status") or {}).get("containerStatuses") or []
    )
    ends = [e for e in times if e is not None]
    return max(ends) if ends else None


class Ledger:
    def __init__(
        self,
        server: str,
        token: str,
        config: KubeConfig,
        nodes: Callable[[], list[dict[str, Any]]],
        pods: Callable[[], list[dict[str, Any]]],
        preempted: Mapping[str, str],
        interval_s: float = 5.0,
        is_leader: Callable[[], bool] = lambda: True,
        on_policy: Callable[[Policy], None] | None = None,
        *,
        key: GrantKey,
    ):
        self.http = httpx.Client(
            base_url=server.rstrip("/"), headers={"Authorization": f"Bearer {token}"}, timeout=30
        )
        self.config = config
        self.key = key
        self.nodes, self.pods, self.preempted = nodes, pods, preempted
        self.interval_s = interval_s
        self.is_leader = is_leader
        self.on_policy = on_policy  # given: the server's tenants are read with every report
        self.reported: set[str] | None = None  # UIDs the server holds as running
        self._nodes_hash = ""
        self.errors = 0

    def close(self) -> None:
        self.http.close()

    def _post(self, method: str, path: str, body: object) -> dict[str, Any]:
        params = {"cluster": self.config.cluster} if self.config.cluster else None
        resp = self.http.request(method, f"/api/v1/kubernetes{path}", json=body, params=params)
        if resp.status_code >= 400:
            raise httpx.HTTPStatusError(
                f"{resp.status_code}: {resp.text[:300]}", request=resp.request, response=resp
            )
        answer: dict[str, Any] = resp.json()
        return answer

    def sync(self, now: float | None = None) -> dict[str, int]:
        """One report: nodes if they changed, pods bound and ended since the last one."""
        now = time.time() if now is None else now
        if self.on_policy is not None:
            self.on_policy(Policy.from_server(self._post("GET", "/policy", None)))
        reports = []
        for obj in self.nodes():
            try:
                reports.append(node_report(obj, self.config.cluster))
            except SpecError:
                continue  # the scheduler logs it; the server keeps its last view
        digest = hashlib.sha256(json.dumps(reports, sort_keys=True).encode()).hexdigest()
        if digest != self._nodes_hash:
            self._post("PUT", "/nodes", {"nodes": reports})
            self._nodes_hash = digest
        if self.reported is None:
            self.reported = set(self._post("GET", "/pods", None)["live"])
        ours = [
            p for p in self.pods()
            if (p.get("spec") or {}).get("schedulerName") == self.config.scheduler_name
            and uid_of(p)
        ]  # fmt: skip
        by_uid = {uid_of(p): p for p in ours}
        bound = []
        for uid, pod in by_uid.items():
            if uid not in self.reported and not is_terminal(pod) and node_of(pod):
                report = bound_report(pod, self.config, self.key)
                if report is not None:
                    bound.append(report)
        ended = []
        for uid in self.reported:
            seen = by_uid.get(uid)
            if seen is not None and not is_terminal(seen):
                continue
            if seen is not None:
                phase = str((seen.get("status") or {}).get("phase"))  # terminal: it has one
                state = "succeeded" if phase == "Succeeded" else "failed"
                at, reason = finished_at(seen) or now, f"the pod {phase.lower()}"
            elif uid in self.preempted:
                state, at, reason = "preempted", now, self.preempted[uid]
            else:
                state, at, reason = "cancelled", now, "the pod was deleted"
            ended.append({"uid": uid, "state": state, "at": at, "reason": reason})
        if not bound and not ended:
            return {"bound": 0, "ended": 0}
        answer = self._post("POST", "/pods", {"bound": bound, "ended": ended})
        self.reported = set(answer["live"])
        return {"bound": answer["recorded"], "ended": answer["ended"]}

    def run(self, stop: threading.Event) -> None:
        while not stop.wait(self.interval_s):
            if not self.is_leader():
                self.reported = None  # read the server's view again when leading
                continue
            try:
                self.sync()
            except (httpx.HTTPError, ValueError, KeyError, SpecError) as exc:
                self.errors += 1
                log.warning("reporting to the gpupool server: %s", exc)

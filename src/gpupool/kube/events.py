"""Kubernetes Events gpupool writes about the objects it acts on (pods, Jobs)."""

import datetime as dt
from typing import Any

COMPONENT = "gpupool-scheduler"


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def event_body(
    involved: dict[str, str], reason: str, message: str, kind: str, instance: str
) -> dict[str, Any]:
    """An Event about ``involved`` (apiVersion, kind, namespace, name, uid); a cluster-scoped
    object (a Node: no namespace) has its Event in ``default``, as the kubelet's are."""
    now = now_iso()
    namespace = involved.get("namespace") or "default"
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{involved['name']}.", "namespace": namespace},
        "involvedObject": dict(involved),
        "reason": reason,
        "message": message[:1024],
        "type": kind,
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "reportingInstance": instance,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }

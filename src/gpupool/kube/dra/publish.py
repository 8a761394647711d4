"""What gpupool writes as a DRA driver (the I/O beside the pure ``slices``/``claims``): its
DeviceClasses once, each node's ResourceSlices when the node changes, each claim's allocation
before its pod is bound, and the deallocation of claims whose pods are all gone."""

import json
import logging
from collections.abc import Iterable, Mapping, Set
from typing import Any

from gpupool.kube.api import ApiError, KubeApi
from gpupool.kube.dra.claims import FINALIZER, ClaimWrite, stale
from gpupool.kube.dra.classes import device_classes
from gpupool.kube.dra.slices import DRIVER, resource_slices
from gpupool.model import Node

log = logging.getLogger(__name__)
V1 = "/apis/resource.k8s.io/v1"
SLICES = f"{V1}/resourceslices"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"


def claim_path(namespace: str, name: str) -> str:
    return f"{V1}/namespaces/{namespace}/resourceclaims/{name}"


class DraWriter:
    def __init__(self, api: KubeApi):
        self.api = api
        self.published: dict[str, tuple[str, int]] = {}  # node -> (its slices' JSON, generation)
        self.classes_made = False
        self.adopted = False  # the pools already on the API server read once

    def ensure_classes(self) -> None:
        if self.classes_made:
            return
        for body in device_classes():
            try:
                self.api.request("POST", f"{V1}/deviceclasses", body)
            except ApiError as exc:
                if exc.status != 409:  # made before (by us, or an operator's own version)
                    raise
        self.classes_made = True

    def publish(self, nodes: Iterable[Node]) -> int:
        """Each node's pool, written when it changed (a new generation); pools of nodes gone
        deleted. Returns how many pools were written."""
        if not self.adopted:
            self._adopt()
        written, seen = 0, set()
        for node in nodes:
            seen.add(node.name)
            body = json.dumps(resource_slices(node, 0), sort_keys=True)
            old = self.published.get(node.name)
            if old is not None and old[0] == body:
                continue
            generation = (old[1] if old else 0) + 1
            self._write_pool(node, generation)
            self.published[node.name] = (body, generation)
            written += 1
        for gone in set(self.published) - seen:
            self._delete_pool(gone)
            del self.published[gone]
        return written

    def _adopt(self) -> None:
        """Pools gpupool published before (a restart, another replica): kept as they are
        where they say what it would write, so a restart rewrites no unchanged pool."""
        listed = self.api.list(SLICES, fieldSelector=f"spec.driver={DRIVER}").get("items") or []
        pools: dict[str, list[dict[str, Any]]] = {}
        for s in listed:
            pools.setdefault(str(s["spec"]["pool"]["name"]), []).append(s)
        for node, slices in pools.items():
            slices.sort(key=lambda s: s["metadata"]["name"])
            generation = int(slices[0]["spec"]["pool"].get("generation", 0))
            as_written = [
                {
                    "apiVersion": s.get("apiVersion", "resource.k8s.io/v1"),
                    "kind": "ResourceSlice",
                    "metadata": {"name": s["metadata"]["name"]},
                    "spec": {**s["spec"], "pool": {**s["spec"]["pool"], "generation": 0}},
                }
                for s in slices
            ]
            self.published[node] = (json.dumps(as_written, sort_keys=True), generation)
        self.adopted = True

    def _write_pool(self, node: Node, generation: int) -> None:
        slices = resource_slices(node, generation)
        for s in slices:
            path = f"{SLICES}/{s['metadata']['name']}"
            try:
                self.api.request("PATCH", path, {"spec": s["spec"]}, content_type=MERGE)
            except ApiError as exc:
                if exc.status != 404:
                    raise
                self.api.request("POST", SLICES, s)
        self._delete_pool(node.name, keep={s["metadata"]["name"] for s in slices})

    def _delete_pool(self, node: str, keep: Set[str] = frozenset()) -> None:
        listed = self.api.list(SLICES, fieldSelector=f"spec.nodeName={node},spec.driver={DRIVER}")
        for s in listed.get("items") or []:
            if s["metadata"]["name"] not in keep:
                try:
                    self.api.request("DELETE", f"{SLICES}/{s['metadata']['name']}")
                except ApiError as exc:
                    if exc.status != 404:
                        raise

    def allocate(self, write: ClaimWrite, claim: Mapping[str, Any] | None) -> None:
        """The claim's finalizer (it is not deleted while allocated), then its allocation; for
        a pod joining a shared claim, the pod appended to its reservedFor (a JSON patch, so
        two pods joining at once both stay)."""
        path = claim_path(write.namespace, write.name)
        if write.join:
            (user,) = write.status["reservedFor"]
            reserved = ((claim or {}).get("status") or {}).get("reservedFor") or []
            if any(r.get("uid") == user["uid"] for r in reserved):
                return
            add = [{"op": "add", "path": "/status/reservedFor/-", "value": user}]
            self.api.request("PATCH", f"{path}/status", add, content_type=JSON_PATCH)
            return
        if write.create is not None and claim is None:
            try:
                claim = self.api.request(
                    "POST", f"{V1}/namespaces/{write.namespace}/resourceclaims", write.create
                )
            except ApiError as exc:
                if exc.status != 409:  # made by an earlier try: its name is the pod's
                    raise
                claim = self.api.request("GET", path)
        finalizers = list(((claim or {}).get("metadata") or {}).get("finalizers") or [])
        if FINALIZER not in finalizers:
            body = {"metadata": {"finalizers": [*finalizers, FINALIZER]}}
            self.api.request("PATCH", path, body, content_type=MERGE)
        self.api.request("PATCH", f"{path}/status", {"status": write.status}, content_type=MERGE)
        if write.pod_status is not None:  # where the kubelet finds the extended-resource claim
            self.api.request(
                "PATCH",
                f"/api/v1/namespaces/{write.namespace}/pods/{write.pod}/status",
                {"status": {"extendedResourceClaimStatus": write.pod_status}},
                content_type=MERGE,
            )

    def release(self, claims: Iterable[Mapping[str, Any]], live_pods: set[str]) -> int:
        """Deallocate claims of our driver whose pods are all gone; how many."""
        done = 0
        for claim in stale(claims, live_pods):
            meta = claim.get("metadata") or {}
            path = claim_path(str(meta.get("namespace")), str(meta.get("name")))
            try:
                body = {"status": {"allocation": None, "reservedFor": None}}
                self.api.request("PATCH", f"{path}/status", body, content_type=MERGE)
                kept = [f for f in meta.get("finalizers") or [] if f != FINALIZER]
                self.api.request(
                    "PATCH", path, {"metadata": {"finalizers": kept or None}}, content_type=MERGE
                )
                done += 1
            except ApiError as exc:
                if exc.status != 404:
                    log.warning("claim %s: not released: %s", meta.get("name"), exc)
        return done

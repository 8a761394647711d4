"""Node and Pod objects as the API server returns them, for the Kubernetes-mode tests."""

from typing import Any

from tests.support.paths import DATA

GFD_PRODUCTS = {"A100-80G": ("NVIDIA-A100-SXM4-80GB", 81920), "T4": ("Tesla-T4", 15360)}


def node_obj(
    name: str,
    gpus: int = 8,
    model: str = "A100-80G",
    *,
    cpu: str = "64",
    memory: str = "512Gi",
    ready: bool = True,
    unschedulable: bool = False,
    taints: list[dict[str, str]] | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    product, mem = GFD_PRODUCTS[model]
    all_labels = {
        "kubernetes.io/hostname": name,
        "nvidia.com/gpu.product": product,
        "nvidia.com/gpu.memory": str(mem),
        "nvidia.com/gpu.count": str(gpus),
        **(labels or {}),
    }
    capacity = {"cpu": cpu, "memory": memory, "pods": "110", "nvidia.com/gpu": str(gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": all_labels, "annotations": annotations or {}},
        "spec": {"unschedulable": unschedulable, "taints": taints or []},
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def pod_obj(
    name: str,
    namespace: str = "team-a",
    *,
    gpus: int = 0,
    request: str | None = None,
    cpu: str = "1",
    memory: str = "1Gi",
    scheduler: str = "gpupool",
    node: str | None = None,
    priority_class: str | None = None,
    priority: int | None = None,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    resources: dict[str, Any] = {"requests": {"cpu": cpu, "memory": memory}}
    if gpus:
        resources["limits"] = {"nvidia.com/gpu": str(gpus)}
    notes = dict(annotations or {})
    if request is not None:
        notes["gpupool.io/request"] = request
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [{"name": "main", "image": "busybox", "resources": resources}],
    }
    if node:
        spec["nodeName"] = node
    if priority_class:
        spec["priorityClassName"] = priority_class
    if priority is not None:
        spec["priority"] = priority
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{namespace}-{name}",
            "annotations": notes,
            "labels": labels or {},
        },
        "spec": spec,
        "status": {"phase": "Pending" if not node else "Running"},
    }


K8S_CORPUS = DATA / "k8s-corpus"


def pod_of(manifest: dict) -> dict:
    """The pod a manifest makes: itself, or its controller's pod template."""
    if manifest["kind"] == "Pod":
        pod = dict(manifest)
    else:
        template = manifest["spec"]["template"]
        pod = {"metadata": dict(template.get("metadata") or {}), "spec": template["spec"]}
    pod["metadata"] = {"namespace": "team-a", "name": "p", **(pod.get("metadata") or {})}
    return pod

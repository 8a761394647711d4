"""A real etcd + kube-apiserver on loopback for the Kubernetes-mode tests (RBAC on), started
by ``scripts/k8s-control-plane.sh`` from binaries cached outside the clone, and a helper that
plays the kubelet's part (Node objects with GPU capacity) through the admin identity."""

import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import yaml

from gpupool.kube.api import ApiError, KubeApi

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "k8s-control-plane.sh"
DEPLOY = ROOT / "deploy" / "kubernetes"
ENABLE = (
    "Kubernetes tests need kube-apiserver and etcd: install Go (they build from the module "
    "proxy, ~5-9 min once, cached in ~/.cache/gpupool/k8s) or run "
    "'scripts/k8s-control-plane.sh build'; CI sets GPUPOOL_REQUIRE_K8S=1"
)
PATHS = {
    "Namespace": "/api/v1/namespaces",
    "Node": "/api/v1/nodes",
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    "PriorityClass": "/apis/scheduling.k8s.io/v1/priorityclasses",
}
NAMESPACED = {
    "ServiceAccount": "serviceaccounts",
    "Role": "roles",
    "RoleBinding": "rolebindings",
    "Pod": "pods",
    "ConfigMap": "configmaps",
    "Deployment": "deployments",
}
GROUPS = {
    "Role": "/apis/rbac.authorization.k8s.io/v1",
    "RoleBinding": "/apis/rbac.authorization.k8s.io/v1",
    "Deployment": "/apis/apps/v1",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def binaries_available() -> bool:
    cache = Path(os.environ.get("GPUPOOL_K8S_CACHE", Path.home() / ".cache/gpupool/k8s"))
    cached = any((cache / v / "bin" / "kube-apiserver").exists() for v in _versions(cache))
    return cached or shutil.which("go") is not None or Path("/usr/local/go/bin/go").exists()


def _versions(cache: Path) -> list[str]:
    return [p.name for p in cache.iterdir()] if cache.is_dir() else []


def path_for(obj: dict[str, Any]) -> str:
    kind = obj["kind"]
    if kind in PATHS:
        return PATHS[kind]
    ns = obj["metadata"].get("namespace", "default")
    return f"{GROUPS.get(kind, '/api/v1')}/namespaces/{ns}/{NAMESPACED[kind]}"


class ControlPlane:
    def __init__(self) -> None:
        self.run_dir = Path(tempfile.mkdtemp(prefix="gpupool-k8s-"))
        self.env = {
            **os.environ,
            "GPUPOOL_K8S_ETCD_PORT": str(free_port()),
            "GPUPOOL_K8S_API_PORT": str(free_port()),
            "GPUPOOL_K8S_SCHEDULER_PORT": str(free_port()),
        }

    def start(self) -> None:
        subprocess.run(
            [str(SCRIPT), "build"], env=self.env, check=True, capture_output=True, timeout=1800
        )
        subprocess.run(
            [str(SCRIPT), "start", str(self.run_dir)], env=self.env, check=True, timeout=300
        )
        self.admin = KubeApi(str(self.run_dir / "kubeconfig-admin"))
        self.apply_file(DEPLOY / "rbac.yaml")
        self.apply_file(DEPLOY / "priority-classes.yaml")

    @property
    def gpupool_kubeconfig(self) -> str:
        return str(self.run_dir / "kubeconfig-gpupool")

    def stop(self) -> None:
        subprocess.run(
            [str(SCRIPT), "stop", str(self.run_dir)], env=self.env, check=False, timeout=60
        )
        shutil.rmtree(self.run_dir, ignore_errors=True)

    def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create ``obj`` (a Node keeps the status given: no kubelet writes one here)."""
        try:
            created = self.admin.request("POST", path_for(obj), obj)
        except ApiError as exc:
            if exc.status != 409:
                raise
            return obj
        if obj["kind"] == "Node" and obj.get("status"):
            name = obj["metadata"]["name"]
            created = self.admin.request(
                "PATCH",
                f"/api/v1/nodes/{name}/status",
                {"status": obj["status"]},
                content_type="application/merge-patch+json",
            )
        return created

    def apply_file(self, path: Path) -> None:
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                self.apply(doc)

    def namespace(self, name: str) -> None:
        self.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})

    def pod(self, namespace: str, name: str) -> dict[str, Any]:
        return self.admin.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")

    def events(self, namespace: str, name: str) -> list[dict[str, Any]]:
        items = self.admin.list(f"/api/v1/namespaces/{namespace}/events")["items"]
        return [e for e in items if e["involvedObject"]["name"] == name]

    def clear(self, namespaces: list[str]) -> None:
        """Delete every node and the namespaces' pods at once (no kubelet here to wait for)."""
        for ns in namespaces:
            for pod in self.admin.list(f"/api/v1/namespaces/{ns}/pods")["items"]:
                name = pod["metadata"]["name"]
                try:
                    self.admin.delete_pod(ns, name, 0)
                except ApiError as exc:
                    if exc.status != 404:
                        raise
        self.admin.request("DELETE", "/api/v1/nodes")

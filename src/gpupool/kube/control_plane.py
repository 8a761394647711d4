"""A throwaway Kubernetes control plane on loopback (etcd + kube-apiserver with RBAC, and
kube-scheduler on demand), run by ``scripts/k8s-control-plane.sh`` from binaries it builds or
finds cached outside the clone. The tests and ``gpupool bench kubernetes`` use it; it plays
the kubelet's part by writing Node objects with the status given."""

import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import yaml

from gpupool.kube.api import ApiError, KubeApi
from gpupool.model import SpecError

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "k8s-control-plane.sh"
COLLECTION_DELETE_S = 600.0  # a collection delete answers when its last object is gone
DEPLOY = ROOT / "deploy" / "kubernetes"
ENABLE = (
    "the Kubernetes tests and bench need kube-apiserver and etcd: install Go (they build "
    "from the Go module proxy, ~5-9 min once, cached in ~/.cache/gpupool/k8s) or run "
    "'scripts/k8s-control-plane.sh build'; CI sets GPUPOOL_REQUIRE_K8S=1"
)
CLUSTER = {
    "Namespace": "/api/v1/namespaces",
    "Node": "/api/v1/nodes",
    "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    "PriorityClass": "/apis/scheduling.k8s.io/v1/priorityclasses",
    "DeviceClass": "/apis/resource.k8s.io/v1/deviceclasses",
    "ResourceSlice": "/apis/resource.k8s.io/v1/resourceslices",
}
NAMESPACED = {
    "ServiceAccount": ("/api/v1", "serviceaccounts"),
    "Pod": ("/api/v1", "pods"),
    "ConfigMap": ("/api/v1", "configmaps"),
    "Role": ("/apis/rbac.authorization.k8s.io/v1", "roles"),
    "RoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "rolebindings"),
    "Deployment": ("/apis/apps/v1", "deployments"),
    "DaemonSet": ("/apis/apps/v1", "daemonsets"),
    "Job": ("/apis/batch/v1", "jobs"),
    "ResourceClaim": ("/apis/resource.k8s.io/v1", "resourceclaims"),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cache_dir() -> Path:
    return Path(os.environ.get("GPUPOOL_K8S_CACHE", Path.home() / ".cache/gpupool/k8s"))


def binaries_available() -> bool:
    """Cached binaries, or Go to build them."""
    cache = cache_dir()
    versions = [p for p in cache.iterdir()] if cache.is_dir() else []
    cached = any((v / "bin" / "kube-apiserver").exists() for v in versions)
    go = shutil.which("go") is not None or Path("/usr/local/go/bin/go").exists()
    return SCRIPT.exists() and (cached or go)


def path_for(obj: dict[str, Any]) -> str:
    kind = obj.get("kind", "")
    if kind in CLUSTER:
        return CLUSTER[kind]
    if kind not in NAMESPACED:
        raise SpecError(f"control plane: cannot create a {kind or 'kind-less object'}")
    prefix, plural = NAMESPACED[kind]
    return f"{prefix}/namespaces/{obj['metadata'].get('namespace', 'default')}/{plural}"


class ControlPlane:
    def __init__(self) -> None:
        if not SCRIPT.exists():
            raise SpecError(f"{SCRIPT} is missing: run from a source checkout of gpupool")
        self.run_dir = Path(tempfile.mkdtemp(prefix="gpupool-k8s-"))
        self.env = {
            **os.environ,
            "GPUPOOL_K8S_ETCD_PORT": str(free_port()),
            "GPUPOOL_K8S_API_PORT": str(free_port()),
            "GPUPOOL_K8S_SCHEDULER_PORT": str(free_port()),
        }
        self.admin: KubeApi | None = None

    def _script(self, *args: str, timeout: int) -> str:
        done = subprocess.run(
            [str(SCRIPT), *args], env=self.env, capture_output=True, text=True, timeout=timeout
        )
        if done.returncode != 0:
            raise SpecError(f"k8s-control-plane.sh {args[0]} failed: {done.stderr.strip()[-800:]}")
        return done.stdout.strip()

    def start(self) -> KubeApi:
        self._script("build", timeout=3600)
        self._script("start", str(self.run_dir), timeout=300)
        self.admin = KubeApi(str(self.run_dir / "kubeconfig-admin"))
        self.apply_file(DEPLOY / "rbac.yaml")
        self.apply_file(DEPLOY / "priority-classes.yaml")
        return self.admin

    def start_kube_scheduler(self) -> int:
        """Start the real kube-scheduler (client QPS 5000, as the recipe says); its PID."""
        self._script("scheduler", str(self.run_dir), timeout=60)
        return self.pid("kube-scheduler")

    def pid(self, name: str) -> int:
        # the last started: a component started again (kube-scheduler, per test) is a new line
        for line in reversed((self.run_dir / "pids").read_text().splitlines()):
            who, pid = line.split()
            if who == name:
                return int(pid)
        raise SpecError(f"control plane: {name} is not running")

    @property
    def gpupool_kubeconfig(self) -> str:
        return str(self.run_dir / "kubeconfig-gpupool")

    @property
    def device_plugin_kubeconfig(self) -> str:
        return str(self.run_dir / "kubeconfig-device-plugin")

    @property
    def tenant_kubeconfig(self) -> str:
        """A user of no rights until ``grant_edit`` binds it in a namespace."""
        return str(self.run_dir / "kubeconfig-tenant")

    def grant_edit(self, namespace: str) -> None:
        """Give the tenant user the pod rights of Kubernetes' ``edit`` role in ``namespace``
        (create, patch, delete its pods, as a team's members usually can). A Role of its own:
        ``edit`` is filled in by kube-controller-manager's aggregation, which is not run here."""
        rbac = "rbac.authorization.k8s.io"
        meta = {"name": "tenant-edit", "namespace": namespace}
        verbs = ["get", "list", "watch", "create", "update", "patch", "delete"]
        self.apply(
            {
                "apiVersion": f"{rbac}/v1",
                "kind": "Role",
                "metadata": meta,
                "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": verbs}],
            }
        )
        self.apply(
            {
                "apiVersion": f"{rbac}/v1",
                "kind": "RoleBinding",
                "metadata": meta,
                "roleRef": {"apiGroup": rbac, "kind": "Role", "name": "tenant-edit"},
                "subjects": [{"apiGroup": rbac, "kind": "User", "name": "tenant-user"}],
            }
        )

    def stop(self) -> None:
        if self.admin is not None:
            self.admin.close()
        subprocess.run(
            [str(SCRIPT), "stop", str(self.run_dir)], env=self.env, timeout=120, check=False
        )
        shutil.rmtree(self.run_dir, ignore_errors=True)

    @property
    def api(self) -> KubeApi:
        if self.admin is None:
            raise SpecError("control plane: not started")
        return self.admin

    def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create ``obj`` (a Node keeps the status given: no kubelet writes one here)."""
        try:
            created = self.api.request("POST", path_for(obj), obj)
        except ApiError as exc:
            if exc.status != 409:
                raise
            return obj
        if obj["kind"] == "Node" and obj.get("status"):
            created = self.api.request(
                "PATCH",
                f"/api/v1/nodes/{obj['metadata']['name']}/status",
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
        return self.api.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")

    def events(self, namespace: str, name: str) -> list[dict[str, Any]]:
        """Events about the pod of that name now (not an earlier pod that had the name)."""
        try:
            uid = self.pod(namespace, name)["metadata"]["uid"]
        except ApiError:
            uid = None
        items = self.api.list(f"/api/v1/namespaces/{namespace}/events")["items"]
        return [
            e
            for e in items
            if e["involvedObject"]["name"] == name
            and (uid is None or e["involvedObject"].get("uid") in (uid, "", None))
        ]

    def delete_pods(self, namespace: str) -> None:
        """Every pod of the namespace at once (no kubelet here to wait for). The API server
        answers a collection delete when its last object is gone: 5,000 pods took longer
        than the client's 30 s on 2 cores, so this call waits up to COLLECTION_DELETE_S."""
        self.api.request(
            "DELETE",
            f"/api/v1/namespaces/{namespace}/pods",
            {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0},
            timeout_s=COLLECTION_DELETE_S,
        )

    def clear(self, namespaces: list[str]) -> None:
        for ns in namespaces:
            self.delete_pods(ns)
            self.api.request(
                "DELETE", f"/api/v1/namespaces/{ns}/events", timeout_s=COLLECTION_DELETE_S
            )
            self.delete_claims(ns)
        self.api.request("DELETE", "/api/v1/nodes", timeout_s=COLLECTION_DELETE_S)
        self.api.request("DELETE", CLUSTER["ResourceSlice"], timeout_s=COLLECTION_DELETE_S)

    def delete_claims(self, namespace: str) -> None:
        """ResourceClaims, their finalizers dropped (no controller here removes them)."""
        path = f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims"
        for claim in self.api.list(path)["items"]:
            name = claim["metadata"]["name"]
            if claim["metadata"].get("finalizers"):
                self.api.request(
                    "PATCH",
                    f"{path}/{name}",
                    {"metadata": {"finalizers": None}},
                    content_type="application/merge-patch+json",
                )
        self.api.request("DELETE", path)

"""``gpupool bench kubernetes``: gpupool's Kubernetes-mode scheduler and the real
kube-scheduler side by side, on one throwaway control plane, the same fake GPU nodes and the
same pod specs (only ``schedulerName`` differs).

For each scheduler: *burst* — the pods are created while no scheduler runs, then the scheduler
starts; pods/s is measured between the first and the last binding seen on a watch. *Steady* —
with the scheduler running, more pods are created from 16 threads; create→bound is the time
from the create call to the binding seen on the watch. Both schedulers run as their own
processes; their CPU seconds come from /proc.

With ``dra``: every node's cards are published as gpupool's ResourceSlices (the same slices
for both), each GPU pod asks through a ResourceClaim of ``gpu.gpupool.io`` made just before it,
and each scheduler allocates the claims — kube-scheduler with its own DRA allocator, gpupool
with its engine (``dra: true``); create→bound runs from the claim's create call. After each
phase the claims are checked: how many are allocated, and whether any card was given twice.
"""

import contextlib
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from gpupool.kube.api import KubeApi
from gpupool.kube.control_plane import ControlPlane
from gpupool.kube.dra.classes import device_classes
from gpupool.kube.dra.slices import resource_slices
from gpupool.kube.grants import GrantKey
from gpupool.kube.inventory import node_from_object
from gpupool.kube.watch import Reflector
from gpupool.model import SpecError

GPU_MIX = ((1, 0.7), (2, 0.2), (0, 0.1))  # cards per pod and share of pods
CREATORS = 16
TIMEOUT_S = 600.0


class BenchFailed(Exception):
    """The benchmark stopped part way: the phase it was in, why, and the figures it had
    (its control plane and schedulers are stopped by then)."""

    def __init__(self, phase: str, error: BaseException, partial: dict[str, Any]):
        super().__init__(f"bench kubernetes failed in {phase}: {type(error).__name__}: {error}")
        self.phase, self.error, self.partial = phase, error, partial

    def as_dict(self) -> dict[str, Any]:
        return {
            "failed": True,
            "phase": self.phase,
            "error": f"{type(self.error).__name__}: {self.error}",
            "partial": self.partial,
        }


class Phase:
    """Where the run is, for the failure report."""

    def __init__(self) -> None:
        self.now = "starting the control plane"


def node_object(i: int) -> dict[str, Any]:
    capacity = {"cpu": "32", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "8"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": f"gpu-{i:05d}",
            "labels": {
                "topology.kubernetes.io/zone": f"zone-{i % 3}",
                "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
                "nvidia.com/gpu.memory": "81920",
                "nvidia.com/gpu.count": "8",
            },
        },
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod_object(
    name: str, namespace: str, scheduler: str, cards: int, dra: bool = False
) -> dict[str, Any]:
    resources: dict[str, Any] = {"requests": {"cpu": "100m", "memory": "128Mi"}}
    spec: dict[str, Any] = {"schedulerName": scheduler}
    if cards and dra:
        resources["claims"] = [{"name": "gpu"}]
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": name}]
    elif cards:
        resources["limits"] = {"nvidia.com/gpu": str(cards)}
    spec["containers"] = [{"name": "main", "image": "busybox", "resources": resources}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def claim_object(name: str, namespace: str, cards: int) -> dict[str, Any]:
    exactly = {"deviceClassName": "gpu.gpupool.io", "count": cards}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
    }


def claims_check(api: KubeApi, namespace: str) -> dict[str, int]:
    """Claims allocated, and cards given to more than one claim (0 when right)."""
    items = api.list(f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims")["items"]
    given = [
        (r["pool"], r["device"])
        for c in items
        for r in (((c.get("status") or {}).get("allocation") or {}).get("devices") or {}).get(
            "results"
        )
        or []
    ]
    allocated = sum(1 for c in items if (c.get("status") or {}).get("allocation"))
    return {
        "claims": len(items),
        "allocated": allocated,
        "cards_given_twice": len(given) - len(set(given)),
    }


def card_mix(pods: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    sizes, weights = [n for n, _ in GPU_MIX], [w for _, w in GPU_MIX]
    return rng.choices(sizes, weights, k=pods)


class BindWatch:
    """When each pod of a namespace was first seen bound (monotonic seconds)."""

    def __init__(self, api: KubeApi, namespace: str):
        self.bound_at: dict[str, float] = {}
        self.done = threading.Event()
        self.want = 0
        self._stop = threading.Event()
        self._reflector = Reflector(
            api, f"/api/v1/namespaces/{namespace}/pods", lambda: None, on_event=self._seen
        )
        threading.Thread(target=self._reflector.run, args=(self._stop,), daemon=True).start()
        self._reflector.synced.wait(30)

    def _seen(self, kind: str, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        if (
            kind != "DELETED"
            and (obj.get("spec") or {}).get("nodeName")
            and name not in self.bound_at
        ):
            self.bound_at[name] = time.monotonic()
            if self.want and len(self.bound_at) >= self.want:
                self.done.set()

    def expect(self, count: int) -> None:
        self.want = count
        if len(self.bound_at) >= count:
            self.done.set()

    def stop(self) -> None:
        self._stop.set()


def cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def create_pods(
    api: KubeApi, pods: list[dict[str, Any]], claims: dict[str, dict[str, Any]] | None = None
) -> dict[str, float]:
    """Create pods (each after its claim, if ``claims`` has one) from 16 threads; when each
    first create call started (monotonic)."""
    started: dict[str, float] = {}

    def create(pod: dict[str, Any]) -> None:
        name, ns = pod["metadata"]["name"], pod["metadata"]["namespace"]
        started[name] = time.monotonic()
        if claims and name in claims:
            api.request(
                "POST", f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims", claims[name]
            )
        api.request("POST", f"/api/v1/namespaces/{ns}/pods", pod)

    with ThreadPoolExecutor(CREATORS) as pool:
        list(pool.map(create, pods))
    return started


def _percentile_ms(values: list[float], q: float) -> float:
    return round(float(np.percentile(values, q)) * 1000, 1) if values else float("nan")


def _start_gpupool(
    cp: ControlPlane, namespace: str, folder: Path, dra: bool = False
) -> subprocess.Popen:
    config = folder / "gpupool-kube.yaml"
    settings = {"namespaces": {namespace: "bench"}, "tenants": [{"name": "bench"}], "cycle_s": 0.2}
    config.write_text(yaml.safe_dump({**settings, "dra": dra}))
    key = folder / "grant-key"
    key.write_text(GrantKey.generate().keys[0].decode())
    log = open(folder / "gpupool-kube.log", "w")  # noqa: SIM115 (the process keeps it)
    return subprocess.Popen(
        [sys.executable, "-m", "gpupool.cli.main", "kube", "run", "--config", str(config),
         "--kubeconfig", cp.gpupool_kubeconfig, "--no-leader-elect", "--grant-key", str(key)],
        stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip


def _claims_for(pods: list[dict[str, Any]], mix: list[int], dra: bool) -> dict[str, Any]:
    if not dra:
        return {}
    return {
        p["metadata"]["name"]: claim_object(p["metadata"]["name"], p["metadata"]["namespace"], c)
        for p, c in zip(pods, mix, strict=False)
        if c
    }


def _run_one(
    cp: ControlPlane,
    who: str,
    pods: int,
    steady: int,
    mix: list[int],
    folder: Path,
    dra: bool,
    phase: Phase,
) -> dict[str, Any]:
    api = cp.api
    ns = f"bench-{who}"
    cp.namespace(ns)
    scheduler = "default-scheduler" if who == "kube-scheduler" else "gpupool"
    watch = BindWatch(api, ns)
    proc: subprocess.Popen | None = None
    pid: int | None = None
    try:
        phase.now = f"{who}: creating the burst's pods"
        burst = [pod_object(f"b-{i:05d}", ns, scheduler, mix[i], dra) for i in range(pods)]
        t0 = time.monotonic()
        create_pods(api, burst, _claims_for(burst, mix, dra))
        created_s = time.monotonic() - t0
        phase.now = f"{who}: binding the burst"
        start = time.monotonic()
        if who == "kube-scheduler":
            pid = cp.start_kube_scheduler()
        else:
            proc = _start_gpupool(cp, ns, folder, dra)
            pid = proc.pid
        watch.expect(pods)
        watch.done.wait(TIMEOUT_S)
        times = sorted(watch.bound_at.values())
        bound = len(times)
        out: dict[str, Any] = {
            "burst_pods_bound": bound,
            "burst_create_pods_per_s": round(pods / created_s, 1),
            "burst_all_bound_s": round(times[-1] - start, 2) if bound == pods else None,
            "burst_pods_per_s": (
                round((bound - 1) / (times[-1] - times[0]), 1) if bound > 1 else 0.0
            ),
        }
        if dra:
            out["burst_claims"] = claims_check(api, ns)
        cpu_after_burst = cpu_seconds(pid)
        phase.now = f"{who}: deleting the burst's pods"
        cp.delete_pods(ns)
        if dra:  # no kube-controller-manager here deallocates kube-scheduler's claims
            cp.delete_claims(ns)
        time.sleep(2.0)  # the scheduler sees the room come back
        phase.now = f"{who}: steady pods"
        before = len(watch.bound_at)
        steady_pods = [pod_object(f"s-{i:05d}", ns, scheduler, mix[i], dra) for i in range(steady)]
        created = create_pods(api, steady_pods, _claims_for(steady_pods, mix, dra))
        watch.done.clear()
        watch.expect(before + steady)
        watch.done.wait(TIMEOUT_S)
        lat = [watch.bound_at[n] - t for n, t in created.items() if n in watch.bound_at]
        out.update(
            {
                "steady_pods_bound": len(lat),
                "steady_create_to_bound_p50_ms": _percentile_ms(lat, 50),
                "steady_create_to_bound_p99_ms": _percentile_ms(lat, 99),
                "cpu_s_burst": round(cpu_after_burst, 2),
                "cpu_s_total": round(cpu_seconds(pid), 2),
            }
        )
        if dra:
            out["steady_claims"] = claims_check(api, ns)
    finally:  # on every path: the scheduler stopped, its watch ended
        watch.stop()
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        elif pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 15)
    if proc is not None:
        said = re.search(
            r"in (\d+) cycles \(mean (\d+) ms\)", (folder / "gpupool-kube.log").read_text()
        )
        if said:
            out["cycles"], out["mean_cycle_ms"] = int(said[1]), int(said[2])
    phase.now = f"{who}: deleting its pods"
    cp.delete_pods(ns)
    if dra:
        cp.delete_claims(ns)
    return out


def _publish(cp: ControlPlane, nodes: int) -> float:
    """gpupool's DeviceClasses and every node's slices; seconds taken."""
    t0 = time.monotonic()
    for c in device_classes():
        cp.apply(c)
    slices = [
        s for i in range(nodes) for s in resource_slices(node_from_object(node_object(i)).node, 1)
    ]
    with ThreadPoolExecutor(CREATORS) as pool:
        list(pool.map(cp.apply, slices))
    return time.monotonic() - t0


def run_kubernetes_bench(
    nodes: int, pods: int, steady: int, seed: int = 0, dra: bool = False
) -> dict[str, Any]:
    """Both schedulers on one control plane; figures as a dict (see the module docstring)."""
    if nodes < 1 or pods < 1:
        raise SpecError("bench kubernetes: --nodes and --pods must be positive")
    if sum(c for c in card_mix(pods, seed)) > nodes * 8 * 0.9:
        raise SpecError(f"bench kubernetes: {pods} pods need more than 90% of {nodes * 8} cards")
    cp = ControlPlane()
    folder = Path(tempfile.mkdtemp(prefix="gpupool-bench-k8s-"))
    phase = Phase()
    result: dict[str, Any] = {"nodes": nodes, "pods": pods, "steady_pods": steady}
    try:
        api = cp.start()
        phase.now = "creating the nodes"
        t0 = time.monotonic()
        with ThreadPoolExecutor(CREATORS) as pool:
            list(pool.map(cp.apply, (node_object(i) for i in range(nodes))))
        node_s = time.monotonic() - t0
        mix = card_mix(max(pods, steady), seed)
        result |= {
            "gpus_per_node": 8,
            "pod_mix": {f"{c} gpu": w for c, w in GPU_MIX},
            "nodes_created_per_s": round(nodes / node_s, 1),
            "kube_scheduler_client_qps": 5000,
            "dra": dra,
        }
        if dra:
            phase.now = "publishing the ResourceSlices"
            result["slices_published_s"] = round(_publish(cp, nodes), 1)
        for who in ("kube-scheduler", "gpupool"):
            result[who] = _run_one(cp, who, pods, steady, mix, folder, dra, phase)
        k, g = result["kube-scheduler"], result["gpupool"]
        if k["burst_pods_per_s"]:
            result["burst_ratio_gpupool_to_kube"] = round(
                g["burst_pods_per_s"] / k["burst_pods_per_s"], 2
            )
        result["api_server"] = api.host
        shutil.rmtree(folder, ignore_errors=True)
        return result
    except Exception as exc:
        result["kept_for_reading"] = str(folder)  # gpupool's own log of the run
        raise BenchFailed(phase.now, exc, result) from exc
    finally:  # Ctrl-C and SIGTERM (the CLI makes it SystemExit) come here too
        cp.stop()

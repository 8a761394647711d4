"""gpupool's kubelet device plugin (API v1beta1 over gRPC on a Unix socket), as HAMi does it.

It registers ``gpupool.io/slice`` with the kubelet and advertises ``slots`` interchangeable
units of it; a pod that wants its slice enforced asks ``gpupool.io/slice: 1``. The scheduler
has already chosen the cards and written them in the pod's ``gpupool.io/grant`` annotation; in
``Allocate`` the plugin finds the pod being started on this node (bound by gpupool, its grant
signed by the scheduler's key, pending, not yet allocated, oldest first: the kubelet admits pods
one at a time) and returns the same
slice environment standalone agents give (``CUDA_VISIBLE_DEVICES`` by UUID, MPS / HAMi-core
limits for shares) and the card's device nodes, then marks the pod allocated. The devices it
discovered (with UUIDs) go into the Node's ``gpupool.io/devices`` annotation, which the
scheduler reads.
"""

import json
import logging
import os
import threading
import time
from collections.abc import Iterator, Mapping
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc

from gpupool.devices.detect import Located
from gpupool.kube.api import KubeApi
from gpupool.kube.deviceplugin import api_pb2, api_pb2_grpc
from gpupool.kube.grants import GRANT_ANNOTATION, GrantKey, grant_of
from gpupool.kube.inventory import DEVICES_ANNOTATION
from gpupool.kube.pods import created_at, meta, pod_key
from gpupool.model import SpecError, Vendor
from gpupool.scheduler.types import NodeGrant
from gpupool.sharing.runtime_env import Grant, LocalDevice, local_devices, slice_env

log = logging.getLogger(__name__)
RESOURCE = "gpupool.io/slice"
ALLOCATED_ANNOTATION = "gpupool.io/allocated"
API_VERSION = "v1beta1"
KUBELET_DIR = "/var/lib/kubelet/device-plugins"
NVIDIA_CONTROL_NODES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools")


def device_list(located: list[Located]) -> str:
    """The ``gpupool.io/devices`` annotation: what the scheduler needs of each device."""
    return json.dumps(
        [
            {
                "index": loc.index,
                "model": loc.device.model,
                "vendor": str(loc.device.vendor),
                "memory_mib": loc.device.memory_mib,
                "uuid": loc.device.uuid,
                "healthy": loc.device.healthy,
                "island": loc.device.island,
            }
            for loc in located
        ],
        separators=(",", ":"),
    )


def wants_slice(pod: Mapping[str, Any]) -> bool:
    for c in (pod.get("spec") or {}).get("containers") or []:
        res = c.get("resources") or {}
        if RESOURCE in (res.get("limits") or {}) or RESOURCE in (res.get("requests") or {}):
            return True
    return False


def _not_started(pod: Mapping[str, Any]) -> bool:
    """Pending with no container run yet: a pod the kubelet may be admitting (a running pod
    whose tenant removed its allocated mark is not one)."""
    status = pod.get("status") or {}
    if status.get("phase", "Pending") != "Pending":
        return False
    started = ("running", "terminated")
    return not any(
        k in (c.get("state") or {}) for c in status.get("containerStatuses") or [] for k in started
    )


def pod_to_allocate(
    pods: list[Mapping[str, Any]], node: str, key: GrantKey
) -> tuple[tuple[Mapping[str, Any], NodeGrant] | None, list[str]]:
    """The pod the kubelet is starting and its verified grant: on this node, granted (the grant
    verifies), asking for a slice, pending and not yet allocated; the oldest when several wait.
    Also what was wrong with the pods passed over for their grant."""
    waiting: list[tuple[Mapping[str, Any], NodeGrant]] = []
    refused: list[str] = []
    for p in pods:
        notes = meta(p, "annotations")
        if not (
            (p.get("spec") or {}).get("nodeName") == node
            and GRANT_ANNOTATION in notes
            and ALLOCATED_ANNOTATION not in notes
            and _not_started(p)
            and wants_slice(p)
        ):
            continue
        try:
            granted = grant_of(p, key)
        except SpecError as exc:
            refused.append(f"{pod_key(p)}: {exc}")
            continue
        if granted is not None:
            waiting.append((p, granted[2]))
    oldest = min(waiting, key=lambda w: created_at(w[0])) if waiting else None
    return oldest, refused


def container_response(
    pod: Mapping[str, Any],
    piece: NodeGrant,
    local: dict[int, LocalDevice],
    hami_core: str | None,
    dev_root: str,
) -> api_pb2.ContainerAllocateResponse:
    """The container's environment and device nodes for ``piece``, the pod's verified grant."""
    grants = [
        Grant(d.device, d.compute_pct, d.mem_mib, d.exclusive, d.mig_profile, d.mig_start)
        for d in piece.devices
    ]
    env = slice_env(grants, local, hami_core)
    env["GPUPOOL_GRANT"] = meta(pod, "annotations")[GRANT_ANNOTATION]
    specs = []
    nvidia = [local[g.device] for g in grants if local[g.device].vendor is Vendor.NVIDIA]
    paths = [f"/dev/nvidia{d.local_index}" for d in nvidia]
    if nvidia:
        paths += list(NVIDIA_CONTROL_NODES)
    for path in paths:
        host = os.path.join(dev_root, path.lstrip("/")) if dev_root != "/" else path
        if os.path.exists(host):
            specs.append(api_pb2.DeviceSpec(container_path=path, host_path=host, permissions="rw"))
    return api_pb2.ContainerAllocateResponse(envs=env, devices=specs)


class SlicePlugin(api_pb2_grpc.DevicePluginServicer):
    def __init__(
        self,
        api: KubeApi,
        node: str,
        located: list[Located],
        key: GrantKey,
        slots: int = 100,
        hami_core: str | None = None,
        dev_root: str = "/",
    ):
        self.api = api
        self.node = node
        self.located = located
        self.key = key
        self.local = local_devices(located)
        self.slots = slots
        self.hami_core = hami_core
        self.dev_root = dev_root
        self.stop = threading.Event()
        self._lock = threading.Lock()  # one Allocate at a time: each claims one pod

    def GetDevicePluginOptions(
        self, request: Any, context: grpc.ServicerContext
    ) -> api_pb2.DevicePluginOptions:
        return api_pb2.DevicePluginOptions(pre_start_required=False)

    def ListAndWatch(
        self, request: Any, context: grpc.ServicerContext
    ) -> Iterator[api_pb2.ListAndWatchResponse]:
        devices = [api_pb2.Device(ID=f"slice-{i}", health="Healthy") for i in range(self.slots)]
        yield api_pb2.ListAndWatchResponse(devices=devices)
        while not self.stop.wait(1.0) and context.is_active():
            pass

    def GetPreferredAllocation(
        self, request: Any, context: grpc.ServicerContext
    ) -> api_pb2.PreferredAllocationResponse:
        return api_pb2.PreferredAllocationResponse()

    def PreStartContainer(
        self, request: Any, context: grpc.ServicerContext
    ) -> api_pb2.PreStartContainerResponse:
        return api_pb2.PreStartContainerResponse()

    def Allocate(self, request: Any, context: grpc.ServicerContext) -> api_pb2.AllocateResponse:
        responses = []
        with self._lock:
            for _ in request.container_requests:
                try:
                    responses.append(self._allocate_one())
                except (SpecError, KeyError) as exc:
                    context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"gpupool: {exc}")
                except Exception as exc:  # the API server away: the kubelet retries the pod
                    context.abort(grpc.StatusCode.UNAVAILABLE, f"gpupool: {exc}")
        return api_pb2.AllocateResponse(container_responses=responses)

    def _allocate_one(self) -> api_pb2.ContainerAllocateResponse:
        pods = self.api.list("/api/v1/pods", fieldSelector=f"spec.nodeName={self.node}")["items"]
        chosen, refused = pod_to_allocate(pods, self.node, self.key)
        if chosen is None:
            raise SpecError(
                f"no pod on {self.node} holds a gpupool grant and waits for its slice "
                f"(a pod asking {RESOURCE} must be scheduled by gpupool)"
                + "".join(f"; refused {r}" for r in refused)
            )
        for r in refused:
            log.warning("refused %s", r)
        pod, piece = chosen
        response = container_response(pod, piece, self.local, self.hami_core, self.dev_root)
        md = pod["metadata"]
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.api.annotate_pod(md["namespace"], md["name"], {ALLOCATED_ANNOTATION: stamp})
        log.info("allocated %s/%s on %s", md["namespace"], md["name"], self.node)
        return response


def publish_devices(api: KubeApi, node: str, located: list[Located]) -> None:
    """Write the discovered devices on the Node, where the scheduler reads UUIDs and models."""
    body = {"metadata": {"annotations": {DEVICES_ANNOTATION: device_list(located)}}}
    api.request("PATCH", f"/api/v1/nodes/{node}", body, content_type="application/merge-patch+json")


def serve(
    plugin: SlicePlugin, socket_dir: str = KUBELET_DIR, name: str = "gpupool.sock"
) -> grpc.Server:
    """Serve on ``socket_dir/name`` and register with the kubelet there; returns the server."""
    path = Path(socket_dir) / name
    path.unlink(missing_ok=True)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    api_pb2_grpc.add_DevicePluginServicer_to_server(plugin, server)
    server.add_insecure_port(f"unix://{path}")
    server.start()
    with grpc.insecure_channel(f"unix://{Path(socket_dir) / 'kubelet.sock'}") as channel:
        api_pb2_grpc.RegistrationStub(channel).Register(
            api_pb2.RegisterRequest(
                version=API_VERSION,
                endpoint=name,
                resource_name=RESOURCE,
                options=api_pb2.DevicePluginOptions(pre_start_required=False),
            ),
            timeout=10,
        )
    return server

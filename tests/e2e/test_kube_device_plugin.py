"""The device plugin spoken to by a real gRPC client playing the kubelet, with pods bound by
gpupool's scheduler on a real kube-apiserver."""

import json
import tempfile
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from gpupool.devices.detect import discover
from gpupool.kube.api import ApiError, KubeApi
from gpupool.kube.device_plugin import SlicePlugin, publish_devices, serve
from gpupool.kube.deviceplugin import api_pb2, api_pb2_grpc
from tests.support.agents import wait_for
from tests.support.kube_fixtures import GRANT_KEY
from tests.support.kube_objects import node_obj, pod_obj


class FakeKubelet(api_pb2_grpc.RegistrationServicer):
    def __init__(self) -> None:
        self.registered: list[api_pb2.RegisterRequest] = []

    def Register(self, request, context):
        self.registered.append(request)
        return api_pb2.Empty()


@pytest.fixture
def plugin_on(kube):
    """Start the plugin for a node; yields (kubelet's recorder, a stub to the plugin, the
    devices it discovered)."""
    servers: list = []
    folder = Path(tempfile.mkdtemp(prefix="gpupool-dp-"))

    def start(node: str, devices: str):
        kubelet = FakeKubelet()
        registry = grpc.server(futures.ThreadPoolExecutor(2))
        api_pb2_grpc.add_RegistrationServicer_to_server(kubelet, registry)
        registry.add_insecure_port(f"unix://{folder / 'kubelet.sock'}")
        registry.start()
        located, _ = discover(devices, node)
        api = KubeApi(kube.device_plugin_kubeconfig)
        publish_devices(api, node, located)
        plugin = SlicePlugin(api, node, located, GRANT_KEY, slots=10)
        server = serve(plugin, str(folder))
        servers.extend([registry, server])
        channel = grpc.insecure_channel(f"unix://{folder / 'gpupool.sock'}")
        servers.append(plugin)
        return kubelet, api_pb2_grpc.DevicePluginStub(channel), located

    yield start
    for s in servers:
        if isinstance(s, SlicePlugin):
            s.stop.set()
        else:
            s.stop(0)


def slice_pod(name: str, request: str) -> dict:
    pod = pod_obj(name, request=request)
    pod["spec"]["containers"][0]["resources"]["limits"] = {"gpupool.io/slice": "1"}
    return pod


def test_the_kubelet_gets_the_granted_cards_environment_from_allocate(
    kube, start_scheduler, plugin_on
):
    kube.apply(node_obj("n1", 8))
    kubelet, stub, located = plugin_on("n1", "simulated:8xA100-80G")
    assert [(r.resource_name, r.version, r.endpoint) for r in kubelet.registered] == [
        ("gpupool.io/slice", "v1beta1", "gpupool.sock")
    ]
    assert not stub.GetDevicePluginOptions(api_pb2.Empty()).pre_start_required
    first = next(stub.ListAndWatch(api_pb2.Empty()))
    assert len(first.devices) == 10 and {d.health for d in first.devices} == {"Healthy"}
    start_scheduler()
    kube.apply(slice_pod("train", "gpu=2"))
    wait_for("bound", lambda: kube.pod("team-a", "train")["spec"].get("nodeName"))
    grant = json.loads(kube.pod("team-a", "train")["metadata"]["annotations"]["gpupool.io/grant"])
    uuids = {loc.index: loc.device.uuid for loc in located}
    assert [d["uuid"] for d in grant["devices"]] == [uuids[d["index"]] for d in grant["devices"]]
    answer = stub.Allocate(
        api_pb2.AllocateRequest(
            container_requests=[api_pb2.ContainerAllocateRequest(devices_ids=["slice-3"])]
        )
    )
    env = dict(answer.container_responses[0].envs)
    assert env["CUDA_VISIBLE_DEVICES"] == ",".join(d["uuid"] for d in grant["devices"])
    assert env["NVIDIA_VISIBLE_DEVICES"] == env["CUDA_VISIBLE_DEVICES"]
    assert json.loads(env["GPUPOOL_GRANT"])["job"] == "team-a/train"
    assert "gpupool.io/allocated" in kube.pod("team-a", "train")["metadata"]["annotations"]
    with pytest.raises(grpc.RpcError) as err:  # nothing else waits for its slice on n1
        stub.Allocate(
            api_pb2.AllocateRequest(
                container_requests=[api_pb2.ContainerAllocateRequest(devices_ids=["slice-4"])]
            )
        )
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "no pod on n1 holds a gpupool grant" in err.value.details()


def test_a_fractional_share_gets_its_compute_and_memory_limits(kube, start_scheduler, plugin_on):
    kube.apply(node_obj("s1", 2, labels={"gpupool.io/sharing": "share"}))
    _, stub, _ = plugin_on("s1", "simulated:2xA100-80G")
    start_scheduler()
    kube.apply(slice_pod("notebook", "gpu=1,gpu_share=30%,gpu_mem=20GiB"))
    wait_for("bound", lambda: kube.pod("team-a", "notebook")["spec"].get("nodeName"))
    answer = stub.Allocate(
        api_pb2.AllocateRequest(
            container_requests=[api_pb2.ContainerAllocateRequest(devices_ids=["slice-0"])]
        )
    )
    env = dict(answer.container_responses[0].envs)
    assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "30"
    assert env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=20480M"
    assert len(env["CUDA_VISIBLE_DEVICES"].split(",")) == 1


def test_the_plugins_identity_cannot_bind_or_delete_pods(kube):
    api = KubeApi(kube.device_plugin_kubeconfig)
    for call in (lambda: api.bind("team-a", "x", "n1"), lambda: api.delete_pod("team-a", "x", 0)):
        with pytest.raises(ApiError) as err:
            call()
        assert err.value.status == 403


def _allocate(stub):
    return stub.Allocate(
        api_pb2.AllocateRequest(
            container_requests=[api_pb2.ContainerAllocateRequest(devices_ids=["slice-0"])]
        )
    )


def test_a_tenant_who_rewrites_its_grant_gets_no_slice_and_loses_the_pod(
    kube, start_scheduler, plugin_on
):
    """The tenant user may edit team-a's pods (Kubernetes' edit role), so it can rewrite the
    grant annotation gpupool wrote: the device plugin refuses the rewritten grant and a
    (restarted) scheduler evicts the pod instead of trusting it."""
    kube.apply(node_obj("n1", 8))
    _, stub, _ = plugin_on("n1", "simulated:8xA100-80G")
    scheduler = start_scheduler()
    kube.apply(slice_pod("greedy", "gpu=1"))
    wait_for("bound", lambda: kube.pod("team-a", "greedy")["spec"].get("nodeName"))
    scheduler.stop()
    tenant = KubeApi(kube.tenant_kubeconfig)
    grant = json.loads(kube.pod("team-a", "greedy")["metadata"]["annotations"]["gpupool.io/grant"])
    grant["devices"] = [{**grant["devices"][0], "index": i} for i in range(8)]  # every card
    tenant.annotate_pod("team-a", "greedy", {"gpupool.io/grant": json.dumps(grant)})
    with pytest.raises(grpc.RpcError) as err:
        _allocate(stub)
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "refused team-a/greedy" in err.value.details()
    assert "gpupool.io/grant-signature does not match" in err.value.details()
    start_scheduler()  # a restarted scheduler reads the pod's grant and does not trust it
    wait_for("evicted", lambda: not kube.api.list("/api/v1/namespaces/team-a/pods")["items"])
    assert "GrantAltered" in {e["reason"] for e in kube.events("team-a", "greedy")}
    kube.apply(pod_obj("theirs", "team-b"))
    with pytest.raises(ApiError) as denied:  # and another team's pods are out of its reach
        tenant.annotate_pod("team-b", "theirs", {"gpupool.io/grant": json.dumps(grant)})
    assert denied.value.status == 403

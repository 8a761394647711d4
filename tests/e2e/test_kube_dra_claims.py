"""gpupool as the DRA allocator against a real kube-apiserver v1.34 (gates as
scripts/k8s-control-plane.sh sets them; issue 48): it publishes its DeviceClasses and each
node's ResourceSlices, places pods asking through ResourceClaims with its own engine, writes
each claim's allocation (which the API server validates) and binds; a claim that cannot be
satisfied waits saying why; a scheduler restarted allocates no card twice; a pod gone
releases its claim."""

import json

from gpupool.kube.dra.slices import DRIVER
from tests.support.agents import wait_for
from tests.support.kube_objects import node_obj, pod_obj

V1 = "/apis/resource.k8s.io/v1"
CLAIMS = f"{V1}/namespaces/team-a/resourceclaims"
ATTR = 'device.attributes["gpu.gpupool.io"]'


def claim_pod(
    kube, name: str, klass: str, cel: str = "", capacity=None, count: int = 1, **pod_fields
) -> None:
    exactly: dict = {"deviceClassName": klass, "count": count}
    if cel:
        exactly["selectors"] = [{"cel": {"expression": cel}}]
    if capacity:
        exactly["capacity"] = {"requests": capacity}
    kube.apply(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "team-a"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
        }
    )
    pod = pod_obj(name, cpu="100m", memory="64Mi", **pod_fields)
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": name}]
    pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    kube.apply(pod)


def status(kube, name: str) -> dict:
    return kube.api.request("GET", f"{CLAIMS}/{name}").get("status") or {}


def devices(kube, name: str) -> list[str]:
    results = ((status(kube, name).get("allocation") or {}).get("devices") or {}).get("results")
    return sorted(r["device"] for r in results or [])


def bound(kube, name: str) -> str:
    return kube.pod("team-a", name)["spec"].get("nodeName") or ""


def said(kube, name: str) -> list[str]:
    return [e["message"] for e in kube.events("team-a", name) if e["reason"] == "FailedScheduling"]


def test_gpupool_publishes_slices_allocates_claims_and_never_twice(kube, start_scheduler):
    kube.apply(node_obj("whole", 2))
    kube.apply(node_obj("migs", 1, labels={"gpupool.io/sharing": "mig"}))
    kube.apply(node_obj("shares", 1, labels={"gpupool.io/sharing": "share"}))
    s = start_scheduler(dra=True)
    pools = wait_for(
        "gpupool's slices",
        lambda: (
            {
                x["spec"]["pool"]["name"]
                for x in kube.api.list(f"{V1}/resourceslices")["items"]
                if x["spec"]["driver"] == DRIVER
            }
            >= {"whole", "migs", "shares"}
        ),
    )
    assert pools
    # a restarted writer adopts the pools that say what it would write: none written again
    from gpupool.kube.api import KubeApi
    from gpupool.kube.dra.publish import DraWriter
    from gpupool.kube.inventory import node_from_object

    again = DraWriter(KubeApi(kube.gpupool_kubeconfig))
    objs = [kube.api.request("GET", f"/api/v1/nodes/{n}") for n in ("whole", "migs", "shares")]
    assert again.publish([node_from_object(o).node for o in objs]) == 0
    classes = {c["metadata"]["name"] for c in kube.api.list(f"{V1}/deviceclasses")["items"]}
    assert {"gpu.gpupool.io", "mig.gpupool.io", "share.gpupool.io"} <= classes

    claim_pod(kube, "two", "gpu.gpupool.io", count=2)
    claim_pod(kube, "mig-3g", "mig.gpupool.io", f'{ATTR}.profile == "3g.40gb"')
    claim_pod(kube, "mig-4g", "mig.gpupool.io", f'{ATTR}.profile == "4g.40gb"')
    claim_pod(kube, "share", "share.gpupool.io", capacity={"memory": "20Gi", "compute": "30"})
    for name in ("two", "mig-3g", "mig-4g", "share"):
        wait_for(f"{name} bound", lambda name=name: bound(kube, name), 30)
    assert bound(kube, "two") == "whole" and devices(kube, "two") == ["gpu-0", "gpu-1"]
    assert devices(kube, "mig-3g") == ["gpu-0-mig-3g-40gb-4"]
    assert devices(kube, "mig-4g") == ["gpu-0-mig-4g-40gb-0"]
    share = status(kube, "share")
    (result,) = share["allocation"]["devices"]["results"]
    assert result["consumedCapacity"] == {"memory": "20Gi", "compute": "30"}
    assert [r["name"] for r in share["reservedFor"]] == ["share"]
    claim = kube.api.request("GET", f"{CLAIMS}/share")
    assert "resource.kubernetes.io/delete-protection" in claim["metadata"]["finalizers"]

    # nothing left for these: they wait, saying why
    claim_pod(kube, "mig-1g", "mig.gpupool.io", f'{ATTR}.profile == "1g.10gb"')
    claim_pod(kube, "one-more", "gpu.gpupool.io")
    for name in ("mig-1g", "one-more"):
        assert wait_for(f"{name}'s reason", lambda name=name: said(kube, name), 30)
        assert not bound(kube, name) and not devices(kube, name)

    # a scheduler started again reads what is allocated and gives none of it twice
    s.stop()
    s2 = start_scheduler(dra=True)
    claim_pod(kube, "after-restart", "gpu.gpupool.io")
    assert wait_for("its reason", lambda: said(kube, "after-restart"), 30)
    assert not bound(kube, "after-restart") and s2.stats["bind_errors"] == 0

    # the two-card pod gone: its claim is released and a waiting pod gets the cards
    kube.api.request("DELETE", "/api/v1/namespaces/team-a/pods/two", {"gracePeriodSeconds": 0})

    def released() -> bool:  # its allocation gone, then its finalizer (two writes)
        claim = kube.api.request("GET", f"{CLAIMS}/two")
        protected = "resource.kubernetes.io/delete-protection" in (
            claim["metadata"].get("finalizers") or []
        )
        return not (claim.get("status") or {}).get("allocation") and not protected

    wait_for("the claim released", released, 30)
    placed = wait_for(
        "the waiting pods placed",
        lambda: [n for n in ("one-more", "after-restart") if bound(kube, n)] or None,
        30,
    )
    assert sorted(d for n in placed for d in devices(kube, n)) in (
        ["gpu-0"],
        ["gpu-1"],
        ["gpu-0", "gpu-1"],
    )
    print(
        "REASONS", said(kube, "mig-1g"), said(kube, "one-more"), said(kube, "after-restart"), placed
    )


def test_the_kubelet_plugin_prepares_a_claim_as_an_enforcing_cdi_device(
    kube, start_scheduler, tmp_path
):
    """A gRPC client playing the kubelet: registration, then NodePrepareResources for claims
    gpupool allocated — the CDI spec's environment shows the card's UUID, or a share's MPS
    limits; a claim made again under the same name is refused; unprepare removes the spec."""
    import grpc

    from gpupool.devices.detect import discover
    from gpupool.kube.api import KubeApi
    from gpupool.kube.device_plugin import publish_devices
    from gpupool.kube.dra.kubelet_plugin import ClaimPlugin, serve
    from gpupool.kube.draplugin import dra_pb2, dra_pb2_grpc, registration_pb2
    from gpupool.kube.draplugin import registration_pb2_grpc as reg_grpc

    api = KubeApi(kube.device_plugin_kubeconfig)  # the plugin's own least-privilege identity
    located = {}
    for name, mode in (("whole", "whole"), ("shares", "share")):
        kube.apply(node_obj(name, 2, labels={"gpupool.io/sharing": mode}))
        located[name], _ = discover("simulated:2xA100-80G", name)
        publish_devices(api, name, located[name])
    start_scheduler(dra=True)
    claim_pod(kube, "card", "gpu.gpupool.io")
    claim_pod(kube, "share", "share.gpupool.io", capacity={"memory": "20Gi", "compute": "30"})
    for name in ("card", "share"):
        wait_for(f"{name} bound", lambda name=name: bound(kube, name), 30)

    servers, stubs = [], {}
    for name in ("whole", "shares"):
        folder = tmp_path / name
        plugin = ClaimPlugin(api, name, located[name], str(folder / "cdi"))
        server, _ = serve(plugin, str(folder / "plugin"), str(folder / "registry"))
        servers.append(server)
        stubs[name] = grpc.insecure_channel(f"unix://{folder / 'plugin' / 'dra.sock'}")
    try:
        registry = grpc.insecure_channel(
            f"unix://{tmp_path / 'whole/registry/gpu.gpupool.io-reg.sock'}"
        )
        info = reg_grpc.RegistrationStub(registry).GetInfo(registration_pb2.InfoRequest())
        assert (info.type, info.name, list(info.supported_versions)) == (
            "DRAPlugin",
            "gpu.gpupool.io",
            ["v1.DRAPlugin"],
        )

        def prepare(node: str, claim: str, uid: str | None = None):
            got = kube.api.request("GET", f"{CLAIMS}/{claim}")["metadata"]
            ask = dra_pb2.Claim(namespace="team-a", uid=uid or got["uid"], name=claim)
            stub = dra_pb2_grpc.DRAPluginStub(stubs[node])
            answer = stub.NodePrepareResources(dra_pb2.NodePrepareResourcesRequest(claims=[ask]))
            return ask, answer.claims[ask.uid]

        ask, card = prepare("whole", "card")
        assert card.error == "" and len(card.devices) == 1
        (device,) = card.devices
        spec = json.loads((tmp_path / f"whole/cdi/gpupool-claim-{ask.uid}.json").read_text())
        env = dict(e.split("=", 1) for e in spec["devices"][0]["containerEdits"]["env"])
        index = int(device.device_name.removeprefix("gpu-"))
        uuid = next(loc.device.uuid for loc in located["whole"] if loc.index == index)
        assert env["CUDA_VISIBLE_DEVICES"] == uuid == env["NVIDIA_VISIBLE_DEVICES"]
        assert list(device.cdi_device_ids) == [f"gpu.gpupool.io/claim={ask.uid}"]

        _, share = prepare("shares", "share")
        spec = json.loads(next((tmp_path / "shares/cdi").glob("*.json")).read_text())
        env = dict(e.split("=", 1) for e in spec["devices"][0]["containerEdits"]["env"])
        assert share.error == "" and env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "30"
        assert env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=20480M"

        _, stale = prepare("whole", "card", uid="0000-not-its-uid")
        assert "made again" in stale.error and not stale.devices

        stub = dra_pb2_grpc.DRAPluginStub(stubs["whole"])
        stub.NodeUnprepareResources(dra_pb2.NodeUnprepareResourcesRequest(claims=[ask]))
        assert not list((tmp_path / "whole/cdi").glob("*.json"))
    finally:
        for server in servers:
            server.stop(0)


def test_preemption_frees_the_victims_claim_for_the_preemptor(kube, start_scheduler):
    kube.apply(node_obj("n1", 1))
    start_scheduler(dra=True)
    claim_pod(kube, "low", "gpu.gpupool.io", priority_class="dev-test")
    wait_for("low bound", lambda: bound(kube, "low"), 30)
    assert devices(kube, "low") == ["gpu-0"]
    claim_pod(kube, "urgent", "gpu.gpupool.io", priority_class="online-inference")
    wait_for("urgent bound", lambda: bound(kube, "urgent"), 60)
    assert devices(kube, "urgent") == ["gpu-0"]
    assert not status(kube, "low").get("allocation")  # released when its pod went


def test_a_pod_waits_for_its_templates_claim_then_gets_it(kube, start_scheduler):
    """A claim from a ResourceClaimTemplate is made by kube-controller-manager (played here:
    the claim created and named in the pod's status, as it does)."""
    kube.apply(node_obj("n1", 1))
    start_scheduler(dra=True)
    pod = pod_obj("tpl", cpu="100m", memory="64Mi")
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    kube.apply(pod)
    why = wait_for("its reason", lambda: [e for e in kube.events("team-a", "tpl")], 30)
    assert any("template is not made yet" in e["message"] for e in why), why
    kube.apply(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "tpl-gpu-x7k2p", "namespace": "team-a"},
            "spec": {
                "devices": {
                    "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.gpupool.io"}}]
                }
            },
        }
    )
    kube.api.request(
        "PATCH",
        "/api/v1/namespaces/team-a/pods/tpl/status",
        {
            "status": {
                "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "tpl-gpu-x7k2p"}]
            }
        },
        content_type="application/merge-patch+json",
    )
    wait_for("bound", lambda: bound(kube, "tpl"), 30)
    assert devices(kube, "tpl-gpu-x7k2p") == ["gpu-0"]


def test_a_prioritized_list_is_allocated_by_the_option_a_node_can_give(kube, start_scheduler):
    kube.apply(node_obj("n1", 1))  # A100s only: the H100 asked first is nowhere
    start_scheduler(dra=True)
    subs = [
        {"name": name, "deviceClassName": "gpu.gpupool.io",
         "selectors": [{"cel": {"expression": f'{ATTR}.model == "{model}"'}}]}
        for name, model in (("h100", "H100-80G"), ("a100", "A100-80G"))
    ]  # fmt: skip
    kube.apply(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "either", "namespace": "team-a"},
            "spec": {"devices": {"requests": [{"name": "gpu", "firstAvailable": subs}]}},
        }
    )
    pod = pod_obj("either", cpu="100m", memory="64Mi")
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "either"}]
    kube.apply(pod)
    wait_for("bound", lambda: bound(kube, "either"), 30)
    (result,) = status(kube, "either")["allocation"]["devices"]["results"]
    assert (result["request"], result["device"]) == ("gpu/a100", "gpu-0")


def test_an_old_nvidia_gpu_pod_on_a_dra_only_node_gets_an_extended_resource_claim(
    kube, start_scheduler
):
    """A node served by DRA alone does not advertise nvidia.com/gpu, so its kubelet admits a
    pod asking it only through the special claim (gate DRAExtendedResource): gpupool makes
    it as kube-scheduler does — owned by the pod, named in the pod's status — and allocates it
    from the pod's grant."""
    from gpupool.devices.detect import discover
    from gpupool.kube.device_plugin import device_list

    node = node_obj("dra-only", 2)
    for key in ("capacity", "allocatable"):
        node["status"][key] = {
            k: v for k, v in node["status"][key].items() if k != "nvidia.com/gpu"
        }
    located, _ = discover("simulated:2xA100-80G", "dra-only")
    node["metadata"]["annotations"] = {"gpupool.io/devices": device_list(located)}
    kube.apply(node)
    start_scheduler(dra=True)
    kube.apply(pod_obj("legacy", gpus=1))
    wait_for("bound", lambda: bound(kube, "legacy"), 30)
    pod = kube.pod("team-a", "legacy")
    extended = pod["status"]["extendedResourceClaimStatus"]
    assert extended["requestMappings"] == [
        {
            "containerName": "main",
            "resourceName": "nvidia.com/gpu",
            "requestName": "container-0-request-2",
        }
    ]
    claim = kube.api.request("GET", f"{CLAIMS}/{extended['resourceClaimName']}")
    assert (
        claim["metadata"]["annotations"]["resource.kubernetes.io/extended-resource-claim"] == "true"
    )
    assert claim["metadata"]["ownerReferences"][0]["uid"] == pod["metadata"]["uid"]
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    grant = json.loads(pod["metadata"]["annotations"]["gpupool.io/grant"])
    assert result["device"] == f"gpu-{grant['devices'][0]['index']}"
    assert [r["name"] for r in claim["status"]["reservedFor"]] == ["legacy"]
    classes = {c["metadata"]["name"]: c for c in kube.api.list(f"{V1}/deviceclasses")["items"]}
    assert classes["gpu.gpupool.io"]["spec"]["extendedResourceName"] == "nvidia.com/gpu"
    spec = classes["mig-3g-40gb.gpupool.io"]["spec"]
    assert spec["extendedResourceName"] == "nvidia.com/mig-3g.40gb"

    # an old MIG manifest (the device plugin's mixed strategy) on a DRA-only MIG node
    mig = node_obj("dra-mig", 1, labels={"gpupool.io/sharing": "mig"})
    for key in ("capacity", "allocatable"):
        mig["status"][key] = {k: v for k, v in mig["status"][key].items() if k != "nvidia.com/gpu"}
    located, _ = discover("simulated:1xA100-80G", "dra-mig")
    mig["metadata"]["annotations"] = {"gpupool.io/devices": device_list(located)}
    kube.apply(mig)
    old = pod_obj("old-mig", cpu="100m", memory="64Mi")
    old["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/mig-3g.40gb": "1"}
    kube.apply(old)
    wait_for("the MIG pod bound", lambda: bound(kube, "old-mig"), 30)
    extended = kube.pod("team-a", "old-mig")["status"]["extendedResourceClaimStatus"]
    claim = kube.api.request("GET", f"{CLAIMS}/{extended['resourceClaimName']}")
    (request,) = claim["spec"]["devices"]["requests"]
    assert request["exactly"]["deviceClassName"] == "mig-3g-40gb.gpupool.io"
    (result,) = claim["status"]["allocation"]["devices"]["results"]
    assert result["device"].startswith("gpu-0-mig-3g-40gb-")


def test_two_pods_sharing_a_claim_run_on_its_node_with_one_card(kube, start_scheduler):
    kube.apply(node_obj("n1", 1))
    kube.apply(node_obj("n2", 1))
    start_scheduler(dra=True)
    claim_pod(kube, "shared", "gpu.gpupool.io")  # the claim, and a pod "shared" naming it
    other = pod_obj("sidecar", cpu="100m", memory="64Mi")
    other["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "shared"}]
    kube.apply(other)
    for name in ("shared", "sidecar"):
        wait_for(f"{name} bound", lambda name=name: bound(kube, name), 30)
    assert bound(kube, "shared") == bound(kube, "sidecar")
    users = [r["name"] for r in status(kube, "shared")["reservedFor"]]
    assert sorted(users) == ["shared", "sidecar"] and len(devices(kube, "shared")) == 1
    claim_pod(kube, "third", "gpu.gpupool.io")  # the other node's card is still free
    wait_for("third bound", lambda: bound(kube, "third"), 30)
    assert bound(kube, "third") != bound(kube, "shared")


def test_the_kubelet_plugin_makes_a_mig_claims_instance_at_prepare_time(
    kube, start_scheduler, tmp_path
):
    """Dynamic MIG in Kubernetes mode: a MIG-mode card with no instance; gpupool allocates a
    3g and a 4g claim (placements that leave each other room), and the plugin makes each
    instance when the kubelet prepares its claim; a claim whose instance would overlap one a
    prepared claim uses is refused, not made by destroying it."""
    import grpc

    from gpupool.devices.detect import discover
    from gpupool.kube.api import KubeApi
    from gpupool.kube.device_plugin import publish_devices
    from gpupool.kube.dra.kubelet_plugin import ClaimPlugin, serve
    from gpupool.kube.draplugin import dra_pb2, dra_pb2_grpc

    spec = tmp_path / "node.yaml"
    spec.write_text("devices:\n  - {model: A100-80G, count: 1, mode: mig}\n")
    api = KubeApi(kube.device_plugin_kubeconfig)
    kube.apply(node_obj("m1", 1, labels={"gpupool.io/sharing": "mig"}))
    located, _ = discover(str(spec), "m1")
    publish_devices(api, "m1", located)
    start_scheduler(dra=True)
    claim_pod(kube, "three", "mig.gpupool.io", f'{ATTR}.profile == "3g.40gb"')
    claim_pod(kube, "four", "mig.gpupool.io", f'{ATTR}.profile == "4g.40gb"')
    for name in ("three", "four"):
        wait_for(f"{name} bound", lambda name=name: bound(kube, name), 30)
    plugin = ClaimPlugin(api, "m1", located, str(tmp_path / "cdi"))
    server, _ = serve(plugin, str(tmp_path / "plugin"), str(tmp_path / "registry"))
    try:
        stub = dra_pb2_grpc.DRAPluginStub(
            grpc.insecure_channel(f"unix://{tmp_path}/plugin/dra.sock")
        )

        def prepare(name: str):
            uid = kube.api.request("GET", f"{CLAIMS}/{name}")["metadata"]["uid"]
            ask = dra_pb2.Claim(namespace="team-a", uid=uid, name=name)
            answer = stub.NodePrepareResources(dra_pb2.NodePrepareResourcesRequest(claims=[ask]))
            return uid, answer.claims[uid]

        made = {}
        for name in ("three", "four"):
            uid, answer = prepare(name)
            assert answer.error == "", answer.error
            cdi = json.loads((tmp_path / f"cdi/gpupool-claim-{uid}.json").read_text())
            env = dict(e.split("=", 1) for e in cdi["devices"][0]["containerEdits"]["env"])
            made[name] = env["CUDA_VISIBLE_DEVICES"]
        assert made["three"].startswith("MIG-") and "3g.40gb-4" in made["three"]
        assert made["four"].startswith("MIG-") and "4g.40gb-0" in made["four"]
        layout = {(m.profile, m.start) for m in located[0].backend._devices[0].mig}
        assert layout == {("3g.40gb", 4), ("4g.40gb", 0)}
        # a claim allocated over the 4g's slices (as a stale allocation would be): refused
        kube.apply(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": "clash", "namespace": "team-a"},
                "spec": {
                    "devices": {
                        "requests": [
                            {"name": "gpu", "exactly": {"deviceClassName": "mig.gpupool.io"}}
                        ]
                    }
                },
            }
        )
        result = {
            "request": "gpu",
            "driver": "gpu.gpupool.io",
            "pool": "m1",
            "device": "gpu-0-mig-7g-80gb-0",
        }
        kube.api.request(
            "PATCH", f"{CLAIMS}/clash/status",
            {"status": {"allocation": {"devices": {"results": [result]}}}},
            content_type="application/merge-patch+json",
        )  # fmt: skip
        _, clash = prepare("clash")
        assert "overlaps instances in use" in clash.error, clash.error
    finally:
        server.stop(0)


def test_claims_as_nvidias_dra_driver_writes_them_are_placed_on_gpupools_cards(
    kube, start_scheduler
):
    """Issue 63: a claim of NVIDIA's class gpu.nvidia.com with a selector on NVIDIA's
    attribute names (its docs' productName / memory examples) is read as one of gpupool's,
    allocated from gpupool's devices (the API server validates the allocation) on the node of
    the model it names; one reading a card's UUID is refused naming it."""
    kube.apply(node_obj("a100s", 1))
    kube.apply(node_obj("t4s", 1, "T4"))
    start_scheduler(dra=True)
    nv = "device.attributes['gpu.nvidia.com']"
    claim_pod(kube, "t4", "gpu.nvidia.com", f"{nv}.productName.lowerAscii().matches('^.*t4.*$')")
    claim_pod(
        kube,
        "big",
        "gpu.nvidia.com",
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity(\"40Gi\")) >= 0",
    )
    claim_pod(kube, "pinned", "gpu.nvidia.com", f"{nv}.uuid == 'GPU-0f1e2d3c'")
    for name in ("t4", "big"):
        wait_for(f"{name} bound", lambda name=name: bound(kube, name), 30)
    assert bound(kube, "t4") == "t4s" and bound(kube, "big") == "a100s"
    (result,) = status(kube, "t4")["allocation"]["devices"]["results"]
    assert result["driver"] == DRIVER and result["device"] == "gpu-0"
    refused = wait_for(
        "the UUID selector's refusal",
        lambda: [e for e in kube.events("team-a", "pinned") if e["reason"] == "InvalidRequest"],
        30,
    )
    assert "'uuid'" in refused[0]["message"] and not bound(kube, "pinned")

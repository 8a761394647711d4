"""gpupool's DRA kubelet plugin (API ``v1.DRAPlugin`` over gRPC on a Unix socket, registered
through the kubelet's plugin registry): for each ResourceClaim the kubelet prepares on this
node it reads the claim's allocation (written by gpupool's scheduler, or by another
allocator that read gpupool's slices), and returns a CDI device whose environment enforces
what was allocated — the card's UUID visible, a MIG instance's UUID, and for a share the MPS
/ HAMi-core limits of its consumed memory and compute: the enforcement DRA itself does not
give (its consumable capacity is accounting only). The CDI spec is a file in ``cdi_dir``,
removed when the kubelet unprepares the claim.

A MIG claim's instance is made at prepare time if the card does not have it yet (dynamic
MIG, as the node agent does it standalone: ``agent.mig_layout``): idle instances in the way
are destroyed, never one a prepared claim uses — the MIG layout follows the claims gpupool
allocates, so no layout is fixed in advance."""

import json
import logging
import re
import threading
from collections.abc import Mapping
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc

from gpupool.agent.mig_layout import MigLayoutError, ensure_instances
from gpupool.devices.detect import Located
from gpupool.kube.api import ApiError, KubeApi
from gpupool.kube.dra.slices import DRIVER, device_name
from gpupool.kube.draplugin import dra_pb2, dra_pb2_grpc, registration_pb2, registration_pb2_grpc
from gpupool.model import SpecError
from gpupool.model.units import parse_memory_mib
from gpupool.sharing.mig import MigTable, table_for
from gpupool.sharing.runtime_env import Grant, LocalDevice, local_devices, slice_env

log = logging.getLogger(__name__)
SERVICE = "v1.DRAPlugin"  # k8s.io/kubelet/pkg/apis/dra/v1 DRAPluginService
PLUGINS_DIR = f"/var/lib/kubelet/plugins/{DRIVER}"
REGISTRY_DIR = "/var/lib/kubelet/plugins_registry"
CDI_DIR = "/var/run/cdi"
CDI_KIND = f"{DRIVER}/claim"
_DEVICE = re.compile(r"^gpu-(\d+)(?:-mig-(.+)-(\d+))?$")


def claim_grants(
    claim: Mapping[str, Any], node: str, models: Mapping[int, str]
) -> list[tuple[str, str, Grant]]:
    """(request, device name, grant) of each device of gpupool's driver the claim's
    allocation gives on ``node``; ``models``: the node's card models by index (to read a MIG
    device's profile back from its name). SpecError names what does not add up."""
    allocation = ((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}
    out = []
    for r in allocation.get("results") or []:
        if r.get("driver") != DRIVER or r.get("pool") != node:
            continue
        name = str(r.get("device", ""))
        m = _DEVICE.match(name)
        if m is None or int(m.group(1)) not in models:
            raise SpecError(f"device {name}: not one of this node's ({node})")
        index = int(m.group(1))
        if m.group(2) is not None:
            table = table_for(models[index])
            profiles = table.profiles if isinstance(table, MigTable) else ()
            start = int(m.group(3))
            found = [p for p in profiles if device_name("gpu", index, "mig", p.name, start) == name]
            if not found:
                raise SpecError(f"device {name}: no such MIG placement on a {models[index]}")
            grant = Grant(index, 0, found[0].memory_mib, False, found[0].name, start)
        elif r.get("consumedCapacity"):
            used = r["consumedCapacity"]
            mem = parse_memory_mib(str(used.get("memory", "0")))
            grant = Grant(index, int(str(used.get("compute", "0"))), mem, False)
        else:
            grant = Grant(index, 100, 0, True)
        out.append((str(r.get("request", "")), name, grant))
    return out


def _mig_uuids(grants: list[Grant], local: Mapping[int, LocalDevice]) -> set[str]:
    return {
        uuid
        for g in grants
        if g.mig_profile is not None
        for p, s, uuid in local[g.device].mig
        if (p, s) == (g.mig_profile, g.mig_start)
    }


def cdi_spec(claim_uid: str, env: Mapping[str, str]) -> dict[str, Any]:
    """A CDI spec (v0.6.0) of one device, the claim, whose edits set ``env``."""
    return {
        "cdiVersion": "0.6.0",
        "kind": CDI_KIND,
        "devices": [
            {
                "name": claim_uid,
                "containerEdits": {"env": [f"{k}={v}" for k, v in sorted(env.items())]},
            }
        ],
    }


class ClaimPlugin(dra_pb2_grpc.DRAPluginServicer):
    def __init__(
        self,
        api: KubeApi,
        node: str,
        located: list[Located],
        cdi_dir: str = CDI_DIR,
        hami_core: str | None = None,
    ):
        self.api = api
        self.node = node
        self.local: dict[int, LocalDevice] = local_devices(located)
        self.models = {loc.index: loc.device.model for loc in located}
        self.cdi_dir = Path(cdi_dir)
        self.hami_core = hami_core
        self.located = {loc.index: loc for loc in located}
        self.lock = threading.Lock()  # prepares change the cards' MIG layout one at a time
        # claim UID -> the MIG instances it was prepared with (never destroyed while it is)
        self.in_use: dict[str, set[str]] = self._prepared_before()

    def _prepared_before(self) -> dict[str, set[str]]:
        """The MIG instances of claims prepared before a restart (their CDI specs)."""
        out: dict[str, set[str]] = {}
        for spec in self.cdi_dir.glob("gpupool-claim-*.json"):
            try:
                body = json.loads(spec.read_text())
                env = dict(e.split("=", 1) for e in body["devices"][0]["containerEdits"]["env"])
            except (OSError, ValueError, KeyError, IndexError):
                continue
            uid = spec.name.removeprefix("gpupool-claim-").removesuffix(".json")
            out[uid] = {
                u for u in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if u.startswith("MIG-")
            }
        return out

    def _spec_path(self, uid: str) -> Path:
        return self.cdi_dir / f"gpupool-claim-{uid}.json"

    def _prepare(self, claim: Any) -> dra_pb2.NodePrepareResourceResponse:
        path = f"/apis/resource.k8s.io/v1/namespaces/{claim.namespace}/resourceclaims/{claim.name}"
        try:
            got = self.api.request("GET", path)
            if (got.get("metadata") or {}).get("uid") != claim.uid:
                raise SpecError(f"claim {claim.name}: its UID is not {claim.uid} (made again)")
            found = claim_grants(got, self.node, self.models)
            if not found:
                raise SpecError(f"claim {claim.name}: no device of {DRIVER} on {self.node}")
            grants = [g for _, _, g in found]
            with self.lock:
                busy = set().union(*(v for k, v in self.in_use.items() if k != claim.uid))
                ensure_instances(grants, self.local, self.located, busy)
                env = slice_env(grants, self.local, self.hami_core)
                self.in_use[claim.uid] = _mig_uuids(grants, self.local)
        except (ApiError, SpecError, MigLayoutError) as exc:
            return dra_pb2.NodePrepareResourceResponse(error=str(exc))
        self.cdi_dir.mkdir(parents=True, exist_ok=True)
        target = self._spec_path(claim.uid)
        tmp = target.with_suffix(".tmp")
        tmp.write_text(json.dumps(cdi_spec(claim.uid, env), indent=1))
        tmp.replace(target)  # whole or not at all: the runtime may read it at any time
        cdi = f"{CDI_KIND}={claim.uid}"
        devices = [
            dra_pb2.Device(
                request_names=[req], pool_name=self.node, device_name=name, cdi_device_ids=[cdi]
            )
            for req, name, _ in found
        ]
        return dra_pb2.NodePrepareResourceResponse(devices=devices)

    def NodePrepareResources(
        self, request: Any, context: grpc.ServicerContext
    ) -> dra_pb2.NodePrepareResourcesResponse:
        return dra_pb2.NodePrepareResourcesResponse(
            claims={c.uid: self._prepare(c) for c in request.claims}
        )

    def NodeUnprepareResources(
        self, request: Any, context: grpc.ServicerContext
    ) -> dra_pb2.NodeUnprepareResourcesResponse:
        out = {}
        for c in request.claims:
            try:
                self._spec_path(c.uid).unlink(missing_ok=True)
                with self.lock:
                    self.in_use.pop(c.uid, None)
                out[c.uid] = dra_pb2.NodeUnprepareResourceResponse()
            except OSError as exc:
                out[c.uid] = dra_pb2.NodeUnprepareResourceResponse(error=str(exc))
        return dra_pb2.NodeUnprepareResourcesResponse(claims=out)


class Registrar(registration_pb2_grpc.RegistrationServicer):
    """What the kubelet's plugin watcher asks on the registry socket."""

    def __init__(self, endpoint: str):
        self.endpoint = endpoint
        self.status: list[tuple[bool, str]] = []

    def GetInfo(self, request: Any, context: grpc.ServicerContext) -> Any:
        return registration_pb2.PluginInfo(
            type="DRAPlugin", name=DRIVER, endpoint=self.endpoint, supported_versions=[SERVICE]
        )

    def NotifyRegistrationStatus(self, request: Any, context: grpc.ServicerContext) -> Any:
        self.status.append((request.plugin_registered, request.error))
        if not request.plugin_registered:
            log.error("the kubelet refused the DRA plugin: %s", request.error)
        return registration_pb2.RegistrationStatusResponse()


def serve(
    plugin: ClaimPlugin, plugin_dir: str = PLUGINS_DIR, registry_dir: str = REGISTRY_DIR
) -> tuple[grpc.Server, Registrar]:
    """The plugin on ``plugin_dir/dra.sock`` and its registration on
    ``registry_dir/gpu.gpupool.io-reg.sock``, where the kubelet's plugin watcher finds it."""
    Path(plugin_dir).mkdir(parents=True, exist_ok=True)
    Path(registry_dir).mkdir(parents=True, exist_ok=True)
    endpoint = Path(plugin_dir) / "dra.sock"
    registry = Path(registry_dir) / f"{DRIVER}-reg.sock"
    for path in (endpoint, registry):
        path.unlink(missing_ok=True)
    registrar = Registrar(str(endpoint))
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    dra_pb2_grpc.add_DRAPluginServicer_to_server(plugin, server)
    registration_pb2_grpc.add_RegistrationServicer_to_server(registrar, server)
    server.add_insecure_port(f"unix://{endpoint}")
    server.add_insecure_port(f"unix://{registry}")
    server.start()
    return server, registrar

"""ResourceClaims of pods gpupool schedules, read as gpupool requests, and the allocation
gpupool writes back once its engine has placed the pod (pure).

A pod names its claims in ``spec.resourceClaims`` (a claim by name, or one generated from a
template, whose name the pod's ``status.resourceClaimStatuses`` gives). Of ``gpu.gpupool.io``'s
classes (``kube.dra.classes``), and NVIDIA's ``gpu.nvidia.com`` / ``mig.nvidia.com`` read as
aliases of them (``kube.dra.kinds``), one request is read per pod:

- ``gpu.gpupool.io``, ``count: N``: N whole cards (``gpu=N``), or of the models its CEL
  selectors choose (``gpu=A100-80G|H100-80G:N``; ``kube.dra.cel`` evaluates them per kind of
  device, as kube-scheduler's allocator would);
- ``mig.gpupool.io`` with selectors that choose one profile: that MIG instance;
- ``share.gpupool.io`` with ``capacity.requests`` ``memory`` and ``compute`` (percent): a
  share of one card (no amount: the whole of it, the slices' request policy);
- a prioritized list (``firstAvailable``): one option per subrequest, in order.

A selector gpupool cannot evaluate or honour, another driver's class, several requests,
``allocationMode: All`` or a claim's ``config`` are refused naming them — placing the pod
without them would be a grant the claim did not ask for.
"""

import re
import uuid
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from gpupool.kube.dra.cel import CelError, Unsupported, compile_selector
from gpupool.kube.dra.classes import CLASSES, EXTENDED, MIG_CLASSES
from gpupool.kube.dra.kinds import NVIDIA_CLASSES, Kind, Variants, kinds
from gpupool.kube.dra.slices import DRIVER, device_name, quantity_mib
from gpupool.model import SpecError
from gpupool.model.devices import model_matches
from gpupool.model.units import parse_memory_mib
from gpupool.scheduler.types import DeviceGrant, NodeGrant

FINALIZER = "resource.kubernetes.io/delete-protection"


@dataclass(frozen=True, slots=True)
class Option:
    """One way to satisfy a claim: its request (``gpu``, or ``gpu/h100`` for a subrequest of a
    prioritized list — the name the allocation's results carry), in gpupool's request grammar
    without host CPU and memory, and the mode of the cards it takes."""

    request: str
    spec: str
    mode: str  # whole, mig or share


@dataclass(frozen=True, slots=True)
class ClaimAsk:
    """One pod's claim, as gpupool reads it: which claim and the ways to satisfy it, in order
    of preference (one, or a prioritized list's subrequests)."""

    namespace: str
    name: str
    uid: str
    options: tuple[Option, ...]

    @property
    def spec(self) -> str:
        return self.options[0].spec

    @property
    def mode(self) -> str:
        return self.options[0].mode

    @property
    def request(self) -> str:
        return self.options[0].request


def claim_names(pod: Mapping[str, Any]) -> list[str] | None:
    """The names of the pod's claims; None while a template's claim is not yet made."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    made = {
        s.get("name"): s.get("resourceClaimName") for s in status.get("resourceClaimStatuses") or []
    }
    out = []
    for ref in spec.get("resourceClaims") or []:
        if ref.get("resourceClaimName"):
            out.append(str(ref["resourceClaimName"]))
        elif made.get(ref.get("name")):
            out.append(str(made[ref.get("name")]))
        else:
            return None
    return out


def _chosen(
    exactly: Mapping[str, Any], klass: str, mode: str, where: str, variants: Variants
) -> list[Kind]:
    """The kinds of device of the claim's class its selectors pick; SpecError names why
    none can be (``_pick``)."""
    texts = tuple(
        str((sel.get("cel") or {}).get("expression", "")) for sel in exactly.get("selectors") or []
    )
    picked = _pick(texts, klass, mode, variants)
    if isinstance(picked, str):
        raise SpecError(f"{where}: {picked}", field="selectors")
    return list(picked)


@lru_cache(maxsize=1024)
def _pick(
    texts: tuple[str, ...], klass: str, mode: str, variants: Variants
) -> tuple[Kind, ...] | str:
    """As kube-scheduler's allocator evaluates selectors: in order, the first false ends a
    device's test, an error on any device fails the claim (here: why it is refused). Once
    per distinct claim and cluster shape: claims repeat every cycle."""
    try:
        selectors = [compile_selector(t) for t in texts]
    except (Unsupported, CelError) as e:
        return f"selector: {_why(e)}"
    candidates = kinds(mode, klass in NVIDIA_CLASSES, variants)
    if klass in MIG_CLASSES:  # a profile's own class (what old MIG manifests map onto)
        candidates = tuple(k for k in candidates if k.profile == MIG_CLASSES[klass])
    out = []
    for kind in candidates:
        try:
            if all(s.matches(kind.device) for s in selectors):
                out.append(kind)
        except (Unsupported, CelError) as e:
            on = f"{kind.model}{'/' + kind.profile if kind.profile else ''}"
            return f"selector on {on}: {_why(e)}"
    if not out:
        return f"its selectors match no device gpupool publishes for {klass}"
    return tuple(out)


def _why(e: Exception) -> str:
    if isinstance(e, Unsupported):
        return f"{e} is not evaluated by gpupool"
    return f"{e} (kube-scheduler fails such a claim too)"


def _models_spec(
    chosen: list[Kind], mode: str, klass: str, count: int, where: str, variants: Variants
) -> str:
    """``gpu=N`` when every model is chosen, else ``gpu=M1|M2:N`` — checked to match exactly
    the chosen models the cluster has (a model name is also a family prefix). A model whose
    cards the selectors split (by their memory) is refused: gpupool asks models, not sizes."""
    every = kinds(mode, klass in NVIDIA_CLASSES, variants)
    everyone = list(dict.fromkeys(k.model for k in every))
    models = list(dict.fromkeys(k.model for k in chosen))
    for model in models:
        sizes = {k.memory_mib for k in every if k.model == model}
        taken = {k.memory_mib for k in chosen if k.model == model}
        if taken != sizes:
            raise SpecError(
                f"{where}: its selectors choose the {model} cards of "
                f"{', '.join(f'{m} MiB' for m in sorted(taken))} and not those of "
                f"{', '.join(f'{m} MiB' for m in sorted(sizes - taken))} in this cluster; "
                "gpupool asks a model, not a size"
            )
    if len(models) == len(everyone):  # NVIDIA's classes: any NVIDIA card
        return f"gpu={count},vendor=nvidia" if klass in NVIDIA_CLASSES else f"gpu={count}"
    wanted = "|".join(models)
    present = {m for m, _ in variants} or set(everyone)  # the models a node could give
    if any(model_matches(wanted, m) != (m in models) for m in everyone if m in present):
        raise SpecError(f"{where}: its selectors choose {', '.join(models)}, which gpupool "
                        "cannot ask apart from the models they name as a family")  # fmt: skip
    return f"gpu={wanted}:{count}"


def _mig_spec(chosen: list[Kind], klass: str, count: int, where: str) -> str:
    profiles = sorted({str(k.profile) for k in chosen})
    if len(profiles) != 1:
        raise SpecError(
            f"{where}: a MIG claim chooses one profile; its selectors choose "
            f"{', '.join(profiles[:6])}{' ...' if len(profiles) > 6 else ''} "
            '(...profile == "3g.40gb")'
        )
    (profile,) = profiles
    having = {k.model for k in kinds("mig", klass in NVIDIA_CLASSES) if k.profile == profile}
    models = {k.model for k in chosen}
    if models != having:
        raise SpecError(
            f"{where}: its selectors choose {profile} of {', '.join(sorted(models))} only; "
            f"gpupool's MIG request names a profile, which {', '.join(sorted(having))} have"
        )
    return f"mig={profile}:{count}"


def claim_ask(claim: Mapping[str, Any], variants: Variants = ()) -> ClaimAsk:
    """The claim as gpupool requests; SpecError names what gpupool cannot honour.
    ``variants``: the (model, memory MiB) of the cluster's cards, which selectors on a
    card's memory read (``kinds.kinds``)."""
    meta = claim.get("metadata") or {}
    ns, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
    where = f"ResourceClaim {ns}/{name}"
    requests = ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []
    if len(requests) != 1:
        raise SpecError(f"{where}: {len(requests)} device requests (gpupool reads one)")
    (req,) = requests
    for config in ((claim.get("spec") or {}).get("devices") or {}).get("config") or []:
        driver = (config.get("opaque") or {}).get("driver", "?")
        raise SpecError(
            f"{where}: a config for driver {driver} (its sharing or other settings) is not "
            "read by gpupool; the claim's devices would not be set up as it says"
        )
    if "firstAvailable" in req:  # a prioritized list: the first that can be had, in order
        subs = req.get("firstAvailable") or []
        if not subs:
            raise SpecError(f"{where}: request {req.get('name')}: an empty firstAvailable")
        options = tuple(
            _option(sub, f"{req.get('name')}/{sub.get('name')}", where, variants) for sub in subs
        )
    else:
        options = (_option(req.get("exactly") or {}, str(req.get("name", "")), where, variants),)
    return ClaimAsk(ns, name, str(meta.get("uid", "")), options)


def _option(
    exactly: Mapping[str, Any], request: str, where: str, variants: Variants = ()
) -> Option:
    klass = str(exactly.get("deviceClassName", ""))
    if klass not in CLASSES and klass not in MIG_CLASSES and klass not in NVIDIA_CLASSES:
        raise SpecError(
            f"{where}: device class {klass!r} is not gpupool's ({', '.join(CLASSES)}) nor one "
            f"it reads as an alias ({', '.join(NVIDIA_CLASSES)}); leave the pod to the "
            "scheduler of that driver",
            field="deviceClassName",
        )
    if exactly.get("allocationMode", "ExactCount") != "ExactCount":
        raise SpecError(f"{where}: allocationMode {exactly['allocationMode']} is not read")
    count = int(exactly.get("count", 1))
    mode = CLASSES.get(klass) or NVIDIA_CLASSES.get(klass) or "mig"
    chosen = _chosen(exactly, klass, mode, where, variants)
    if mode == "mig":
        spec = _mig_spec(chosen, klass, count, where)
    else:
        spec = _models_spec(chosen, mode, klass, count, where, variants)
    if mode == "share":
        capacity = (exactly.get("capacity") or {}).get("requests") or {}
        extra = set(capacity) - {"memory", "compute"}
        if extra or count != 1:
            raise SpecError(
                f"{where}: a share asks one card's memory and compute ({extra or count})"
            )
        if "compute" in capacity:
            spec += f",gpu_share={int(str(capacity['compute']))}%"
        if "memory" in capacity:
            spec += f",gpu_mem={parse_memory_mib(str(capacity['memory']))}MiB"
        if "compute" not in capacity and "memory" not in capacity:
            spec += ",gpu_share=100%"  # the slices' default: the whole of it
    elif exactly.get("capacity"):
        raise SpecError(f"{where}: capacity requests are for {klass} only of share.gpupool.io")
    return Option(request, spec, mode)


@dataclass(frozen=True, slots=True)
class ClaimWrite:
    """A claim's status to write before its pod is bound; ``create``: the claim to make first
    (an extended-resource claim), ``pod_status``: the pod's ``extendedResourceClaimStatus``."""

    namespace: str
    name: str
    status: dict[str, Any]
    create: dict[str, Any] | None = None
    pod: str = ""
    pod_status: dict[str, Any] | None = None
    join: bool = False  # the claim is allocated: only add the pod (status) to its reservedFor


def allocation(
    ask: ClaimAsk, piece: NodeGrant, pod: Mapping[str, Any], option: Option | None = None
) -> dict[str, Any]:
    """The claim's ``status`` once gpupool placed its pod by ``option`` (default: the
    first): the devices of the grant, on its node, reserved for the pod."""
    option = option or ask.options[0]
    results = []
    for d in piece.devices:
        result: dict[str, Any] = {
            "request": option.request,
            "driver": DRIVER,
            "pool": piece.node,
            "device": granted_device(d),
        }
        if option.mode == "share":
            result["shareID"] = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{ask.uid}/{d.device}"))
            result["consumedCapacity"] = {
                "memory": quantity_mib(d.mem_mib),
                "compute": str(d.compute_pct),
            }
        results.append(result)
    meta = pod.get("metadata") or {}
    return _allocated(results, piece.node, meta.get("name"), meta.get("uid"))


def granted_device(d: DeviceGrant) -> str:
    """The device of gpupool's slices a grant's device is: a card, or a MIG placement."""
    if d.mig_profile is not None:
        return device_name("gpu", d.device, "mig", d.mig_profile, d.mig_start)
    return device_name("gpu", d.device)


def _allocated(
    results: list[dict[str, Any]], node: str, pod: object, uid: object
) -> dict[str, Any]:
    """A claim's status: allocated ``results`` on ``node``, reserved for the pod."""
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    return {
        "allocation": {
            "devices": {"results": results},
            "nodeSelector": {"nodeSelectorTerms": [term]},
        },
        "reservedFor": [{"resource": "pods", "name": pod, "uid": uid}],
    }


def held_elsewhere(claims: Iterable[Mapping[str, Any]], ours: set[str]) -> dict[str, set[int]]:
    """Per node, the cards of gpupool's driver that claims gpupool did not allocate hold
    (kube-scheduler's allocator, or another that read our slices): gpupool gives them to no
    one. ``ours``: UIDs of the claims gpupool allocated (their pods' grants hold them)."""
    out: dict[str, set[int]] = {}
    for claim in claims:
        if str((claim.get("metadata") or {}).get("uid")) in ours:
            continue
        got = ((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}
        for r in got.get("results") or []:
            if r.get("driver") != DRIVER:
                continue
            m = re.match(r"^gpu-(\d+)", str(r.get("device", "")))
            if m:
                out.setdefault(str(r.get("pool")), set()).add(int(m.group(1)))
    return out


def stale(claims: Iterable[Mapping[str, Any]], live_pods: set[str]) -> list[Mapping[str, Any]]:
    """Claims of gpupool's driver allocated for pods that are all gone: to deallocate (the
    resourceclaim controller's job, which gpupool does where it runs without one)."""
    out = []
    for claim in claims:
        status = claim.get("status") or {}
        results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
        if not results or any(r.get("driver") != DRIVER for r in results):
            continue
        users = [str(r.get("uid")) for r in status.get("reservedFor") or []]
        if not any(u in live_pods for u in users):
            out.append(claim)
    return out


EXTENDED_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
EXTENDED_RESOURCE = "nvidia.com/gpu"  # gpu.gpupool.io's extendedResourceName


def _taken_for(resource: str, count: int, devices: list[Any]) -> list[str] | None:
    """Device names of ``count`` of the grant's devices that serve ``resource`` (taken out of
    ``devices``); None when the grant has not that many."""
    profile = resource.removeprefix("nvidia.com/mig-") if resource != EXTENDED_RESOURCE else None
    out: list[str] = []
    for d in list(devices):
        if len(out) == count:
            break
        if d.mig_profile == profile:
            devices.remove(d)
            out.append(granted_device(d))
    return out if len(out) == count else None


def extended_claim(
    pod: Mapping[str, Any], piece: NodeGrant, advertised: Set[str]
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]] | None:
    """For a pod asking ``nvidia.com/gpu`` or ``nvidia.com/mig-<profile>`` in its containers,
    bound to a node that does not advertise it (a node served by DRA alone; ``advertised``:
    what it does): the special claim the kubelet then prepares (as kube-scheduler makes one
    under the gate DRAExtendedResource: owned by the pod, one request
    ``container-<i>-request-<j>`` per container and resource, <i> its index among init
    containers and containers, <j> the resource's among its sorted requests, of the class
    whose extendedResourceName it is), its status from the grant's devices, and the pod's
    ``extendedResourceClaimStatus``. None when nothing is to map, an init container asks
    some (not mapped), or the grant does not hold what the requests say."""
    spec, meta = pod.get("spec") or {}, pod.get("metadata") or {}
    mapped = {r: k for r, k in EXTENDED.items() if r not in advertised}
    if any(_asked(c, mapped) for c in spec.get("initContainers") or []):
        return None
    requests, mappings = [], []
    containers = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
    for i, c in enumerate(containers):
        keys = sorted(_container_requests(c))
        for resource, count in sorted(_asked(c, mapped).items()):
            name = f"container-{i}-request-{keys.index(resource)}"
            requests.append((name, resource, count))
            mappings.append(
                {"containerName": c.get("name"), "resourceName": resource, "requestName": name}
            )
    if not requests:
        return None
    left = list(piece.devices)
    results = []
    for name, resource, count in requests:
        taken = _taken_for(resource, count, left)
        if taken is None:
            return None
        results += [
            {"request": name, "driver": DRIVER, "pool": piece.node, "device": d} for d in taken
        ]
    pod_name, uid = str(meta.get("name")), str(meta.get("uid"))
    claim_name = f"{pod_name}-extended-resources-{uuid.uuid5(uuid.NAMESPACE_URL, uid).hex[:5]}"
    owner = {"apiVersion": "v1", "kind": "Pod", "name": pod_name, "uid": uid,
             "controller": True, "blockOwnerDeletion": True}  # fmt: skip
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": claim_name,
            "namespace": meta.get("namespace"),
            "annotations": {EXTENDED_ANNOTATION: "true"},
            "ownerReferences": [owner],
        },
        "spec": {
            "devices": {
                "requests": [
                    {"name": n, "exactly": {"deviceClassName": mapped[r],
                                            "allocationMode": "ExactCount", "count": k}}
                    for n, r, k in requests
                ]
            }
        },
    }  # fmt: skip
    status = _allocated(results, piece.node, pod_name, uid)
    pod_status = {"resourceClaimName": claim_name, "requestMappings": mappings}
    return body, status, pod_status


def _asked(c: Mapping[str, Any], mapped: Mapping[str, str]) -> dict[str, int]:
    """The mapped extended resources a container asks, and how many."""
    out: dict[str, int] = {}
    for resource, raw in _container_requests(c).items():
        if resource in mapped:
            try:
                n = int(str(raw))
            except ValueError:
                continue
            if n > 0:
                out[resource] = n
    return out


def _container_requests(c: Mapping[str, Any]) -> dict[str, Any]:
    res = c.get("resources") or {}
    return {**(res.get("limits") or {}), **(res.get("requests") or {})}

"""Node objects of the API server as gpupool nodes (pure).

Accelerators come from allocatable extended resources (``nvidia.com/gpu``,
``huawei.com/Ascend910B``, ...) and the labels NVIDIA's GPU feature discovery sets
(``nvidia.com/gpu.product``, ``nvidia.com/gpu.memory`` in MiB, ``nvidia.com/gpu.count``). When
gpupool's node agent runs as a DaemonSet it writes the discovered devices (with UUIDs) into the
``gpupool.io/devices`` annotation, which then wins. A node takes no new work when it is cordoned,
or not Ready; its NoSchedule/NoExecute taints keep away the pods that do not tolerate them.
"""

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from gpupool.devices.naming import model_name
from gpupool.kube.left_out import LeftOutCause, NodeLeftOut
from gpupool.kube.quantity import count, cpu_millis, memory_mib_floor
from gpupool.model import Device, Node, SharingMode, SpecError, Vendor, make_devices
from gpupool.model.devices import catalog_entry

DEVICES_ANNOTATION = "gpupool.io/devices"
SHARING_LABEL = "gpupool.io/sharing"
POOL_LABEL = "gpupool.io/pool"
NVIDIA_GPU = "nvidia.com/gpu"
REPLICA_RESOURCE = "nvidia.com/gpu.shared"  # the device plugin's replicas, renamed
# GPU feature discovery's labels of the device plugin's own sharing (time-slicing, MPS)
REPLICAS_LABEL = "nvidia.com/gpu.replicas"
STRATEGY_LABEL = "nvidia.com/gpu.sharing-strategy"
MIG_STRATEGY_LABEL = "nvidia.com/mig.strategy"  # GPU feature discovery: none, single, mixed
MIG_PREFIX = "nvidia.com/mig-"  # the device plugin's MIG instances (mixed strategy)
# HAMi's device plugin registers each card here (``{uuid},{split count},{memory},...:``, or
# a JSON list in newer releases) and advertises nvidia.com/gpu as cards x split count
HAMI_REGISTER = "hami.io/node-nvidia-register"
# extended resources of other vendors' device plugins -> the catalog model they advertise
VENDOR_RESOURCES: dict[str, str] = {
    "huawei.com/Ascend910B": "Ascend910B",
    "huawei.com/Ascend910": "Ascend910B",
    "huawei.com/Ascend310P": "Ascend310P",
    "cambricon.com/mlu": "MLU370",
    "hygon.com/dcu": "K100",
}
# taints every pod gpupool schedules tolerates: the GPU operator taints GPU nodes with their
# resource name, and Kubernetes' ExtendedResourceToleration adds that toleration to GPU pods
DEFAULT_TOLERATED = frozenset({NVIDIA_GPU, *VENDOR_RESOURCES})


@dataclass(frozen=True, slots=True)
class KubeNode:
    """A node as the scheduler sees it, and why it takes no new work ("" when it does)."""

    node: Node
    closed: str = ""
    # replicas per card of a node whose device plugin shares its cards (time-slicing, MPS)
    # under nvidia.com/gpu.shared; 0 for a node that does not
    replicas: int = 0


def _meta(obj: Mapping[str, Any], key: str) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get(key) or {})


def closed_reason(obj: Mapping[str, Any]) -> str:
    """Why the node takes no pod at all: cordoned or not Ready. (Taints exclude the pods that
    do not tolerate them: ``kube.selectors``.)"""
    spec = obj.get("spec") or {}
    if spec.get("unschedulable"):
        return "cordoned"
    conditions = (obj.get("status") or {}).get("conditions") or []
    ready = next((c for c in conditions if c.get("type") == "Ready"), None)
    if ready is None or ready.get("status") != "True":
        return "not Ready"
    return ""


def _mode(labels: Mapping[str, str], name: str) -> SharingMode:
    raw = labels.get(SHARING_LABEL, "whole")
    try:
        return SharingMode(raw)
    except ValueError:
        raise SpecError(
            f"node {name}: label {SHARING_LABEL}={raw!r} is not whole, mig or share",
            field=SHARING_LABEL,
        ) from None


def _from_annotation(raw: str, name: str, mode: SharingMode) -> tuple[Device, ...]:
    try:
        items = json.loads(raw)
        devices = tuple(
            Device(
                index=int(d["index"]),
                model=str(d["model"]),
                vendor=Vendor(d.get("vendor", "nvidia")),
                memory_mib=int(d["memory_mib"]),
                uuid=str(d.get("uuid", "")),
                healthy=bool(d.get("healthy", True)),
                mode=mode,
                island=d.get("island"),
            )
            for d in items
        )
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise SpecError(
            f"node {name}: annotation {DEVICES_ANNOTATION} is not a device list ({exc})",
            field=DEVICES_ANNOTATION,
        ) from None
    return devices


def _replicas(
    labels: Mapping[str, str], allocatable: Mapping[str, Any], name: str, mode: SharingMode
) -> tuple[int, int]:
    """(cards, replicas per card) of a node whose device plugin shares its cards by
    time-slicing or MPS replicas; (0, 0) for a node that does not. Replicas are read only
    under the renamed resource ``nvidia.com/gpu.shared`` (the device plugin's
    ``renameByDefault``): advertised as ``nvidia.com/gpu`` they look like cards to every pod
    that asks cards, so such a node is refused naming the fix."""
    n = count(allocatable.get(NVIDIA_GPU, 0), f"node {name}: {NVIDIA_GPU}")
    shared = count(allocatable.get(REPLICA_RESOURCE, 0), f"node {name}: {REPLICA_RESOURCE}")
    strategy = labels.get(STRATEGY_LABEL, "")
    replicas = labels.get(REPLICAS_LABEL, "1")
    physical = labels.get("nvidia.com/gpu.count", "")
    multiplied = (  # an older GFD without the strategy label: the count is cards x replicas
        not strategy and replicas.isdigit() and int(replicas) > 1 and physical.isdigit()
        and n == int(physical) * int(replicas)
    )  # fmt: skip
    if not shared and (strategy in ("time-slicing", "mps") or multiplied):
        # each card advertised several times (8 cards x 4 = 32): read as cards, they were 32
        # exclusive A100s, and a pod asking a card cannot say it wants a replica
        raise NodeLeftOut(
            f"node {name}: the device plugin shares its cards ({strategy or 'replicas'}, "
            f"{REPLICAS_LABEL}={replicas}) under {NVIDIA_GPU}, where replicas and cards look "
            f"alike; set renameByDefault: true in its sharing config (replicas become "
            f"{REPLICA_RESOURCE}, which gpupool reads), or turn that sharing off and label the "
            "node gpupool.io/sharing=share to let gpupool share its cards",
            LeftOutCause.REPLICAS_AS_CARDS,
            field=REPLICAS_LABEL,
        )
    if not shared:
        return 0, 0
    if not replicas.isdigit() or int(replicas) < 2:
        raise SpecError(
            f"node {name}: {REPLICA_RESOURCE}: {shared} without a replica count "
            f"({REPLICAS_LABEL}={replicas!r})",
            field=REPLICAS_LABEL,
        )
    per_card = int(replicas)
    cards = int(physical) if physical.isdigit() else shared // per_card
    if n or cards * per_card != shared:
        raise SpecError(
            f"node {name}: {REPLICA_RESOURCE}: {shared} is not {cards} cards x {per_card} "
            f"replicas{f' (and {NVIDIA_GPU}: {n} beside it)' if n else ''}",
            field=REPLICA_RESOURCE,
        )
    if per_card > 100 or 100 // (100 // per_card) != per_card:
        raise SpecError(
            f"node {name}: {REPLICAS_LABEL}={per_card}: gpupool counts a share of a card in "
            "whole percents, and that many replicas do not fill a card in them (use 2-12, "
            "14, 16, 20, 25, 33, 50 or 100)",
            field=REPLICAS_LABEL,
        )
    if mode is not SharingMode.SHARE and SHARING_LABEL in labels:
        raise SpecError(
            f"node {name}: label {SHARING_LABEL}={mode.value} on a node whose device plugin "
            f"shares its cards as {REPLICA_RESOURCE}",
            field=SHARING_LABEL,
        )
    return cards, per_card


def _check_mig(
    labels: Mapping[str, str], allocatable: Mapping[str, Any], name: str, mode: SharingMode, n: int
) -> None:
    """A node whose device plugin advertises MIG instances is read only as a MIG node."""
    product = labels.get("nvidia.com/gpu.product", "")
    if n and labels.get(MIG_STRATEGY_LABEL) == "single" and "-MIG-" in product:
        raise NodeLeftOut(
            f"node {name}: MIG's single strategy advertises MIG instances as {NVIDIA_GPU}: "
            f"{n} ({product}), which look like cards to every pod asking cards; use the "
            f"mixed strategy (instances as {MIG_PREFIX}<profile>) and label the node "
            f"{SHARING_LABEL}=mig",
            LeftOutCause.MIG_SINGLE,
            field=MIG_STRATEGY_LABEL,
        )
    instances = {
        r: v
        for r, v in allocatable.items()
        if r.startswith(MIG_PREFIX) and count(v, f"node {name}: {r}")
    }
    if instances and mode is not SharingMode.MIG:
        said = ", ".join(f"{r}: {v}" for r, v in sorted(instances.items()))
        raise NodeLeftOut(
            f"node {name}: its device plugin advertises MIG instances ({said}) but the node "
            f"is not labelled {SHARING_LABEL}=mig, so gpupool would read no card there; label "
            f"it: kubectl label node {name} {SHARING_LABEL}=mig",
            LeftOutCause.MIG_UNLABELLED,
            field=SHARING_LABEL,
        )


def _hami_cards(raw: str) -> list[int]:
    """Each card's split count in HAMi's register annotation (empty: not readable)."""
    try:
        if raw.lstrip().startswith("["):
            return [int(d.get("count", 0)) for d in json.loads(raw)]
        return [int(entry.split(",")[1]) for entry in raw.split(":") if "," in entry]
    except (ValueError, TypeError, AttributeError, IndexError):
        return []


def _check_hami(annotations: Mapping[str, str], allocatable: Mapping[str, Any], name: str) -> None:
    """A node HAMi's device plugin serves is left out: it advertises each card as its split
    count (8 cards as 80) and its Allocate serves only pods HAMi's scheduler annotated."""
    if HAMI_REGISTER not in annotations:
        return
    n = count(allocatable.get(NVIDIA_GPU, 0), f"node {name}: {NVIDIA_GPU}")
    if not n:
        return  # HAMi's plugin gone (its annotation left behind)
    splits = _hami_cards(annotations[HAMI_REGISTER])
    cards = f"{len(splits)} card(s)" if splits else "its cards"
    split = f", each split {splits[0]} ways" if splits and len(set(splits)) == 1 else ""
    raise NodeLeftOut(
        f"node {name}: HAMi's device plugin serves it ({HAMI_REGISTER}: {cards}{split}, "
        f"advertised as {NVIDIA_GPU}: {n}); read as cards they would be {n} exclusive cards, "
        "and HAMi's device plugin admits only pods HAMi's scheduler annotated "
        "(hami.io/vgpu-devices-to-allocate), so a pod gpupool binds there would fail at the "
        "kubelet; run gpupool's device plugin there instead of HAMi's, or leave that node's "
        "pods to HAMi",
        LeftOutCause.HAMI,
        field=HAMI_REGISTER,
    )


def _nvidia(
    labels: Mapping[str, str], allocatable: Mapping[str, Any], name: str, mode: SharingMode
) -> tuple[tuple[Device, ...], int]:
    """The node's NVIDIA cards and, for a node of device-plugin replicas, how many per card."""
    n = count(allocatable.get(NVIDIA_GPU, 0), f"node {name}: {NVIDIA_GPU}")
    shared_cards, replicas = _replicas(labels, allocatable, name, mode)
    _check_mig(labels, allocatable, name, mode, n)
    if replicas:
        n, mode = shared_cards, SharingMode.SHARE
    if mode is SharingMode.MIG and "nvidia.com/gpu.count" in labels:  # MIG hides whole cards
        n = count(labels["nvidia.com/gpu.count"], f"node {name}: label nvidia.com/gpu.count")
    if n == 0:
        return (), 0
    product = labels.get("nvidia.com/gpu.product", "")
    raw_memory = labels.get("nvidia.com/gpu.memory")
    memory = count(raw_memory, f"node {name}: label nvidia.com/gpu.memory") if raw_memory else 0
    model = model_name(Vendor.NVIDIA, product.replace("-", " "), memory) if product else ""
    if not model or catalog_entry(model) is None:
        raise SpecError(
            f"node {name}: GPU product {product or '(no nvidia.com/gpu.product label)'!r} "
            "is not in gpupool's catalog",
            field="nvidia.com/gpu.product",
        )
    devices = make_devices(model, n, mode=mode, node=name)
    if memory:
        devices = tuple(replace(d, memory_mib=memory) for d in devices)
    return devices, replicas


def node_from_object(obj: Mapping[str, Any]) -> KubeNode:
    """Translate one Node object; a SpecError names what on the object is wrong."""
    name = str((obj.get("metadata") or {}).get("name") or "")
    if not name:
        raise SpecError("node: object has no metadata.name", field="metadata.name")
    labels = _meta(obj, "labels")
    annotations = _meta(obj, "annotations")
    allocatable = (obj.get("status") or {}).get("allocatable") or {}
    mode = _mode(labels, name)
    _check_hami(annotations, allocatable, name)
    replicas = 0
    if DEVICES_ANNOTATION in annotations:
        devices = _from_annotation(annotations[DEVICES_ANNOTATION], name, mode)
    else:
        devices, replicas = _nvidia(labels, allocatable, name, mode)
        if not devices:
            for resource, model in VENDOR_RESOURCES.items():
                n = count(allocatable.get(resource, 0), f"node {name}: {resource}")
                if n:
                    devices = make_devices(model, n, mode=mode, node=name)
                    break
    node = Node(
        name=name,
        cpu_millis=cpu_millis(allocatable.get("cpu", 0), f"node {name}: cpu"),
        memory_mib=memory_mib_floor(allocatable.get("memory", 0), f"node {name}: memory"),
        devices=devices,
        labels=labels,
        pool=labels.get(POOL_LABEL, "default"),
    )
    return KubeNode(node, closed_reason(obj), replicas)

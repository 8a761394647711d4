"""What a pod's containers ask for, read as Kubernetes counts it, in gpupool's terms (pure).

The effective request of a pod is Kubernetes' own rule: per resource, the larger of what its
largest init container asks and what its containers ask together (sidecars — init containers
that keep running, ``restartPolicy: Always`` — count with the containers). A container's
request is its ``requests`` entry, else its ``limits`` one.

GPU resources users already write are read with the meaning they have elsewhere:

- ``nvidia.com/gpu`` and the other vendors' card counts: whole cards;
- ``nvidia.com/mig-<profile>`` (the device plugin's mixed strategy): MIG instances;
- HAMi's ``nvidia.com/gpucores`` (percent of each card) and ``nvidia.com/gpumem`` (MiB of
  each card) beside ``nvidia.com/gpu``: shares of that many cards (100% and no memory cap,
  or ``gpumem-percentage: 100``, is a whole card each);
- ``nvidia.com/gpu.shared`` (the device plugin's time-slicing or MPS replicas, renamed): one
  replica, a share of ``1/R`` of a card on a node of R replicas per card (``kube.inventory``).

Anything else that would decide where a pod may run — another extended resource, HAMi's
memory percentage below 100, or HAMi's card-selection annotations — is refused naming it:
placing the pod without it would be a silent grant the node may not honour.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gpupool.kube.inventory import NVIDIA_GPU, REPLICA_RESOURCE, VENDOR_RESOURCES
from gpupool.kube.quantity import count, cpu_millis, memory_mib
from gpupool.model import SpecError

GPU_CORES = "nvidia.com/gpucores"
GPU_MEM = "nvidia.com/gpumem"
GPU_MEM_PCT = "nvidia.com/gpumem-percentage"
MIG_PREFIX = "nvidia.com/mig-"
SLICE = "gpupool.io/slice"  # gpupool's own device plugin: the grant says what it holds
HAMI_ANNOTATIONS = (
    "nvidia.com/use-gputype", "nvidia.com/nouse-gputype", "nvidia.com/use-gpuuuid",
    "nvidia.com/nouse-gpuuuid", "nvidia.com/vgpu-mode", "hami.io/gpu-scheduler-policy",
    "hami.io/node-scheduler-policy",
)  # fmt: skip


@dataclass
class PodResources:
    cpu: int = 0  # millicores
    mem: int = 0  # MiB
    cards: int = 0  # whole cards (nvidia.com/gpu and the other vendors')
    mig: dict[str, int] = field(default_factory=dict)  # profile -> instances
    cores: int | None = None  # HAMi: percent of each card
    gpumem: int | None = None  # HAMi: MiB of each card
    gpumem_pct: int | None = None  # HAMi: percent of each card's memory
    replicas: int = 0  # the device plugin's replicas (nvidia.com/gpu.shared)
    slice: int = 0  # gpupool's device plugin's unit (gpupool.io/slice)
    # what it asks of the node's device plugins, by resource name, as the kubelet counts it
    devices: dict[str, int] = field(default_factory=dict)

    @property
    def shares(self) -> bool:
        """Whether HAMi's resources make its cards shares (not whole cards)."""
        if self.gpumem is not None:
            return True
        return self.cores is not None and self.cores < 100

    def grammar(self, replica_pct: int | None = None) -> str | None:
        """The device part in gpupool's request grammar; None when the pod asks no device.
        ``replica_pct``: the share of a card one device-plugin replica is on this cluster's
        nodes (None: no node serves replicas)."""
        if self.replicas:
            return self._replica(replica_pct)
        if self.mig:
            if len(self.mig) > 1 or self.cards or self.cores or self.gpumem:
                raise SpecError(
                    "resources: one pod asks for one kind of device (MIG instances of one "
                    f"profile, or cards): it asks {self._said()}",
                    field="resources",
                )
            ((profile, n),) = self.mig.items()
            return f"mig={profile}:{n}"
        shared = self.cores is not None or self.gpumem is not None or self.gpumem_pct is not None
        if not shared:
            return f"gpu={self.cards}" if self.cards else None
        if not self.cards:
            raise SpecError(
                f"resources: {self._said()} without {NVIDIA_GPU} (how many cards it shares)",
                field="resources",
            )
        if self.gpumem_pct not in (None, 100):
            raise SpecError(
                f"resources: {GPU_MEM_PCT}: {self.gpumem_pct} is not read by gpupool (a share of "
                f"each card's memory depends on the card it gets); ask {GPU_MEM} in MiB",
                field=GPU_MEM_PCT,
            )
        if not self.shares:
            return f"gpu={self.cards}"  # HAMi's way of asking whole cards
        if not self.slice:
            raise SpecError(self._unenforced(), field=SLICE)
        parts = [f"gpu={self.cards}"]
        if self.cores is not None and self.cores < 100:
            parts.append(f"gpu_share={self.cores}%")
        if self.gpumem is not None:
            parts.append(f"gpu_mem={self.gpumem}MiB")
        return ",".join(parts)

    def _unenforced(self) -> str:
        """Why a HAMi share without gpupool's device plugin is refused, and what to write."""
        share = [f"gpu={self.cards}"]
        share += [f"gpu_share={self.cores}%"] if self.cores is not None and self.cores < 100 else []
        share += [f"gpu_mem={self.gpumem}MiB"] if self.gpumem is not None else []
        return (
            f"resources: {self._said()}: a share HAMi's device plugin enforces; here the "
            f"kubelet hands {NVIDIA_GPU}: {self.cards} as {self.cards} whole card(s) (NVIDIA's "
            "device plugin) and nothing would hold the pod to its share. Ask the share from "
            f"gpupool's device plugin: replace {NVIDIA_GPU}, {GPU_CORES} and {GPU_MEM} with "
            f"the limit {SLICE}: 1 and the annotation gpupool.io/request: {','.join(share)}"
        )

    def _replica(self, replica_pct: int | None) -> str:
        if self.cards or self.mig or self.cores is not None or self.gpumem is not None:
            raise SpecError(
                f"resources: {self._said()}: a device-plugin replica ({REPLICA_RESOURCE}) "
                "is not asked beside other devices",
                field="resources",
            )
        if self.replicas > 1:
            raise SpecError(
                f"resources: {REPLICA_RESOURCE}: {self.replicas}: more than one replica of a "
                "shared card is refused (the device plugin's failRequestsGreaterThanOne: "
                "replicas of one card add no compute, and MPS refuses them); ask 1, or whole "
                f"cards with {NVIDIA_GPU}",
                field=REPLICA_RESOURCE,
            )
        if replica_pct is None:
            raise SpecError(
                f"resources: {REPLICA_RESOURCE}: no node gpupool reads serves device-plugin "
                f"replicas ({REPLICA_RESOURCE} with the nvidia.com/gpu.replicas label)",
                field=REPLICA_RESOURCE,
            )
        return f"gpu=1,gpu_share={replica_pct}%"

    def _said(self) -> str:
        out = [f"{NVIDIA_GPU}: {self.cards}"] if self.cards else []
        out += [f"{MIG_PREFIX}{p}: {n}" for p, n in self.mig.items()]
        out += [f"{GPU_CORES}: {self.cores}"] if self.cores is not None else []
        out += [f"{GPU_MEM}: {self.gpumem}"] if self.gpumem is not None else []
        out += [f"{REPLICA_RESOURCE}: {self.replicas}"] if self.replicas else []
        return ", ".join(out) or "nothing"


def _asks(container: Mapping[str, Any]) -> dict[str, Any]:
    res = container.get("resources") or {}
    requests, limits = res.get("requests") or {}, res.get("limits") or {}
    return {name: requests.get(name, limits.get(name)) for name in {*requests, *limits}}


def _read(name: str, value: Any, where: str) -> int | None:
    """A resource's amount in gpupool's unit, or None for one left to the kubelet."""
    what = f"{where} {name}"
    if name == "cpu":
        return cpu_millis(value, what)
    if name == "memory":
        return memory_mib(value, what)
    if name == "ephemeral-storage" or name.startswith("hugepages-"):
        return None  # the kubelet's to account, on any node
    if name in (NVIDIA_GPU, GPU_CORES, GPU_MEM, GPU_MEM_PCT, REPLICA_RESOURCE, SLICE):
        return count(value, what)
    if name in VENDOR_RESOURCES:
        return count(value, what)
    if name.startswith(MIG_PREFIX):  # mig-<profile>: the profile is checked with the request
        return count(value, what)
    raise SpecError(
        f"{what}: gpupool does not place pods by {name!r} (it cannot know which nodes have "
        "it); remove it, or leave the pod to the default scheduler",
        field="resources",
        token=name,
    )


def _total(containers: Iterable[Mapping[str, Any]], where: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in containers:
        for name, value in _asks(c).items():
            if value is None:
                continue
            amount = _read(name, value, f"{where}: container {c.get('name', '?')}")
            if amount is not None:
                out[name] = out.get(name, 0) + amount
    return out


def pod_resources(pod: Mapping[str, Any]) -> PodResources:
    """The pod's effective request (Kubernetes' rule), read as the module says; SpecError
    names what gpupool cannot honour."""
    meta = pod.get("metadata") or {}
    where = f"pod {meta.get('namespace', 'default')}/{meta.get('name', '')}"
    annotations = meta.get("annotations") or {}
    steered = [a for a in HAMI_ANNOTATIONS if a in annotations]
    if steered:
        raise SpecError(
            f"{where}: annotation {steered[0]} (HAMi's) is not read by gpupool; ask a model "
            "with gpupool.io/request (gpu=A100-80G:2)",
            field=steered[0],
        )
    spec = pod.get("spec") or {}
    inits = spec.get("initContainers") or []
    sidecars = [c for c in inits if c.get("restartPolicy") == "Always"]
    running = _total([*(spec.get("containers") or []), *sidecars], where)
    effective = dict(running)
    for c in inits:
        if c.get("restartPolicy") == "Always":
            continue
        for name, amount in _total([c], where).items():
            effective[name] = max(effective.get(name, 0), amount)
    out = PodResources(cpu=effective.get("cpu", 0), mem=effective.get("memory", 0))
    for name, amount in effective.items():
        if name in (NVIDIA_GPU, *VENDOR_RESOURCES):
            out.cards += amount
        elif name.startswith(MIG_PREFIX) and amount:
            out.mig[name.removeprefix(MIG_PREFIX)] = amount
    out.cores = effective.get(GPU_CORES)
    out.gpumem = effective.get(GPU_MEM)
    out.gpumem_pct = effective.get(GPU_MEM_PCT)
    out.replicas = effective.get(REPLICA_RESOURCE, 0)
    out.slice = effective.get(SLICE, 0)
    out.devices = {r: n for r, n in effective.items() if n and is_device_resource(r)}
    return out


def is_device_resource(name: str) -> bool:
    """Whether a device plugin advertises ``name`` (the kubelet admits a pod only for as
    many as its node advertises)."""
    return name in (NVIDIA_GPU, REPLICA_RESOURCE, SLICE, *VENDOR_RESOURCES) or name.startswith(
        MIG_PREFIX
    )

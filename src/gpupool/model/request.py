"""The resource request grammar shared by CLI, API and trace loaders.

``gpu=A100-80G:2,cpu=4,mem=32GiB`` — two whole A100-80G cards, 4 CPUs, 32 GiB RAM.
``gpu_mem=20GiB,cpu=4`` — a 20 GiB slice of one shared card (no compute guarantee).
``gpu_share=0.5,gpu_mem=10GiB`` — half the compute of one shared card and 10 GiB of it.
``mig=3g.40gb`` — one MIG instance of that profile; ``mig=1g.10gb:2`` two of them.
``vnpu=vir05_1c_16g:2`` — two Ascend vNPUs of that template (scheduled as MIG instances are).
``gpu=8,topology=nvlink`` — eight whole cards on one NVLink island.
``gpu=V100M16|V100M32:1`` — one card of either model (a trace's ``gpu_spec``).
``vendor=ascend`` — restrict any GPU ask to one vendor.
``gpu=4,node=whole`` — a whole node with at least 4 cards: every card and CPU of it, nothing
else placed there (sbatch --exclusive); ``mem=all`` — all of a node's memory (--mem=0).

Keys: gpu, gpu_mem, gpu_share, mig, vnpu, cpu, mem, topology, vendor, node. See
docs/request-grammar.md.
"""

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from gpupool.model.devices import Vendor, canonical_model, catalog_entry
from gpupool.model.errors import SpecError
from gpupool.model.units import format_mib, parse_cpu_millis, parse_memory_mib, parse_share_percent

KEYS = ("gpu", "gpu_mem", "gpu_share", "mig", "vnpu", "cpu", "mem", "topology", "vendor", "node")
MEM_ALL = "all"  # mem=all: all of a node's memory (sbatch --mem=0)
MAX_GPUS_PER_REQUEST = 1024
_MODEL_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9._ -]*\d[A-Za-z0-9._ -]*$")
_MIG_PROFILE = re.compile(r"^\d+g\.\d+gb(\+me)?$")
_VNPU_TEMPLATE = re.compile(r"^vir\d{2}(_\d+c)?(_\d+g)?(_[a-z]+)?$")  # vir04, vir10_3c_32g


class Topology(StrEnum):
    NVLINK = "nvlink"  # all cards on one NVLink / HCCS island
    NODE = "node"  # all cards on one node (the default)
    ANY = "any"  # may span nodes, on as few as possible
    # network levels (node labels, gpupool.scheduler.topology): all of the job — every gang
    # worker, every node of a spanning request — under one leaf switch, block, rack or zone
    LEAF = "leaf"
    BLOCK = "block"
    RACK = "rack"
    ZONE = "zone"


NETWORK_LEVELS = (Topology.LEAF, Topology.BLOCK, Topology.RACK, Topology.ZONE)
PREFER = "prefer-"  # topology=prefer-leaf: under one leaf if it can, else as low as it can


class NodeUse(StrEnum):
    SHARED = "shared"  # the default: the node's other cards, CPUs and memory are others'
    WHOLE = "whole"  # every card and CPU of the node, nothing else placed there (--exclusive)


class SliceKind(StrEnum):
    NONE = "none"  # CPU-only
    WHOLE = "whole"
    SHARE = "share"
    MIG = "mig"


@dataclass(frozen=True, slots=True)
class ResourceRequest:
    """What one job (or one gang worker) needs. Per-device fields apply to each device.

    The slice kind follows from the fields: ``mig_profile`` gives MIG; ``gpu_share_pct`` gives
    a fractional share of ``gpu`` devices; ``gpu_mem_mib`` with ``gpu=0`` gives a memory-only
    share of one device (stored with ``gpu=1``); ``gpu>0`` otherwise gives whole cards, each
    with at least ``gpu_mem_mib`` of memory when that is set.
    """

    gpu: int = 0
    gpu_model: str | None = None
    gpu_mem_mib: int | None = None
    gpu_share_pct: int | None = None
    mig_profile: str | None = None
    cpu_millis: int = 0
    mem_mib: int = 0
    topology: Topology = Topology.NODE
    vendor: Vendor | None = None
    topology_preferred: bool = False  # a network level the job prefers, not requires
    # the whole node: every card (at least ``gpu`` of them) and CPU of it, and ``mem_mib``
    # (all of it without mem=); nothing else is placed there while the job runs
    whole_node: bool = False
    mem_all: bool = False  # all of the node's memory (mem=all); ``mem_mib`` is then 0
    kind: SliceKind = field(init=False)

    def __post_init__(self) -> None:
        if self.mig_profile:
            kind = SliceKind.MIG
        elif self.gpu_share_pct is not None:
            kind = SliceKind.SHARE
        elif self.gpu_mem_mib is not None and self.gpu == 0 and not self.gpu_model:
            kind = SliceKind.SHARE
            object.__setattr__(self, "gpu", 1)
        elif self.gpu or self.gpu_model or self.vendor is not None:
            kind = SliceKind.WHOLE  # a bare vendor=X asks for one card of that vendor
            object.__setattr__(self, "gpu", max(self.gpu, 1))
        else:
            kind = SliceKind.NONE
        object.__setattr__(self, "kind", kind)
        _validate(self)

    def with_host(self, cpu_millis: int, mem_mib: int) -> "ResourceRequest":
        """The same request with other host CPU and memory (``dataclasses.replace`` would run
        ``__post_init__`` again, which reads a memory-only share's gpu=1 as a whole card)."""
        out = copy.copy(self)
        object.__setattr__(out, "cpu_millis", cpu_millis)
        object.__setattr__(out, "mem_mib", mem_mib)
        _validate(out)
        return out

    @property
    def memory_only(self) -> bool:
        """A share that asks for device memory and no compute guarantee (HAMi-style)."""
        return self.kind is SliceKind.SHARE and self.gpu_share_pct is None

    @property
    def is_vnpu(self) -> bool:
        """An Ascend vNPU template rather than an NVIDIA MIG profile."""
        return bool(self.mig_profile and _VNPU_TEMPLATE.match(self.mig_profile))

    @property
    def gpu_count(self) -> int:
        """Devices (or MIG instances) the request takes; 0 for CPU-only."""
        return 0 if self.kind is SliceKind.NONE else self.gpu

    def to_spec(self) -> str:
        """The canonical string form; ``parse_request(r.to_spec()) == r``."""
        parts: list[str] = []
        if self.kind is SliceKind.MIG:
            key = "vnpu" if self.is_vnpu else "mig"
            parts.append(f"{key}={self.mig_profile}" + (f":{self.gpu}" if self.gpu != 1 else ""))
        elif self.kind is not SliceKind.NONE and not self.memory_only:
            model = f"{self.gpu_model}:" if self.gpu_model else ""
            parts.append(f"gpu={model}{self.gpu}")
        if self.gpu_share_pct is not None:
            parts.append(f"gpu_share={self.gpu_share_pct}%")
        if self.gpu_mem_mib is not None:
            parts.append(f"gpu_mem={format_mib(self.gpu_mem_mib)}")
        if self.cpu_millis:
            parts.append(f"cpu={self.cpu_millis}m")
        if self.mem_mib:
            parts.append(f"mem={format_mib(self.mem_mib)}")
        if self.mem_all:
            parts.append(f"mem={MEM_ALL}")
        if self.topology is not Topology.NODE:
            prefer = PREFER if self.topology_preferred else ""
            parts.append(f"topology={prefer}{self.topology}")
        if self.vendor is not None:
            parts.append(f"vendor={self.vendor}")
        if self.whole_node:
            parts.append(f"node={NodeUse.WHOLE}")
        return ",".join(parts) or "cpu=0"

    def __str__(self) -> str:
        return self.to_spec()


def _validate(r: ResourceRequest) -> None:
    if not 0 <= r.gpu <= MAX_GPUS_PER_REQUEST:
        raise SpecError(f"gpu: count {r.gpu} out of range 0..{MAX_GPUS_PER_REQUEST}", field="gpu")
    if r.cpu_millis < 0 or r.mem_mib < 0:
        raise SpecError("cpu/mem: must not be negative", field="cpu")
    if r.gpu_mem_mib is not None and r.gpu_mem_mib <= 0:
        raise SpecError("gpu_mem: must be above 0", field="gpu_mem")
    if r.mig_profile is not None:
        key = "vnpu" if r.is_vnpu else "mig"
        if not (_MIG_PROFILE.match(r.mig_profile) or r.is_vnpu):
            raise SpecError(
                f"mig: {r.mig_profile!r} is not a MIG profile or vNPU template "
                "(expected e.g. mig=3g.40gb, mig=1g.10gb+me or vnpu=vir10_3c_32g)",
                token=r.mig_profile,
                field="mig",
            )
        if r.gpu_share_pct is not None or r.gpu_mem_mib is not None or r.gpu_model:
            raise SpecError(
                f"{key}: cannot be combined with gpu=MODEL, gpu_share or gpu_mem "
                "(the profile already fixes the slice)",
                field=key,
            )
        if r.gpu < 1:
            raise SpecError(f"{key}: instance count must be at least 1", field=key)
    if r.gpu_share_pct is not None and r.gpu < 1:
        raise SpecError("gpu_share: needs at least one device (gpu=0 given)", field="gpu_share")
    if r.gpu_model and r.gpu < 1:
        raise SpecError(f"gpu: model {r.gpu_model} with a count of 0", field="gpu")
    if r.kind is SliceKind.SHARE and r.gpu_share_pct is None and r.gpu != 1:
        raise SpecError("gpu_mem: a memory-only share takes exactly one device", field="gpu_mem")
    if r.vendor is not None and r.gpu_model:
        entry = catalog_entry(r.gpu_model)
        if entry is not None and entry.vendor is not r.vendor:
            raise SpecError(
                f"vendor: {r.gpu_model} is made by {entry.vendor}, not {r.vendor}",
                field="vendor",
            )
    if r.topology is Topology.NVLINK and r.kind is not SliceKind.WHOLE:
        raise SpecError("topology=nvlink: only applies to whole-card requests", field="topology")
    if r.mem_all and r.mem_mib:
        raise SpecError("mem: all or a size, not both", field="mem")
    if r.whole_node and r.kind in (SliceKind.SHARE, SliceKind.MIG):
        raise SpecError(
            f"node=whole takes whole cards, every card of the node (not {r.kind} slices)",
            field="node",
        )
    if r.whole_node and r.topology in (Topology.NVLINK, Topology.ANY):
        raise SpecError(
            f"node=whole: one node a worker (not topology={r.topology}; a gang of whole "
            "nodes spans nodes)",
            field="node",
        )
    if r.topology_preferred and r.topology not in NETWORK_LEVELS:
        raise SpecError(
            f"topology: only a network level can be preferred (prefer-leaf, prefer-block, "
            f"prefer-rack, prefer-zone), not {r.topology}",
            field="topology",
        )


def _parse_gpu(value: str) -> tuple[str | None, int]:
    model, sep, count = value.rpartition(":")
    if not sep:
        if value.strip().isdigit():
            return None, int(value)
        model, count = value, "1"
    count = count.strip()
    if not count.isdigit():
        raise SpecError(
            f"gpu: {value!r} has count {count!r} (expected gpu=N, gpu=MODEL or gpu=MODEL:N)",
            token=value,
            field="gpu",
        )
    alternatives = [m.strip() for m in model.split("|")]
    if not all(_MODEL_NAME.match(m) for m in alternatives):
        raise SpecError(
            f"gpu: {value!r} is neither a count nor a model name "
            "(expected gpu=N, gpu=MODEL or gpu=MODEL:N, e.g. gpu=A100-80G:2)",
            token=value,
            field="gpu",
        )
    return "|".join(canonical_model(m) for m in alternatives), int(count)


def _enum(cls: type[StrEnum], key: str, value: str) -> Any:
    try:
        return cls(value.strip().lower())
    except ValueError:
        choices = "|".join(m.value for m in cls)
        raise SpecError(
            f"{key}: {value!r} is not one of {choices}", token=value, field=key
        ) from None


def request_from_mapping(fields: Mapping[str, Any]) -> ResourceRequest:
    """Build a request from structured input (API body, YAML) with the grammar's keys."""
    unknown = [k for k in fields if k not in KEYS]
    if unknown:
        raise SpecError(
            f"unknown key {unknown[0]!r} (expected one of {', '.join(KEYS)})",
            token=str(unknown[0]),
            field=str(unknown[0]),
        )
    gpu, model, given = 0, None, False
    if "gpu" in fields and fields["gpu"] is not None:
        raw = fields["gpu"]
        if isinstance(raw, bool) or not isinstance(raw, int | str):
            raise SpecError(f"gpu: {raw!r} is not a count or MODEL:N", field="gpu")
        if isinstance(raw, int):
            gpu = raw
        else:
            model, gpu = _parse_gpu(raw)
        given = True
    mig = None
    if fields.get("mig") is not None and fields.get("vnpu") is not None:
        raise SpecError(
            "vnpu: cannot be combined with mig= (one slice kind a request)", field="vnpu"
        )
    for key in ("mig", "vnpu"):
        if fields.get(key) is None:
            continue
        profile, sep, count = str(fields[key]).strip().lower().partition(":")
        if sep and not count.isdigit():
            raise SpecError(
                f"{key}: count {count!r} is not a number (expected {key}=NAME or NAME:N)",
                token=str(fields[key]),
                field=key,
            )
        if given:
            raise SpecError(f"{key}: cannot be combined with gpu= (use {key}=NAME:N)", field=key)
        if key == "vnpu" and not _VNPU_TEMPLATE.match(profile):
            raise SpecError(
                f"vnpu: {profile!r} is not a vNPU template (expected e.g. vir05_1c_16g, vir04)",
                token=profile,
                field="vnpu",
            )
        if key == "mig" and _VNPU_TEMPLATE.match(profile):
            raise SpecError(
                f"mig: {profile!r} is a vNPU template (use vnpu={profile})", field="mig"
            )
        mig, gpu, given = profile, int(count) if sep else 1, True
    share = None
    if fields.get("gpu_share") is not None:
        share = parse_share_percent(fields["gpu_share"])
    gpu_mem = None
    if fields.get("gpu_mem") is not None:
        gpu_mem = parse_memory_mib(fields["gpu_mem"], "gpu_mem")
    if share is not None and not given:
        gpu = 1
    topology = str(fields.get("topology") or "node").strip().lower()
    mem = fields.get("mem", 0) or 0
    mem_all = isinstance(mem, str) and mem.strip().lower() == MEM_ALL
    use = _enum(NodeUse, "node", str(fields.get("node") or NodeUse.SHARED))
    return ResourceRequest(
        gpu=gpu,
        gpu_model=model,
        gpu_mem_mib=gpu_mem,
        gpu_share_pct=share,
        mig_profile=mig,
        cpu_millis=parse_cpu_millis(fields.get("cpu", 0) or 0),
        mem_mib=0 if mem_all else parse_memory_mib(mem, "mem"),
        mem_all=mem_all,
        whole_node=use is NodeUse.WHOLE,
        topology=_enum(Topology, "topology", topology.removeprefix(PREFER)),
        topology_preferred=topology.startswith(PREFER),
        vendor=_enum(Vendor, "vendor", str(fields["vendor"])) if fields.get("vendor") else None,
    )


def parse_request(spec: str) -> ResourceRequest:
    """Parse ``key=value,key=value``; errors name the bad token and what was expected."""
    if not isinstance(spec, str) or not spec.strip():
        raise SpecError("request: empty spec (expected e.g. gpu=1,cpu=4,mem=16GiB)", token="")
    fields: dict[str, str] = {}
    for position, token in enumerate(spec.split(","), start=1):
        token = token.strip()
        if not token:
            raise SpecError(f"request: empty item at position {position} in {spec!r}", token="")
        key, sep, value = token.partition("=")
        key = key.strip().lower()
        if not sep or not value.strip():
            raise SpecError(
                f"request: {token!r} is not key=value (expected one of {', '.join(KEYS)})",
                token=token,
            )
        if key not in KEYS:
            raise SpecError(
                f"request: unknown key {key!r} in {token!r} (expected one of {', '.join(KEYS)})",
                token=token,
                field=key,
            )
        if key in fields:
            raise SpecError(f"request: {key!r} given twice", token=token, field=key)
        fields[key] = value.strip()
    return request_from_mapping(fields)

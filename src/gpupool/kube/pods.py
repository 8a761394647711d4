"""Pods as gpupool jobs (pure).

A pod asks through the ``gpupool.io/request`` annotation in the request grammar
(``gpu=A100-80G:1,mem=20Gi``) or through its containers' resources as users write them
(``nvidia.com/gpu``, ``nvidia.com/mig-1g.10gb``, HAMi's ``gpucores``/``gpumem``, cpu, memory,
init containers by Kubernetes' rule: ``pod_resources``). Pods naming one gang
(``gpupool.io/gang``, or the pod-group label of the coscheduling plugin / Volcano) with
``gpupool.io/gang-size: N`` form one job placed all or nothing. The
tenant is the namespace's, as the configuration maps it; the priority class is the pod's
PriorityClass (its value from ``spec.priority``) or the configured default.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from gpupool.kube.config import KubeConfig
from gpupool.kube.inventory import REPLICA_RESOURCE
from gpupool.kube.pod_groups import GroupSizes
from gpupool.kube.pod_resources import pod_resources
from gpupool.model import Job, JobKind, ResourceRequest, SpecError, Topology, parse_request
from gpupool.scheduler.types import NodeGrant
from gpupool.sharing.mig import models_with_profile

REQUEST_ANNOTATION = "gpupool.io/request"
KIND_ANNOTATION = "gpupool.io/kind"
GANG_ANNOTATION = "gpupool.io/gang"
GANG_SIZE_ANNOTATION = "gpupool.io/gang-size"
GANG_LABELS = ("scheduling.x-k8s.io/pod-group", "scheduling.k8s.io/group-name")
GANG_ANNOTATIONS = (GANG_ANNOTATION, "scheduling.k8s.io/group-name")
TERMINAL_PHASES = ("Succeeded", "Failed")


def pod_key(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', 'default')}/{meta.get('name', '')}"


def meta(pod: Mapping[str, Any], key: str) -> dict[str, str]:
    return dict((pod.get("metadata") or {}).get(key) or {})


def is_terminal(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in TERMINAL_PHASES


def uid_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


def node_of(pod: Mapping[str, Any]) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")


def gated_gangs(pods: Iterable[Mapping[str, Any]], groups: GroupSizes | None) -> dict[str, int]:
    """Per gang (``NS/gang/NAME``), how many of ``pods`` (the scheduling-gated) are its."""
    out: dict[str, int] = {}
    for pod in pods:
        try:
            gang = gang_of(pod, groups)
        except SpecError:
            continue
        if gang is not None:
            gid = f"{pod_key(pod).split('/', 1)[0]}/gang/{gang[0]}"
            out[gid] = out.get(gid, 0) + 1
    return out


def scheduling_gates(pod: Mapping[str, Any]) -> list[str]:
    """The names of the pod's ``spec.schedulingGates`` (Kueue's ``kueue.x-k8s.io/admission``,
    ...): while any is left the pod is not to be scheduled."""
    gates = (pod.get("spec") or {}).get("schedulingGates") or []
    return [str(g.get("name", "?")) if isinstance(g, Mapping) else str(g) for g in gates]


def created_at(pod: Mapping[str, Any]) -> float:
    raw = (pod.get("metadata") or {}).get("creationTimestamp")
    if not raw:
        return 0.0
    try:
        return datetime.fromisoformat(str(raw).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def container_requests(pod: Mapping[str, Any]) -> tuple[int, int, int]:
    """CPU millicores, memory MiB and accelerators the pod holds (its effective request:
    ``pod_resources``); a MIG instance, a share or a replica counts as its card."""
    r = pod_resources(pod)
    return r.cpu, r.mem, r.cards + sum(r.mig.values()) + r.replicas


def _parsed(spec: str, what: str, field: str) -> ResourceRequest:
    """``spec`` in the request grammar, its MIG profile known; errors say it came from
    ``what`` (the annotation, or the containers' resources)."""
    try:
        request = parse_request(spec)
        if request.mig_profile:
            models_with_profile(request.mig_profile)
    except SpecError as exc:
        raise SpecError(f"{what}: {exc}", field=field) from None
    return request


def granted_pct(piece: NodeGrant) -> int | None:
    """The share of a card a bound pod's grant gives (what one replica was when it was
    placed); None for a grant of no device."""
    return piece.devices[0].compute_pct if piece.devices else None


def request_of(pod: Mapping[str, Any], replica_pct: int | None = None) -> ResourceRequest:
    """What one pod needs: the annotation in the request grammar, else its containers'
    resources (``pod_resources``); the annotation's host CPU and memory default to theirs.
    ``replica_pct``: the share of a card one device-plugin replica is here (None: none)."""
    asked = pod_resources(pod)
    cpu, mem = asked.cpu, asked.mem
    spec = meta(pod, "annotations").get(REQUEST_ANNOTATION)
    if spec is not None and asked.replicas:
        raise SpecError(
            f"annotation {REQUEST_ANNOTATION} beside {REPLICA_RESOURCE}: a replica is the "
            "device plugin's to give; ask one or the other",
            field=REQUEST_ANNOTATION,
        )
    if spec is None:
        devices = asked.grammar(replica_pct)
        if devices is None:
            return ResourceRequest(gpu=0, cpu_millis=cpu, mem_mib=mem)
        return _parsed(devices, "resources", "resources").with_host(cpu, mem)
    request = _parsed(spec, f"annotation {REQUEST_ANNOTATION}", REQUEST_ANNOTATION)
    if request.topology is Topology.ANY and request.gpu_count > 1:
        raise SpecError(
            f"annotation {REQUEST_ANNOTATION}: topology=any cannot split one pod over nodes "
            "(use a gang of pods)",
            field=REQUEST_ANNOTATION,
        )
    return request.with_host(request.cpu_millis or cpu, request.mem_mib or mem)


class GroupMissing(SpecError):
    """A gang's pod whose PodGroup is not seen: refused, once it is old enough that its
    PodGroup is not merely on its way (the PodGroup and the pod come by separate watches)."""


GROUP_GRACE_S = 15.0


def gang_of(pod: Mapping[str, Any], groups: GroupSizes | None = None) -> tuple[str, int] | None:
    """(gang name, size) when the pod belongs to a gang: its size from the
    ``gpupool.io/gang-size`` annotation, else its PodGroup's ``minMember`` (``groups``:
    Volcano's or the coscheduling plugin's, by namespace and name; a string says why that
    group is refused)."""
    labels, annotations = meta(pod, "labels"), meta(pod, "annotations")
    name = next((annotations[k] for k in GANG_ANNOTATIONS if annotations.get(k)), None)
    name = name or next((labels[k] for k in GANG_LABELS if labels.get(k)), None)
    if not name:
        return None
    raw = annotations.get(GANG_SIZE_ANNOTATION)
    if raw is None:
        size = (groups or {}).get((pod_key(pod).split("/", 1)[0], name))
        if isinstance(size, str):
            raise SpecError(size, field="spec.queue")
        if size is not None:
            return name, size
        raise GroupMissing(
            f"gang {name}: no PodGroup {name} with minMember here, nor annotation "
            f"{GANG_SIZE_ANNOTATION} (how many pods it needs)",
            field=GANG_SIZE_ANNOTATION,
        )
    if not raw.isdigit() or int(raw) < 1:
        raise SpecError(
            f"annotation {GANG_SIZE_ANNOTATION}: {raw!r} is not a positive count",
            field=GANG_SIZE_ANNOTATION,
        )
    return name, int(raw)


def _recreated(pod: Mapping[str, Any]) -> bool:
    """Whether a controller (a ReplicaSet, Job, StatefulSet, ...) makes the pod again."""
    owners = (pod.get("metadata") or {}).get("ownerReferences") or []
    return any(o.get("controller") for o in owners)


@dataclass
class PodJob:
    """One job made of pods: a single pod, or a gang's pods in name order (worker order)."""

    job: Job
    pods: list[str] = field(default_factory=list)


def job_for(
    pod: Mapping[str, Any],
    job_id: str,
    config: KubeConfig,
    gang: int,
    replica_pct: int | None = None,
) -> Job:
    """The job a pod (or a gang's first pod) makes; SpecError names what is wrong.
    ``replica_pct``: as ``request_of``."""
    key = pod_key(pod)
    namespace = key.split("/", 1)[0]
    tenant = config.namespaces.get(namespace)
    if tenant is None:
        raise SpecError(
            f"namespace {namespace!r} has no gpupool tenant (map it under 'namespaces' in the "
            "gpupool configuration)",
            field="namespace",
        )
    spec = pod.get("spec") or {}
    klass = spec.get("priorityClassName") or config.default_priority_class
    kind_raw = meta(pod, "annotations").get(KIND_ANNOTATION, "batch")
    try:
        kind = JobKind(kind_raw)
    except ValueError:
        raise SpecError(
            f"annotation {KIND_ANNOTATION}: {kind_raw!r} is not one of "
            + ", ".join(k.value for k in JobKind),
            field=KIND_ANNOTATION,
        ) from None
    deadline = spec.get("activeDeadlineSeconds")
    return Job(
        id=job_id,
        request=request_of(pod, replica_pct),
        tenant=tenant,
        kind=kind,
        priority_class=klass,
        priority=0,
        gang_size=gang,
        max_runtime_s=int(deadline) if isinstance(deadline, int) and deadline > 0 else None,
        submit_time=created_at(pod),
        # a pod stopped is deleted; one a controller makes again (and no inference replica,
        # which would break a service) may be moved by defragmentation: "suspend" tells the
        # engine so (a bare pod stopped is gone for good, so it is never moved)
        on_preempt="suspend" if _recreated(pod) and kind is not JobKind.INFERENCE else "kill",
    )


def class_values(pods: Iterable[Mapping[str, Any]], known: Mapping[str, int]) -> dict[str, int]:
    """Priority classes: the known ones, plus each PriorityClass a pod names with the
    value the API server resolved into ``spec.priority``."""
    classes = dict(known)
    for pod in pods:
        spec = pod.get("spec") or {}
        name = spec.get("priorityClassName")
        if name and name not in classes and isinstance(spec.get("priority"), int):
            classes[name] = spec["priority"]
    return classes


@dataclass
class Grouped:
    """Pods as jobs: jobs by id; per pod that cannot be a job, why (refused); per pod that
    waits for others before it may be placed, why (a CPU-only member of a gang whose GPU
    pods are not placed yet)."""

    jobs: dict[str, PodJob] = field(default_factory=dict)
    problems: dict[str, str] = field(default_factory=dict)
    waiting: dict[str, str] = field(default_factory=dict)
    # gang pods younger than GROUP_GRACE_S whose PodGroup is not seen yet: not placed, and
    # nothing written (it is most likely on its way); refused once older
    held: dict[str, str] = field(default_factory=dict)


def group_pods(
    pods: Iterable[Mapping[str, Any]],
    config: KubeConfig,
    groups: GroupSizes | None = None,
    placed_gangs: set[str] | frozenset[str] = frozenset(),
    replica_pct: int | None = None,
    now: float | None = None,
    gated_gangs: Mapping[str, int] | None = None,
) -> Grouped:
    """Group pods into jobs. ``groups``: PodGroups' sizes (``gang_of``); ``placed_gangs``:
    gangs (``NS/gang/NAME``) some of whose pods are bound already; ``replica_pct``: as
    ``request_of``; ``now`` (epoch seconds): a gang pod whose PodGroup is not seen is held,
    not refused, while younger than ``GROUP_GRACE_S`` (None: refused at once);
    ``gated_gangs``: per gang, how many of its pods are scheduling-gated (not in ``pods``):
    the rest wait for them instead of being refused as too few.

    Mixed roles, as Volcano's jobs have them (a CPU-only master beside GPU workers): the GPU
    pods are the gang, placed all or nothing; the CPU-only ones follow once it is placed —
    until then they wait saying so. GPU pods of one gang must still ask alike."""
    out = Grouped()
    gated_gangs = gated_gangs or {}
    gangs: dict[str, list[Mapping[str, Any]]] = {}
    sizes: dict[str, int] = {}
    for pod in pods:
        key = pod_key(pod)
        try:
            gang = gang_of(pod, groups)
            if gang is None:
                out.jobs[key] = PodJob(job_for(pod, key, config, 1, replica_pct), [key])
                continue
            gid = f"{key.split('/', 1)[0]}/gang/{gang[0]}"
            if sizes.setdefault(gid, gang[1]) != gang[1]:
                raise SpecError(
                    f"gang {gang[0]}: pods disagree on {GANG_SIZE_ANNOTATION} "
                    f"({sizes[gid]} and {gang[1]})",
                    field=GANG_SIZE_ANNOTATION,
                )
            gangs.setdefault(gid, []).append(pod)
        except GroupMissing as exc:
            young = now is not None and now - created_at(pod) < GROUP_GRACE_S
            (out.held if young else out.problems)[key] = str(exc)
        except SpecError as exc:
            out.problems[key] = str(exc)
    for gid, members in gangs.items():
        members.sort(key=pod_key)
        try:
            _gang(
                gid, members, sizes[gid], config, gid in placed_gangs, out, replica_pct,
                gated_gangs.get(gid, 0),
            )  # fmt: skip
        except SpecError as exc:
            for p in members:
                out.problems[pod_key(p)] = str(exc)
    return out


def _gang(
    gid: str,
    members: list[Mapping[str, Any]],
    size: int,
    config: KubeConfig,
    placed: bool,
    out: Grouped,
    replica_pct: int | None,
    gated: int = 0,
) -> None:
    name = gid.rsplit("/", 1)[1]
    asks = {pod_key(p): request_of(p, replica_pct) for p in members}
    gpu = [p for p in members if asks[pod_key(p)].gpu_count > 0]
    followers = [p for p in members if asks[pod_key(p)].gpu_count == 0] if gpu or placed else []
    if placed and not gpu:  # its GPU pods are placed: the rest go on their own
        for p in followers:
            key = pod_key(p)
            out.jobs[key] = PodJob(job_for(p, key, config, 1, replica_pct), [key])
        return
    if len(members) > size and GANG_SIZE_ANNOTATION not in meta(members[0], "annotations"):
        size = len(members)  # a PodGroup's minMember below its pods: all placed together
    if len(members) < size and gated:  # Kueue ungates a workload's pods one by one
        for p in members:
            out.waiting[pod_key(p)] = (
                f"gang {name}: {gated} of its pods still scheduling-gated "
                f"({len(members)} of {size} free to place)"
            )
        return
    if len(members) != size:
        raise SpecError(f"gang {name}: {len(members)} of {size} pods exist")
    gang = gpu if followers else members  # mixed roles: the GPU pods are the gang
    if len({asks[pod_key(p)] for p in gang}) > 1:
        raise SpecError(f"gang {name}: its pods ask for different resources")
    first = job_for(gang[0], gid, config, len(gang), replica_pct)
    out.jobs[gid] = PodJob(first, [pod_key(p) for p in gang])
    for p in followers:  # the others follow it
        out.waiting[pod_key(p)] = (
            f"gang {name}: a CPU-only member, placed once its {len(gpu)} GPU pod(s) are"
        )

"""The Kubernetes mode's settings: which namespace is which tenant, the tenants' quotas, the
priority classes gpupool knows, and scheduler knobs. Read from a YAML file (a ConfigMap in
``deploy/kubernetes``); every error names the field."""

import re
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from gpupool.model import DEFAULT_PRIORITY_CLASSES, SpecError, parse_cpu_millis, parse_memory_mib
from gpupool.model.errors import from_validation
from gpupool.scheduler.tenants import CARD, Quota, Tenant, TenantTree

SCHEDULER_NAME = "gpupool"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class QuotaSpec(_Strict):
    """Cards for ``gpu`` / ``gpu:MODEL``, a quantity for ``cpu`` (``8``, ``500m``) and
    ``gpu_mem`` (``80GiB``); ``borrowing``/``lending`` null mean unlimited."""

    nominal: float | str = 0
    borrowing: float | str | None = None
    lending: float | str | None = None


class TenantSpec(_Strict):
    name: Annotated[str, Field(min_length=1)]
    parent: str | None = None
    weight: Annotated[float, Field(gt=0)] = 1.0
    quotas: dict[str, QuotaSpec] = Field(default_factory=dict)


CLUSTER_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


class KubeConfig(_Strict):
    scheduler_name: str = SCHEDULER_NAME
    # this cluster's name on the gpupool server (gpupool kube run --server): its mirrored
    # nodes and pods carry it, so several clusters report to one server ("": the only one)
    cluster: str = ""
    # config: tenants and quotas below; server: the gpupool server's (gpupool kube run --server)
    tenants_from: Literal["config", "server"] = "config"
    # namespace -> tenant; a pod in a namespace not listed waits with an Event saying so
    namespaces: dict[str, str] = Field(default_factory=dict)
    # Volcano queue -> tenant: a PodGroup's spec.queue is honoured when it names its
    # namespace's tenant here (kube.pod_groups); other queues are refused by name
    queues: dict[str, str] = Field(default_factory=dict)
    tenants: list[TenantSpec] = Field(default_factory=list)
    priority_classes: dict[str, int] = Field(default_factory=lambda: dict(DEFAULT_PRIORITY_CLASSES))
    default_priority_class: str = "training"
    tolerate: list[str] | None = None  # taint keys tolerated (None: the GPU resource names)
    policy: str = "auto"
    grace_s: Annotated[int, Field(ge=0)] = 30
    cycle_s: Annotated[float, Field(gt=0)] = 1.0  # longest wait between cycles when idle
    bind_workers: Annotated[int, Field(ge=1, le=256)] = 16
    # suspended Jobs whose pods name gpupool (Kueue's): leave them to whoever resumes them,
    # saying so in an Event, or admit them — gpupool resumes them (kube.suspended_jobs)
    suspended_jobs: Literal["leave", "admit"] = "leave"
    # Dynamic Resource Allocation: publish gpupool's ResourceSlices and DeviceClasses
    # (driver gpu.gpupool.io) and allocate the ResourceClaims of the pods it schedules
    dra: bool = False
    # defragmentation: pods a controller makes again may be evicted so that a waiting pod
    # within its guarantee gets room on one node (the engine's gain-over-cost rule); at most
    # this many moves an hour (0: off), for pods that waited defrag_after_s
    defrag_moves_per_hour: Annotated[int, Field(ge=0, le=10000)] = 0
    defrag_after_s: Annotated[float, Field(ge=0)] = 300.0

    @field_validator("cluster")
    @classmethod
    def _cluster_name(cls, value: str) -> str:
        if value and not CLUSTER_NAME.fullmatch(value):
            raise ValueError(
                f"{value!r} is not a cluster name (lower-case letters, digits and '-', "
                "starting and ending with a letter or digit, at most 63)"
            )
        return value

    @property
    def tolerated(self) -> frozenset[str]:
        """Taint keys every pod gpupool schedules tolerates: the GPU operator taints GPU nodes
        with their resource name and Kubernetes adds that toleration to every GPU pod."""
        if self.tolerate is not None:
            return frozenset(self.tolerate)
        from gpupool.kube.inventory import DEFAULT_TOLERATED

        return DEFAULT_TOLERATED

    def tenant_tree(self) -> TenantTree:
        return TenantTree(
            Tenant(
                t.name, t.parent, {r: _quota(r, q, t.name) for r, q in t.quotas.items()}, t.weight
            )
            for t in self.tenants
        )


def _amount(resource: str, value: float | str | None, where: str) -> int | None:
    if value is None:
        return None
    if resource == "cpu":
        return parse_cpu_millis(value)
    if resource == "gpu_mem":
        return parse_memory_mib(value, where)
    if resource == "gpu" or resource.startswith("gpu:"):
        try:
            return round(float(value) * CARD)
        except ValueError:
            raise SpecError(f"{where}: {value!r} is not a number of cards", field=where) from None
    raise SpecError(
        f"{where}: unknown resource {resource!r} (expected gpu, gpu:MODEL, gpu_mem or cpu)",
        field=where,
    )


def _quota(resource: str, q: QuotaSpec, tenant: str) -> Quota:
    where = f"tenants.{tenant}.quotas.{resource}"
    return Quota(
        _amount(resource, q.nominal, where) or 0,
        _amount(resource, q.borrowing, where),
        _amount(resource, q.lending, where),
    )


def parse_config(raw: object, where: str = "kubernetes config") -> KubeConfig:
    try:
        config = KubeConfig.model_validate(raw or {})
    except ValidationError as exc:
        raise from_validation(exc, where) from None
    tree = config.tenant_tree()  # quotas and parents checked now, not at the first pod
    if config.tenants_from == "server":
        if config.tenants:
            raise SpecError(
                f"{where}: tenants: leave empty with tenants_from: server (the server's are used)",
                field="tenants",
            )
        return config  # namespaces are checked against the server's tenants as pods come
    for namespace, tenant in config.namespaces.items():
        if tenant not in tree.tenants:
            raise SpecError(
                f"{where}: namespaces.{namespace}: unknown tenant {tenant!r}",
                field=f"namespaces.{namespace}",
            )
    if config.default_priority_class not in config.priority_classes:
        raise SpecError(
            f"{where}: default_priority_class {config.default_priority_class!r} is not in "
            "priority_classes",
            field="default_priority_class",
        )
    return config


def load_config(path: str | Path) -> KubeConfig:
    try:
        raw = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise SpecError(f"{path}: cannot read ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise SpecError(f"{path}: not YAML ({exc})") from None
    return parse_config(raw, str(path))

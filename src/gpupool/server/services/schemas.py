"""Bodies of the services API."""

from typing import Annotated, Literal

from pydantic import Field, StringConstraints, model_validator

from gpupool.server.schemas import ArgText, Name, Strict, TenantName

HealthPath = Annotated[str, StringConstraints(max_length=200, pattern=r"^/[\x21-\x7e]*$")]


class ServiceIn(Strict):
    name: Name
    tenant: TenantName | None = None  # defaults to the caller's tenant
    request: str = Field(
        min_length=1, max_length=500, examples=["gpu=1", "gpu=0.5"], description="one replica's"
    )
    command: list[ArgText] = Field(default_factory=list, max_length=4096)
    image: str | None = Field(None, max_length=500)
    env: dict[Annotated[str, StringConstraints(max_length=256)], ArgText] = Field(
        default_factory=dict, max_length=512
    )
    min_replicas: int = Field(1, ge=0, le=1000)
    max_replicas: int = Field(4, ge=1, le=1000)
    metric: Literal["rps", "concurrency", "latency_p95", "gpu_util"] = Field(
        "rps",
        description="rps: requests/s per replica; concurrency: requests in flight per replica; "
        "latency_p95: seconds (scale out while the p95 is above it); gpu_util: % of the "
        "replica's cards busy, from the agents' telemetry",
    )
    target: float = Field(gt=0, le=1e6, description="the metric's target per replica")
    utilisation: float = Field(
        0.7, gt=0, le=1, description="headroom: scale so replicas run at this share of target"
    )
    stable_s: float = Field(60, ge=6, le=3600, description="stable window (panic: a tenth)")
    scale_down_delay_s: float = Field(0, ge=0, le=86400)
    startup_s: float = Field(60, gt=0, le=3600, description="a replica's start to ready")
    policy: Literal["reactive", "predictive"] = "reactive"
    health_path: HealthPath = "/health"
    warm: int = Field(
        0,
        ge=0,
        le=1000,
        description="engines kept: replicas past the need park (asleep, weights in host "
        "memory, their cards lent to training) instead of stopping, and wake in seconds",
    )

    placement: Literal["spread", "pack"] = Field(
        "spread",
        description="spread: a replica per node first (failures hit fewer); pack: few nodes, "
        "so training keeps whole servers for its multi-card jobs",
    )

    @model_validator(mode="after")
    def _bounds(self) -> "ServiceIn":
        if self.min_replicas > self.max_replicas:
            raise ValueError(
                f"min_replicas: {self.min_replicas} is above max_replicas {self.max_replicas}"
            )
        if self.warm > self.max_replicas:
            raise ValueError(f"warm: {self.warm} is above max_replicas {self.max_replicas}")
        return self


class ScaleIn(Strict):
    replicas: int | None = Field(
        None,
        ge=0,
        le=1000,
        description="pin this many replicas; null gives them back to the autoscaler",
    )


class ReplicaOut(Strict):
    job_id: int
    state: str
    node: str | None
    endpoint: str | None
    ready: bool
    draining: bool
    parked: bool = False  # asleep, its card lent to training
    parked_on: list[int] | None = None  # while parked: the cards (on its node) it wakes on
    woke_in_s: float | None = None  # its last wake: decided to ready, seconds


class ServiceOut(Strict):
    id: int
    name: str
    tenant: str
    request: str
    command: list[str]
    image: str | None
    min_replicas: int
    max_replicas: int
    metric: str
    target: float
    utilisation: float
    stable_s: float
    scale_down_delay_s: float
    startup_s: float
    policy: str
    health_path: str
    warm: int = 0
    placement: str = "spread"
    pinned: int | None
    desired: int
    ready: int
    status: str
    replicas: list[ReplicaOut]
    created_by: str
    created_at: float
    # at creation: what may keep replicas from running (nodes that cannot run them)
    warnings: list[str] = Field(default_factory=list)


class EndpointOut(Strict):
    job_id: int
    endpoint: str

"""Request and response bodies of the REST API (pydantic 2). Quantities follow the request
grammar's units: cards for ``gpu`` quotas, MiB for memory, millicores for node CPU."""

from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import (
    AfterValidator,
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)

from gpupool.model.checkpoint import signal_name
from gpupool.model.errors import SpecError
from gpupool.model.job import CLASS_OF_KIND
from gpupool.model.labels import ADDRESS_LABEL, check_address
from gpupool.model.names import check_tenant_name
from gpupool.model.protocol import AllocationOut

Name = Annotated[
    str, StringConstraints(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
]
# a team's name: letters of any script too (gpupool.model.names), where other names are ASCII
TenantName = Annotated[str, AfterValidator(check_tenant_name)]
NodeName = Annotated[
    str, StringConstraints(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]*$")
]
# Kubernetes' label syntax: an optional DNS prefix, then a name of at most 63 characters
LabelKey = Annotated[
    str,
    StringConstraints(
        max_length=317,
        pattern=r"^([A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?/)?"
        r"[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$",
    ),
]
LabelValue = Annotated[str, StringConstraints(max_length=1000, pattern=r"^[^\x00]*$")]


def _checked_labels(labels: dict[str, str]) -> dict[str, str]:
    if ADDRESS_LABEL in labels:
        labels[ADDRESS_LABEL] = check_address(labels[ADDRESS_LABEL])
    return labels


Labels = Annotated[dict[LabelKey, LabelValue], AfterValidator(_checked_labels)]
MAX_LABELS = 64
# one command argument or environment value; the whole is bounded by
# gpupool.model.workload.MAX_ARGV_ENV_BYTES (checked on submission)
ArgText = Annotated[str, StringConstraints(max_length=65536)]
T = TypeVar("T")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Page(BaseModel, Generic[T]):
    items: list[T]
    total: int
    limit: int
    offset: int


# -- nodes ------------------------------------------------------------------------------------
class DeviceIn(Strict):
    index: int = Field(ge=0, le=1023)
    model: str = Field(min_length=1, max_length=100)
    vendor: Literal["nvidia", "ascend", "cambricon", "hygon"] | None = None
    memory_mib: int | None = Field(None, gt=0, le=16 * 1024 * 1024)
    uuid: str = Field("", max_length=200)
    healthy: bool = True
    mode: Literal["whole", "mig", "share"] = "whole"
    island: int | None = Field(None, ge=0, le=1023)
    pcie_switch: int | None = Field(None, ge=0, le=1023)


class NodeIn(Strict):
    name: NodeName
    cpu_millis: int = Field(gt=0, le=10**8)
    memory_mib: int = Field(gt=0, le=10**10)
    devices: list[DeviceIn] = Field(default_factory=list, max_length=1024)
    labels: Labels = Field(default_factory=dict, max_length=MAX_LABELS)
    pool: Name = "default"
    instance: str | None = Field(
        None,
        max_length=100,
        pattern=r"^[A-Za-z0-9:._-]+$",
        description="the registering agent's identity (its state dir and the host's boot): "
        "another agent's registration of this node is refused while this one is heard",
    )


class DeviceOut(BaseModel):
    index: int
    model: str
    vendor: str
    memory_mib: int
    uuid: str
    healthy: bool
    mode: str
    want_mode: str | None = None  # hybrid pools: the mode it is being switched to
    island: int | None
    pcie_switch: int | None
    telemetry: dict[str, Any]


class NodeOut(BaseModel):
    name: str
    pool: str
    cpu_millis: int
    memory_mib: int
    labels: dict[str, str]
    state: str
    schedulable: bool
    drain_reason: str = ""
    registered_at: float
    heartbeat_at: float
    source: str = "agent"  # agent, or kubernetes: a cluster's node gpupool's scheduler mirrors
    agent_version: str | None = None  # what its agent said at registration (None: not said)
    agent_lag_s: float = 0.0  # how long its agent's current round has run (0: keeping up)
    devices: list[DeviceOut]
    # what live allocations hold here, whoever's they are (no names: a member's view of
    # the pool still adds up)
    devices_in_use: list[int] = Field(default_factory=list)
    cpu_allocated_millis: int = 0
    mem_allocated_mib: int = 0


class AgentNodeOut(NodeOut):
    """A node as its agent hears it after registering or heartbeating, with its lease: the
    agent's workloads stop themselves (SIGTERM, then SIGKILL after ``fence_kill_s``) once
    ``lease_s`` have passed since the agent sent its last acknowledged heartbeat; the server
    declares the node lost only after ``heartbeat_timeout_s`` (> lease + kill time).
    ``heartbeat_s``: the interval the server advises an agent not configured with one."""

    lease_s: float
    fence_kill_s: float
    heartbeat_timeout_s: float
    heartbeat_s: float


class NodePatch(Strict):
    schedulable: bool | None = None  # true also clears the drain reason
    pool: Name | None = None
    labels: Labels | None = Field(None, max_length=MAX_LABELS)


class DrainIn(Strict):
    reason: str = Field("", max_length=500, description="Why, shown in node listings")
    now: bool = Field(
        False, description="Requeue the jobs running there too (default: they finish)"
    )


class Telemetry(Strict):
    index: int = Field(ge=0, le=1023)
    util_pct: float | None = Field(None, ge=0, le=100)
    mem_used_mib: int | None = Field(None, ge=0)
    temp_c: float | None = Field(None, ge=-50, le=200)
    power_w: float | None = Field(None, ge=0, le=10000)
    healthy: bool = True
    ecc_errors: int | None = Field(None, ge=0)
    xid: int | None = Field(None, ge=0)
    mig: list[Annotated[str, Field(max_length=40)]] | None = Field(
        None, max_length=8, description="a MIG card's instances now, as profile@start"
    )
    mode: Literal["whole", "mig", "share"] | None = Field(
        None, description="how the card is cut now, once the agent switched it (hybrid pools)"
    )
    mode_error: str | None = Field(
        None, max_length=300, description="why the agent could not switch the card's mode"
    )


class HeartbeatIn(Strict):
    devices: list[Telemetry] = Field(default_factory=list, max_length=1024)


# -- pools, tenants, quotas, classes ----------------------------------------------------------
class PoolIn(Strict):
    """``mig_cards_min``/``mig_cards_max``: in a ``hybrid`` pool, how many of its MIG-capable
    cards may be MIG cards (the others are shared); the pool switches idle cards between the
    two by demand within them (max null: all)."""

    name: Name
    sharing: Literal["whole", "mig", "share", "hybrid"] = "whole"
    policy: str = "auto"
    description: str = Field("", max_length=2000)
    mig_cards_min: int = Field(0, ge=0, le=1_000_000)
    mig_cards_max: int | None = Field(None, ge=0, le=1_000_000)


class PoolOut(BaseModel):
    name: str
    sharing: str
    policy: str
    description: str
    mig_cards_min: int = 0
    mig_cards_max: int | None = None
    note: str = ""  # after a change: what it did to the pool's cards


class TenantIn(Strict):
    name: TenantName
    parent: TenantName | None = None
    weight: float = Field(1.0, gt=0, le=1000)


class TenantOut(BaseModel):
    name: str
    parent: str | None
    weight: float
    quotas: list["QuotaOut"]
    # on setting a quota: what the guarantees now overbook (a parent's, or the pool)
    warnings: list[str] = Field(default_factory=list)


class QuotaIn(Strict):
    """``gpu`` / ``gpu:MODEL`` in cards (fractions allowed), ``gpu_mem`` in MiB, ``cpu`` in
    cores. ``borrowing_limit`` null: may borrow any idle capacity; ``lending_limit`` null: lends
    all its idle guarantee."""

    resource: str = Field(
        min_length=1,
        max_length=120,
        # the old name ``flavour`` is still read (in Kueue a flavour is a node class)
        validation_alias=AliasChoices("resource", "flavour"),
    )
    nominal: float = Field(ge=0, le=10**9)
    borrowing_limit: float | None = Field(None, ge=0, le=10**9)
    lending_limit: float | None = Field(None, ge=0, le=10**9)


class QuotaOut(BaseModel):
    resource: str
    nominal: float
    borrowing_limit: float | None
    lending_limit: float | None
    used: float | None = None


class PriorityClassIn(Strict):
    name: Name
    value: int = Field(ge=0, le=10**6)
    description: str = Field("", max_length=2000)


class PriorityClassOut(BaseModel):
    name: str
    value: int
    description: str


# -- users and tokens -------------------------------------------------------------------------
Expiry = Annotated[
    float | None,
    Field(
        None,
        gt=0,
        le=1e11,
        description="When the token stops working (epoch seconds); null: never (admins only "
        "for tokens of their own)",
    ),
]


class UserIn(Strict):
    name: Name
    role: Literal["admin", "tenant-admin", "member", "viewer", "finance", "agent", "metrics"]
    tenant: TenantName | None = None
    node: NodeName | None = None
    expires_at: Expiry = None


class UserOut(BaseModel):
    name: str
    role: str
    tenant: str | None
    node: str | None
    disabled: bool


class UserPatch(Strict):
    """``disabled: true`` stops every token of the user at once (and lets them work again
    when set back); the user's jobs keep running."""

    disabled: bool


class TokenIn(Strict):
    expires_at: Expiry = None


class TokenOut(BaseModel):
    id: int  # for gpupool token revoke
    user: str
    token: str  # shown once
    prefix: str
    expires_at: float | None = None


class TokenInfo(BaseModel):
    id: int
    user: str
    prefix: str
    created_at: float
    revoked: bool
    expires_at: float | None


# -- jobs -------------------------------------------------------------------------------------
class DependencyIn(Strict):
    type: Literal["afterok", "afterany", "afternotok", "singleton"]
    job: int | None = Field(None, gt=0, lt=2**62, description="none for singleton")

    @model_validator(mode="after")
    def _job(self) -> "DependencyIn":
        if (self.job is None) != (self.type == "singleton"):
            raise ValueError("a job id for afterok/afterany/afternotok, none for singleton")
        return self


class CheckpointIn(Strict):
    """The job saves its work on ``signal`` (USR1, SIGUSR1 or its number): sent instead of
    SIGTERM when it must stop early, SIGKILL ``grace_s`` later (default the server's
    ``checkpoint_grace_s``, at most its ``checkpoint_grace_max_s``)."""

    signal: str = Field(max_length=20, examples=["USR1"])
    grace_s: int | None = Field(None, ge=1, le=3600)
    shell_only: bool = Field(False, description="signal the batch shell only (Slurm's B:)")
    before_limit_s: int | None = Field(
        None, ge=1, le=65535, description="also sent this long before the time limit"
    )

    @field_validator("signal")
    @classmethod
    def _signal(cls, v: str) -> str:
        try:
            return signal_name(v)
        except SpecError as e:
            raise ValueError(str(e).removeprefix("checkpoint.signal: ")) from None


NODELIST = "sbatch -w: it holds each of these nodes (one gang worker each), the rest anywhere"


class JobIn(Strict):
    request: str = Field(min_length=1, max_length=500, examples=["gpu=A100-80G:1,cpu=4"])
    tenant: TenantName | None = None  # defaults to the caller's tenant
    name: str = Field("", max_length=200)
    kind: Literal["training", "inference", "dev", "batch"] = "batch"
    # when not given: by kind, inference online-inference, dev dev-test, else training; an
    # interactive session (an allocation) of no kind: dev-test
    priority_class: Name = "training"
    priority: int = Field(0, ge=-1000, le=1000)
    gang_size: int = Field(1, ge=1, le=1024)
    one_per_node: bool = Field(
        False, description="the gang's workers each on a node of its own (sbatch -N)"
    )
    max_runtime_s: int | None = Field(None, gt=0, le=366 * 86400)
    on_preempt: Literal["suspend", "kill"] = "suspend"
    checkpoint: CheckpointIn | None = Field(
        None,
        description="It saves its work on a signal: stopped early, it gets that signal and "
        "a short grace instead of SIGTERM and the agent's grace (the seconds-fast vacate)",
    )
    on_lost: Literal["requeue", "fail", "keep-running"] = Field(
        "requeue",
        description="When its node is lost: requeue (the default; the node's agent stops the "
        "workload before the server requeues it, so it never runs twice at once), fail, or "
        "keep-running (availability over uniqueness: the workload is not self-fenced and the "
        "job is requeued too, so two copies may run until the old node's agent returns)",
    )
    command: list[ArgText] = Field(default_factory=list, max_length=4096)
    image: str | None = Field(
        None, max_length=500, description="An OCI image reference: [registry/]name[:tag][@digest]"
    )
    env: dict[Annotated[str, StringConstraints(max_length=256)], ArgText] = Field(
        default_factory=dict,
        max_length=512,
        description="Environment names are POSIX ([A-Za-z_][A-Za-z0-9_]*); command and env "
        "together at most 128 KiB",
    )
    idempotency_key: str | None = Field(None, min_length=1, max_length=200)
    allocation: bool = Field(
        False,
        description="An interactive hold of devices (salloc): no command, a max_runtime_s; "
        "the agent keeps the grant until the time limit or a cancel",
    )
    interactive: Literal["shell", "notebook"] | None = Field(
        None,
        description="An interactive session: a shell (an allocation whose sandbox takes "
        "terminals through the server: gpupool shell, exec, attach; docs/interactive.md), "
        "every allocation is one; or a notebook (its command a web app served through the "
        "server at /api/v1/jobs/{id}/notebook/: gpupool notebook)",
    )
    hold: bool = Field(False, description="Keep it pending until released (sbatch --hold)")
    dependency: list[DependencyIn] = Field(
        default_factory=list,
        max_length=100,
        description="Jobs of the same tenant this one waits for; all conditions must hold",
    )
    array: str | None = Field(
        None,
        max_length=200,
        description="sbatch --array: 0-99, 1,3,5, 0-15:4, with %N for at most N at once; "
        "one job per index, each with GPUPOOL_ARRAY_JOB_ID and GPUPOOL_ARRAY_TASK_ID",
    )
    output: str | None = Field(
        None,
        max_length=500,
        description="sbatch --output: where the node writes the job's output when it ends, "
        "relative to its working directory (%j job id, %A array id, %a task index, %x name, "
        "%u user, %N node); stderr too unless error is given",
    )
    error: str | None = Field(None, max_length=500, description="sbatch --error: its stderr")
    chdir: str | None = Field(
        None,
        max_length=4096,
        description="sbatch --chdir: the absolute directory the job runs in (it fails if its "
        "user cannot enter it on the node)",
    )
    submit_dir: str | None = Field(
        None,
        max_length=4096,
        description="Where it was submitted from: without chdir the job runs there when the "
        "node has it and the job's user may enter it, else in a work folder of its own",
    )
    begin_at: float | None = Field(None, ge=0, description="sbatch --begin: not before then")
    nodelist: list[NodeName] | None = Field(None, max_length=1024, description=NODELIST)
    exclude: list[NodeName] | None = Field(None, max_length=1024, description="never these")

    @model_validator(mode="before")
    @classmethod
    def _class_of_kind(cls, data: Any) -> Any:
        """No priority class given: the one of its kind (an inference job is online work); an
        interactive session of no kind is dev work (below training, the seed's order)."""
        if isinstance(data, dict) and data.get("priority_class") is None:
            session = data.get("interactive") is not None or data.get("allocation") is True
            kind = data.get("kind") or ("dev" if session else "batch")
            return {**data, "priority_class": CLASS_OF_KIND.get(str(kind), "training")}
        return data


class ReconcileIn(Strict):
    running: list[int] = Field(default_factory=list, max_length=100_000)


class ReconcileOut(BaseModel):
    stop: list[int]
    state: str


class StartEstimateOut(BaseModel):
    """A pending job's estimated start from the leader's last plan (squeue --start):
    ``start`` None when the plan did not reach it (nothing expected to end, or its bound)."""

    start: float | None
    nodes: list[str]
    basis: str  # "from time limits", "from history of 37 similar jobs", "room now"
    computed_at: float


class JobOut(BaseModel):
    id: int
    tenant: str
    name: str
    request: str  # one worker's; shape: the whole job as people read it (2×gpu=A100-80G:4)
    shape: str = ""
    kind: str
    priority_class: str
    priority: int
    gang_size: int
    max_runtime_s: int | None
    on_preempt: str
    on_lost: str
    checkpoint: dict[str, Any] | None = None  # what it saves on (signal, grace_s, ...)
    lost_gpu_s: float = 0.0  # card-seconds of work its preemptions cost it
    command: list[str]
    image: str | None
    state: str
    reason: str
    # while pending and judged by a cycle, what it waits for: no-room, quota, behind,
    # preempting, limited, invalid, never, gated or approval ("" until judged, and after)
    wait_code: str = ""
    submitted_by: str
    submit_time: float
    started_at: float | None
    finished_at: float | None
    exit_code: int | None
    idempotency_key: str | None
    held: bool = False
    dependency: list[DependencyIn] = []
    array_job: int | None = None
    array_index: int | None = None
    array_limit: int | None = None
    array_size: int | None = None  # on submission of an array: how many tasks it made
    output: str | None = None
    error: str | None = None
    chdir: str | None = None
    submit_dir: str | None = None
    begin_at: float | None = None
    nodelist: list[str] | None = None
    exclude: list[str] | None = None
    replaces: int | None = None  # the replica this copy replaces (defragmentation)
    service: str | None = None  # the service whose replica it is (its autoscaler's)
    interactive: str | None = None  # a session: "shell" (docs/interactive.md)
    allocation: AllocationOut | None = None
    # while pending: when and where the leader's last plan expects it to start
    estimate: StartEstimateOut | None = None
    logs_url: str
    events_url: str


class JobEventOut(BaseModel):
    time: float
    from_state: str | None
    to_state: str
    reason: str
    actor: str


class LogChunkIn(Strict):
    stream: Literal["stdout", "stderr"] = "stdout"
    text: str = Field(max_length=1_000_000)


class CheckpointedIn(Strict):
    """An agent passes on that an allocation's job saved a checkpoint at ``at`` (the node's
    clock; the server takes no later than its own now)."""

    generation: int = Field(ge=0, le=2**62)
    at: float = Field(ge=0, le=1e11)


class JobStatusIn(Strict):
    """An agent's report on one allocation; ``generation`` must be the allocation's current.
    ``lost``: the workload was stopped for a reason that is not the job's (its agent shut
    down); the job is requeued or failed by its ``on_lost`` policy."""

    generation: int = Field(ge=0, le=2**62)
    state: Literal["running", "succeeded", "failed", "lost"]
    exit_code: int | None = Field(None, ge=-(2**31), le=2**31 - 1)
    reason: str = Field("", max_length=2000)
    ended_at: float | None = Field(
        None,
        ge=0,
        le=1e11,
        description="When the workload ended (epoch seconds, the node's clock): usage is "
        "metered to then, not to when the server hears of it",
    )
    started_at: float | None = Field(
        None,
        ge=0,
        le=1e11,
        description="When the workload started (epoch seconds, the node's clock), with running "
        "and again with its end: this node's part is metered from then (never before its "
        "grant nor after the server hears it), not from the grant",
    )
    port: int | None = Field(
        None, ge=1, le=65535, description="with running: the port a service replica serves on"
    )
    node: NodeName | None = Field(
        None, description="with running: the node whose part started (a gang starts by parts)"
    )


# -- reservations, usage, audit ---------------------------------------------------------------
class UsageOut(BaseModel):
    id: int
    tenant: str
    job_id: int
    allocation_id: int
    model: str
    start: float
    end: float
    devices: int
    device_seconds: int
    compute_pct_seconds: int
    mem_mib_seconds: int
    cpu_milli_seconds: int


class AuditOut(BaseModel):
    id: int
    time: float
    actor: str
    role: str
    action: str
    target: str
    result: int
    client: str
    detail: str = ""  # what the action did beyond its route (an admin's terminal: whose)


class QueueEntry(BaseModel):
    id: int
    tenant: str
    submitted_by: str
    name: str
    request: str
    priority_class: str
    waited_s: float
    reason: str
    max_runtime_s: int | None = None
    held: bool = False
    array_job: int | None = None
    array_index: int | None = None
    gang_size: int = 1
    shape: str = ""  # the request as people read it: 2×gpu=A100-80G:4 for a gang of two
    wait_code: str = ""  # what it waits for (JobOut.wait_code)
    estimate: StartEstimateOut | None = None  # when and where it is expected to start


TenantOut.model_rebuild()

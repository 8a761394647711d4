"""What the server tells an agent about work, typed once for both ends: a node's orders
(``GET /nodes/{name}/orders`` and the channel's pushes) and the allocations in them.

The agent validates every answer into these models before acting on it, so a field the
server renames or drops fails there, by name, instead of as a ``KeyError`` deep in a start.
Fields a newer server added have defaults that read as an older server meant; fields this
agent does not know are ignored (a newer server)."""

from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError


class DeviceGrantOut(BaseModel):
    device: int
    compute_pct: int
    mem_mib: int
    exclusive: bool
    mig_profile: str | None
    mig_start: int | None


class NodeGrantOut(BaseModel):
    node: str
    cpu_millis: int
    mem_mib: int
    devices: list[DeviceGrantOut]
    whole: bool = False  # the whole node (node=whole, sbatch --exclusive)


class AllocationOut(BaseModel):
    id: int
    job_id: int
    tenant: str
    generation: int
    state: str
    borrowed: bool
    action: str
    after: list[int]
    nodes: list[NodeGrantOut]
    created_at: float
    released_at: float | None
    release_reason: str
    # when its workload first started on one of its nodes: it is metered from then (None:
    # not yet, or an older server)
    started_at: float | None = None


class ReplicaProbeOut(BaseModel):
    """How the agent looks at a service replica on its control port: the health path its
    service declared, and whether the service parks replicas (asleep is then not ready)."""

    health_path: str = "/health"
    sleepy: bool = False


class OrderOut(AllocationOut):
    """An allocation as its node's agent must run it: with the job's command and settings."""

    job_name: str
    job_state: str
    on_lost: str
    command: list[str]
    env: dict[str, str]
    image: str | None
    max_runtime_s: int | None
    output: str | None = None  # patterns, expanded by the agent (%N is its node)
    error: str | None = None
    chdir: str | None = None
    submit_dir: str | None = None
    submitted_by: str = ""
    array_job: int | None = None
    array_index: int | None = None
    # a service replica (or a defragmentation copy of one): the agent chooses its port,
    # publishes it on the node's addresses and reports it with ``running``
    replica: bool = False
    probe: ReplicaProbeOut | None = None  # a replica: what its agent reads (None: older server)
    # this node's part was reported started (a gang's other parts may start later): an agent
    # without a record of a part that started lost it; one that did not start starts it now.
    # None: a server older than this field, which says only the job's state
    started_here: bool | None = None
    ended_here: bool = False  # this node's part ended well; the gang's others still run
    # it saves on a signal (gpupool.model.checkpoint's JSON): stopped with that signal and
    # its grace, not SIGTERM and the agent's; None from older servers and for other jobs
    checkpoint: dict[str, Any] | None = None
    # a service replica to keep asleep (parked: its card lent to training); False again: wake
    # it once the allocations in ``after`` (those vacated from its card) have stopped here
    parked: bool = False
    # an interactive session (a shell: gpupool alloc, srun --pty): its agent keeps a link to
    # the server for its terminals (None: a batch job, an older server)
    interactive: Literal["shell", "notebook"] | None = None
    # an idle session was warned: released then unless someone types or its cards work
    # (its agent tells the session's terminals; docs/interactive.md, "Idle culling")
    idle_release_at: float | None = None


class OrdersOut(BaseModel):
    """A node's desired state. ``generation`` is the scheduler's commit counter when it was
    read: an agent ignores an answer older than one it has already acted on."""

    generation: int
    # changes when the database is restored from a backup (gpupool admin restore): the
    # generation counts again from lower and the agent follows a new epoch's orders at once
    restore_epoch: str = ""
    node_state: str
    orders: list[OrderOut]
    # hybrid pools: cards to switch to this mode once nothing runs on them (node-wide index)
    modes: dict[int, Literal["mig", "share"]] = Field(default_factory=dict)
    # identifies these orders (not the generation): sent back as ``known`` with ``wait``, the
    # next answer waits for a change; absent from servers that do not wait
    etag: str | None = None


class OrdersUnreadable(ValueError):
    """An answer that is not a node's orders (a server of another protocol, a proxy's page)."""


def read_orders(payload: object) -> OrdersOut:
    try:
        return OrdersOut.model_validate(payload)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the answer"
        raise OrdersUnreadable(
            f"the server's orders do not read: {where}: {first['msg']} "
            f"({exc.error_count()} problem(s))"
        ) from None

"""Tables of the state of record. Times are epoch seconds (float), quantities integers in the
engine's units (MiB, millicores, card-percent), never money (DESIGN.md invariants 2 and 6)."""

from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Table,
    Text,
    UniqueConstraint,
    false,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# SQLite only auto-increments INTEGER PRIMARY KEY; PostgreSQL gets BIGINT
BigId = BigInteger().with_variant(Integer(), "sqlite")


class Base(DeclarativeBase):
    type_annotation_map: ClassVar[dict[Any, Any]] = {dict[str, Any]: JSON, list[Any]: JSON}
    __table__: ClassVar[Table]  # every mapped class here has one (Core bulk writes use it)


class Meta(Base):
    """One row: the allocation generation counter and the scheduler leader's epoch (fencing)."""

    __tablename__ = "scheduler_meta"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    generation: Mapped[int] = mapped_column(BigInteger, default=0)
    leader_epoch: Mapped[int] = mapped_column(BigInteger, default=0)
    leader_name: Mapped[str] = mapped_column(String(200), default="")
    leader_since: Mapped[float] = mapped_column(Float, default=0.0)
    nodes_version: Mapped[int] = mapped_column(BigInteger, default=0)  # bumped on node changes
    # the leader's proof of life, every few seconds: /healthz says when nobody leads
    leader_seen_at: Mapped[float] = mapped_column(Float, default=0.0, server_default="0")
    # a new value on every restore from a backup (gpupool admin restore): the generation
    # counts again from lower, and agents follow the orders of a new epoch at once
    restore_epoch: Mapped[str] = mapped_column(String(32), default="", server_default="")


class Pool(Base):
    __tablename__ = "pools"
    name: Mapped[str] = mapped_column(String(100), primary_key=True)
    sharing: Mapped[str] = mapped_column(String(20), default="whole")
    policy: Mapped[str] = mapped_column(String(20), default="auto")
    description: Mapped[str] = mapped_column(Text, default="")
    # hybrid pools: how many MIG-capable cards may be MIG cards (max None: all)
    mig_cards_min: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    mig_cards_max: Mapped[int | None] = mapped_column(Integer, nullable=True)


class NodeRow(Base):
    __tablename__ = "nodes"
    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    pool: Mapped[str] = mapped_column(String(100), default="default")
    cpu_millis: Mapped[int] = mapped_column(BigInteger)
    memory_mib: Mapped[int] = mapped_column(BigInteger)
    labels: Mapped[dict[str, Any]] = mapped_column(default=dict)
    state: Mapped[str] = mapped_column(String(20), default="ready")  # ready, lost, fenced
    schedulable: Mapped[bool] = mapped_column(Boolean, default=True)
    drain_reason: Mapped[str] = mapped_column(Text, default="", server_default="")
    registered_at: Mapped[float] = mapped_column(Float)
    heartbeat_at: Mapped[float] = mapped_column(Float)
    # agent: its own agent runs its work; kubernetes: a cluster's node mirrored by gpupool's
    # Kubernetes-mode scheduler (the kubelet runs its pods; the server meters and shows them)
    source: Mapped[str] = mapped_column(String(20), default="agent", server_default="agent")
    # which agent runs it (its state dir's id and the host's boot): another one presenting
    # this node while that one is heard is refused
    instance: Mapped[str | None] = mapped_column(String(100), nullable=True)
    # the version its agent said at registration (None: an agent too old to say, or none)
    agent_version: Mapped[str | None] = mapped_column(String(100), nullable=True)
    # how long its agent's current round has run, as its last beat said (0: keeping up)
    agent_lag_s: Mapped[float] = mapped_column(Float, default=0.0, server_default="0")


class DeviceRow(Base):
    __tablename__ = "devices"
    node: Mapped[str] = mapped_column(
        ForeignKey("nodes.name", ondelete="CASCADE"), primary_key=True
    )
    index: Mapped[int] = mapped_column(Integer, primary_key=True)
    model: Mapped[str] = mapped_column(String(100))
    vendor: Mapped[str] = mapped_column(String(20))
    memory_mib: Mapped[int] = mapped_column(BigInteger)
    uuid: Mapped[str] = mapped_column(String(200), default="")
    healthy: Mapped[bool] = mapped_column(Boolean, default=True)
    mode: Mapped[str] = mapped_column(String(10), default="whole")
    # the mode the server ordered (hybrid pools); None once the agent reports it
    want_mode: Mapped[str | None] = mapped_column(String(10), nullable=True)
    want_since: Mapped[float | None] = mapped_column(Float, nullable=True)
    island: Mapped[int | None] = mapped_column(Integer, nullable=True)
    pcie_switch: Mapped[int | None] = mapped_column(Integer, nullable=True)
    telemetry: Mapped[dict[str, Any]] = mapped_column(default=dict)


class TenantRow(Base):
    __tablename__ = "tenants"
    name: Mapped[str] = mapped_column(String(100), primary_key=True)
    parent: Mapped[str | None] = mapped_column(
        ForeignKey("tenants.name", ondelete="RESTRICT"), nullable=True
    )
    weight: Mapped[float] = mapped_column(Float, default=1.0)
    created_at: Mapped[float] = mapped_column(Float)
    # admission limits an admin set for it (gpupool.server.admission; absent: the defaults)
    limits: Mapped[dict[str, Any]] = mapped_column(default=dict, server_default="{}")
    # characters of its jobs' logs the server holds (kept exact by the retention pass)
    log_bytes: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    # its interactive sessions' idle timeouts, per priority class ("*": any), inherited by its
    # sub-tenants (gpupool.server.interactive.idle_policy; absent: the parent's, the server's)
    idle_policy: Mapped[dict[str, Any]] = mapped_column(default=dict, server_default="{}")


class QuotaRow(Base):
    __tablename__ = "quotas"
    tenant: Mapped[str] = mapped_column(
        ForeignKey("tenants.name", ondelete="CASCADE"), primary_key=True
    )
    resource: Mapped[str] = mapped_column(String(120), primary_key=True)
    nominal: Mapped[int] = mapped_column(BigInteger)
    borrowing_limit: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    lending_limit: Mapped[int | None] = mapped_column(BigInteger, nullable=True)


class PriorityClassRow(Base):
    __tablename__ = "priority_classes"
    name: Mapped[str] = mapped_column(String(100), primary_key=True)
    value: Mapped[int] = mapped_column(Integer)
    description: Mapped[str] = mapped_column(Text, default="")


class UserRow(Base):
    __tablename__ = "users"
    name: Mapped[str] = mapped_column(String(100), primary_key=True)
    role: Mapped[str] = mapped_column(String(20))
    tenant: Mapped[str | None] = mapped_column(
        ForeignKey("tenants.name", ondelete="RESTRICT"), nullable=True
    )
    node: Mapped[str | None] = mapped_column(String(200), nullable=True)  # agent scope
    created_at: Mapped[float] = mapped_column(Float)
    disabled: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())


class TokenRow(Base):
    __tablename__ = "api_tokens"
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    user: Mapped[str] = mapped_column(ForeignKey("users.name", ondelete="CASCADE"), index=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))  # shown in listings, not secret
    created_at: Mapped[float] = mapped_column(Float)
    revoked: Mapped[bool] = mapped_column(Boolean, default=False)
    expires_at: Mapped[float | None] = mapped_column(Float, nullable=True)  # None: never


class JoinTokenRow(Base):
    """A bootstrap token (``gpupool node token create``): a new GPU server trades it for its own
    node credential (``gpupool join``) until it expires or its uses run out."""

    __tablename__ = "join_tokens"
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))  # shown in listings, not secret
    created_by: Mapped[str] = mapped_column(String(100))
    created_at: Mapped[float] = mapped_column(Float)
    expires_at: Mapped[float] = mapped_column(Float)
    uses_left: Mapped[int] = mapped_column(Integer)
    node: Mapped[str | None] = mapped_column(String(200), nullable=True)  # None: any name


class JobRow(Base):
    __tablename__ = "jobs"
    __table_args__ = (
        UniqueConstraint("tenant", "idempotency_key", name="uq_jobs_tenant_key"),
        Index("ix_jobs_state_tenant", "state", "tenant"),
    )
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    tenant: Mapped[str] = mapped_column(ForeignKey("tenants.name", ondelete="RESTRICT"))
    name: Mapped[str] = mapped_column(String(200), default="")
    request: Mapped[str] = mapped_column(Text)  # canonical request grammar
    kind: Mapped[str] = mapped_column(String(20))
    priority_class: Mapped[str] = mapped_column(String(100))
    priority: Mapped[int] = mapped_column(Integer, default=0)
    gang_size: Mapped[int] = mapped_column(Integer, default=1)
    # the gang's workers each on a node of its own (sbatch -N)
    one_per_node: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    max_runtime_s: Mapped[int | None] = mapped_column(Integer, nullable=True)
    on_preempt: Mapped[str] = mapped_column(String(10), default="suspend")
    on_lost: Mapped[str] = mapped_column(String(20), default="requeue")
    # its placement policy when the server's is auto (a service's packed replicas: best-fit)
    policy: Mapped[str | None] = mapped_column(String(20), nullable=True)
    # saves its work on a signal (gpupool.model.checkpoint.Checkpoint's JSON); None: it does not
    checkpoint: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    # card-seconds of work its preemptions cost it (gpupool.model.checkpoint.work_lost_s)
    lost_gpu_s: Mapped[float] = mapped_column(Float, default=0.0, server_default="0")
    command: Mapped[list[Any]] = mapped_column(default=list)
    image: Mapped[str | None] = mapped_column(String(500), nullable=True)
    env: Mapped[dict[str, Any]] = mapped_column(default=dict)
    idempotency_key: Mapped[str | None] = mapped_column(String(200), nullable=True)
    submitted_by: Mapped[str] = mapped_column(String(100))
    state: Mapped[str] = mapped_column(String(20), default="pending")
    reason: Mapped[str] = mapped_column(Text, default="")
    # while pending and judged by a cycle: the Wait code of ``reason`` (quota, no-room, ...)
    wait_code: Mapped[str] = mapped_column(String(20), default="", server_default="")
    submit_time: Mapped[float] = mapped_column(Float)
    queued_at: Mapped[float] = mapped_column(Float)  # last time it entered pending
    started_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    finished_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    exit_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # job control (sbatch/scontrol habits): a held job is not scheduled until released; a
    # dependency is [{"type": "afterok", "job": 12}, ..., {"type": "singleton"}], all must hold
    held: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    dependency: Mapped[list[Any]] = mapped_column(default=list, server_default=text("'[]'"))
    # the tasks of an array share array_job (the first task's id); at most array_limit of
    # them hold devices at once
    array_job: Mapped[int | None] = mapped_column(BigInteger, nullable=True, index=True)
    array_index: Mapped[int | None] = mapped_column(Integer, nullable=True)
    array_limit: Mapped[int | None] = mapped_column(Integer, nullable=True)
    output: Mapped[str | None] = mapped_column(String(500), nullable=True)  # sbatch --output
    error: Mapped[str | None] = mapped_column(String(500), nullable=True)  # sbatch --error
    chdir: Mapped[str | None] = mapped_column(Text, nullable=True)  # sbatch --chdir
    submit_dir: Mapped[str | None] = mapped_column(Text, nullable=True)
    # sbatch --begin (not before then), -w/--nodelist and -x/--exclude (node names)
    begin_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    nodelist: Mapped[list[Any] | None] = mapped_column(JSON, nullable=True)
    exclude: Mapped[list[Any] | None] = mapped_column(JSON, nullable=True)
    # a copy started by defragmentation (make-before-break) names the replica it replaces
    replaces: Mapped[int | None] = mapped_column(BigInteger, nullable=True, index=True)
    # an interactive session: "shell" (gpupool alloc, srun --pty); None: a batch job
    interactive: Mapped[str | None] = mapped_column(String(10), nullable=True)


class JobEventRow(Base):
    __tablename__ = "job_events"
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    time: Mapped[float] = mapped_column(Float)
    from_state: Mapped[str | None] = mapped_column(String(20), nullable=True)
    to_state: Mapped[str] = mapped_column(String(20))
    reason: Mapped[str] = mapped_column(Text, default="")
    actor: Mapped[str] = mapped_column(String(100), default="")


class JobLogRow(Base):
    __tablename__ = "job_logs"
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    time: Mapped[float] = mapped_column(Float)
    stream: Mapped[str] = mapped_column(String(10))
    text: Mapped[str] = mapped_column(Text)


class AllocationRow(Base):
    """A job's grant. ``generation`` is bumped by every cycle commit that touches it; agents
    must echo it back (fencing). ``after`` lists allocations that must stop first (victims)."""

    __tablename__ = "allocations"
    __table_args__ = (Index("ix_allocations_state", "state"),)
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    tenant: Mapped[str] = mapped_column(String(100))
    generation: Mapped[int] = mapped_column(BigInteger)
    state: Mapped[str] = mapped_column(String(20), default="active")  # active, released
    placement: Mapped[dict[str, Any]] = mapped_column()
    borrowed: Mapped[bool] = mapped_column(Boolean, default=False)
    action: Mapped[str] = mapped_column(String(20))
    after: Mapped[list[Any]] = mapped_column(default=list)
    created_at: Mapped[float] = mapped_column(Float)
    released_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    release_reason: Mapped[str] = mapped_column(Text, default="")
    # when its workload first started on one of its nodes (its agent's time, bounded): the
    # meter runs from then (each node's part from its own start, ``AllocationNodeRow``);
    # None: no workload has started, nothing is metered
    started_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    # metering is settled up to here: usage records cover [started_at, metered_until) already
    # (hourly checkpoints, a part's start, a park or wake; a checkpoint of a workload not yet
    # started moves it with no record); None: nothing settled yet
    metered_until: Mapped[float | None] = mapped_column(Float, nullable=True)
    # card-percent-seconds its devices reported under 5% utilisation (gpupool.server.idle)
    idle_pct_seconds: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    # a service replica's port, chosen and published by its agent (its running report)
    port: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # when its job last said it saved a checkpoint (its agent read $GPUPOOL_CHECKPOINT_FILE)
    checkpointed_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    # an interactive session's idle clock (gpupool.server.interactive.culling): when its cards
    # last showed activity (telemetry), when a person last opened or typed into one of its
    # terminals, when it was warned that it will be released and for when (None: no warning
    # stands)
    active_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    input_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    idle_warned_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    idle_release_at: Mapped[float | None] = mapped_column(Float, nullable=True)


class AllocationNodeRow(Base):
    """Which nodes an allocation touches, so an agent can find its work by index."""

    __tablename__ = "allocation_nodes"
    allocation_id: Mapped[int] = mapped_column(
        ForeignKey("allocations.id", ondelete="CASCADE"), primary_key=True
    )
    node: Mapped[str] = mapped_column(String(200), primary_key=True, index=True)
    # when this node's part started, as its agent measured it (bounded by the server's clock;
    # a gang's parts start one by one, each metered from its own start), and ended well (the
    # job succeeds once every part has)
    started_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    ended_at: Mapped[float | None] = mapped_column(Float, nullable=True)


class ReservationRow(Base):
    __tablename__ = "reservations"
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    tenant: Mapped[str] = mapped_column(ForeignKey("tenants.name", ondelete="CASCADE"))
    nodes: Mapped[list[Any]] = mapped_column()
    # N of its nodes' cards held, packed in the nodes' order (None: the whole nodes)
    cards: Mapped[int | None] = mapped_column(Integer, nullable=True)
    start: Mapped[float] = mapped_column(Float)
    end: Mapped[float] = mapped_column(Float)
    created_by: Mapped[str] = mapped_column(String(100))


class UsageRow(Base):
    """Metered quantities of one allocation on one device model (invariant 6: no prices)."""

    __tablename__ = "usage_records"
    __table_args__ = (Index("ix_usage_tenant_end", "tenant", "end"),)
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    tenant: Mapped[str] = mapped_column(String(100))
    job_id: Mapped[int] = mapped_column(BigInteger, index=True)
    allocation_id: Mapped[int] = mapped_column(BigInteger)
    model: Mapped[str] = mapped_column(String(100))  # device model, or "cpu" for CPU-only
    start: Mapped[float] = mapped_column(Float)
    end: Mapped[float] = mapped_column(Float)
    devices: Mapped[int] = mapped_column(Integer)
    device_seconds: Mapped[int] = mapped_column(BigInteger)
    compute_pct_seconds: Mapped[int] = mapped_column(BigInteger)
    mem_mib_seconds: Mapped[int] = mapped_column(BigInteger)
    cpu_milli_seconds: Mapped[int] = mapped_column(BigInteger)
    # the node whose part of a job spanning nodes it meters (parts end at their own times
    # when a node is cut off); null: the whole allocation
    node: Mapped[str | None] = mapped_column(String(200), nullable=True)


class AuditRow(Base):
    __tablename__ = "audit_log"
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    time: Mapped[float] = mapped_column(Float, index=True)
    actor: Mapped[str] = mapped_column(String(100))
    role: Mapped[str] = mapped_column(String(20))
    action: Mapped[str] = mapped_column(String(200))
    target: Mapped[str] = mapped_column(String(500))
    result: Mapped[int] = mapped_column(Integer)
    client: Mapped[str] = mapped_column(String(100))
    detail: Mapped[str] = mapped_column(Text, default="")


class PriceRow(Base):
    """A card-month price in fen from ``effective_from`` (invariant 2: never a float for
    money). Models without a row bill at the seed's list prices."""

    __tablename__ = "prices"
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    model: Mapped[str] = mapped_column(String(100), index=True)
    monthly_fen: Mapped[int] = mapped_column(BigInteger)
    hourly_fen: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    effective_from: Mapped[float] = mapped_column(Float)
    created_by: Mapped[str] = mapped_column(String(100))
    created_at: Mapped[float] = mapped_column(Float)


class RentalPlanRow(Base):
    """A tenant rents ``cards`` cards of ``model`` over [start, end) at ``total_fen``, locked
    when it was made; while active it adds to the tenant's guaranteed quota."""

    __tablename__ = "rental_plans"
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    tenant: Mapped[str] = mapped_column(ForeignKey("tenants.name", ondelete="CASCADE"), index=True)
    model: Mapped[str] = mapped_column(String(100))
    cards: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(20))  # hourly, daily, monthly, annual
    periods: Mapped[int] = mapped_column(Integer)
    start: Mapped[float] = mapped_column(Float)
    end: Mapped[float] = mapped_column(Float)
    total_fen: Mapped[int] = mapped_column(BigInteger)
    cancelled_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    # upfront: all of it on the invoice of the month it starts; monthly: prorated by month
    payment: Mapped[str] = mapped_column(String(10), default="monthly", server_default="monthly")
    created_by: Mapped[str] = mapped_column(String(100))
    created_at: Mapped[float] = mapped_column(Float)


class TenantBillingRow(Base):
    """How a tenant is billed: its mode (card-hour, gpu-mem, per-task), chargeback (invoiced,
    a renter) or showback (cost reports only, an internal team), per-task prices in fen."""

    __tablename__ = "tenant_billing"
    tenant: Mapped[str] = mapped_column(
        ForeignKey("tenants.name", ondelete="CASCADE"), primary_key=True
    )
    mode: Mapped[str] = mapped_column(String(20), default="card-hour")
    kind: Mapped[str] = mapped_column(String(20), default="chargeback")
    task_prices: Mapped[dict[str, Any]] = mapped_column(default=dict)
    discount_pct: Mapped[int] = mapped_column(Integer, default=0, server_default="0")


class AlertRow(Base):
    """One alert, deduplicated by ``key`` (an alert that fires again reopens its row).
    ``notified``: the last state delivered to the webhook; deliveries retry with backoff."""

    __tablename__ = "alerts"
    __table_args__ = (UniqueConstraint("key", name="uq_alerts_key"),)
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    key: Mapped[str] = mapped_column(String(300))
    kind: Mapped[str] = mapped_column(String(40))
    tenant: Mapped[str | None] = mapped_column(String(100), nullable=True)
    subject: Mapped[str] = mapped_column(String(300))
    message: Mapped[str] = mapped_column(Text)
    state: Mapped[str] = mapped_column(String(20), index=True)  # firing, resolved
    started_at: Mapped[float] = mapped_column(Float)
    resolved_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    notified: Mapped[str] = mapped_column(String(20), default="")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[float] = mapped_column(Float, default=0.0)
    last_error: Mapped[str] = mapped_column(Text, default="")


class BudgetRow(Base):
    """A tenant's monthly budget in fen, the percentages that alert, and what happens at
    100%: ``notify`` only, or ``stop-elastic`` (no new work beyond its guarantee)."""

    __tablename__ = "budgets"
    tenant: Mapped[str] = mapped_column(
        ForeignKey("tenants.name", ondelete="CASCADE"), primary_key=True
    )
    monthly_fen: Mapped[int] = mapped_column(BigInteger)
    thresholds: Mapped[list[Any]] = mapped_column(default=list)
    action: Mapped[str] = mapped_column(String(20), default="notify")


class CreditRow(Base):
    """An amount (fen) taken off a tenant's invoice for a month, with why (an outage, a
    goodwill gesture); a line of its own."""

    __tablename__ = "credits"
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    tenant: Mapped[str] = mapped_column(ForeignKey("tenants.name", ondelete="CASCADE"), index=True)
    month: Mapped[str] = mapped_column(String(7))
    amount_fen: Mapped[int] = mapped_column(BigInteger)
    reason: Mapped[str] = mapped_column(String(500))
    created_by: Mapped[str] = mapped_column(String(100))
    created_at: Mapped[float] = mapped_column(Float)


class IssuedInvoiceRow(Base):
    """A tenant's invoice for a month as issued: a ``draft`` (made again by each issuing run
    until the month is finalised), then ``final`` with its ``number`` and never changed. The
    body is the invoice as computed then (lines, total, period), in its mode."""

    __tablename__ = "issued_invoices"
    __table_args__ = (UniqueConstraint("tenant", "month", name="uq_issued_invoices_tenant_month"),)
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    tenant: Mapped[str] = mapped_column(ForeignKey("tenants.name", ondelete="RESTRICT"), index=True)
    month: Mapped[str] = mapped_column(String(7), index=True)
    zone: Mapped[str] = mapped_column(String(64))
    state: Mapped[str] = mapped_column(String(10))  # draft or final
    number: Mapped[str | None] = mapped_column(String(40), unique=True, nullable=True)
    total_fen: Mapped[int] = mapped_column(BigInteger)
    body: Mapped[dict[str, Any]] = mapped_column()
    issued_by: Mapped[str] = mapped_column(String(100))
    issued_at: Mapped[float] = mapped_column(Float)
    finalised_at: Mapped[float | None] = mapped_column(Float, nullable=True)


class PoolSampleRow(Base):
    """The pool per model at one instant (the leader samples every ``sample_interval_s``):
    the dashboard's utilisation over 24 h / 7 d, allocated and really used."""

    __tablename__ = "pool_samples"
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    time: Mapped[float] = mapped_column(Float, index=True)
    model: Mapped[str] = mapped_column(String(100))
    cards: Mapped[int] = mapped_column(Integer)
    allocated: Mapped[int] = mapped_column(Integer)
    util_sum: Mapped[float] = mapped_column(Float)  # of fresh telemetry, util_n cards
    util_n: Mapped[int] = mapped_column(Integer)


class ServiceRow(Base):
    """An elastic inference service: its replicas are jobs (``service_replicas``) the leader's
    autoscaler starts and stops between ``min_replicas`` and ``max_replicas``."""

    __tablename__ = "services"
    __table_args__ = (UniqueConstraint("tenant", "name", name="uq_services_tenant_name"),)
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    tenant: Mapped[str] = mapped_column(ForeignKey("tenants.name", ondelete="RESTRICT"), index=True)
    name: Mapped[str] = mapped_column(String(100))
    request: Mapped[str] = mapped_column(Text)  # one replica's, canonical request grammar
    command: Mapped[list[Any]] = mapped_column(default=list)
    image: Mapped[str | None] = mapped_column(String(500), nullable=True)
    env: Mapped[dict[str, Any]] = mapped_column(default=dict)
    min_replicas: Mapped[int] = mapped_column(Integer)
    max_replicas: Mapped[int] = mapped_column(Integer)
    metric: Mapped[str] = mapped_column(String(20))  # rps, concurrency, latency_p95
    target: Mapped[float] = mapped_column(Float)  # per replica (latency: seconds)
    utilisation: Mapped[float] = mapped_column(Float)  # headroom: scale at this share
    stable_s: Mapped[float] = mapped_column(Float)
    scale_down_delay_s: Mapped[float] = mapped_column(Float)
    startup_s: Mapped[float] = mapped_column(Float)  # start to ready, for prediction
    policy: Mapped[str] = mapped_column(String(20))  # reactive or predictive
    health_path: Mapped[str] = mapped_column(String(200))
    pinned: Mapped[int | None] = mapped_column(Integer, nullable=True)  # service scale N
    desired: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(Text, default="")
    created_by: Mapped[str] = mapped_column(String(100))
    created_at: Mapped[float] = mapped_column(Float)
    # replicas that failed in a row (exited, or replaced by their health checks), and when
    # the next replacement may start: replacements back off, a ready replica resets both
    failures_in_row: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    retry_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    last_failure: Mapped[str] = mapped_column(Text, default="", server_default="")
    # engines it keeps (awake or parked): replicas past its need park instead of stopping
    warm: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # spread (a replica per node first) or pack (few nodes: training keeps whole servers)
    placement: Mapped[str] = mapped_column(String(10), default="spread", server_default="spread")


class ServiceReplicaRow(Base):
    """One replica: its job, the port it serves on and what the health checks found."""

    __tablename__ = "service_replicas"
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    service_id: Mapped[int] = mapped_column(
        ForeignKey("services.id", ondelete="CASCADE"), index=True
    )
    port: Mapped[int | None] = mapped_column(Integer, nullable=True)  # older: set by the server
    endpoint: Mapped[str | None] = mapped_column(String(300), nullable=True)
    ready: Mapped[bool] = mapped_column(Boolean, default=False)
    draining_since: Mapped[float | None] = mapped_column(Float, nullable=True)
    failures: Mapped[int] = mapped_column(Integer, default=0)
    checked_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    ready_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    # warm parking (issue 49): asleep with its weights in host memory, its card lent to
    # training (its allocation holds no device meanwhile; ``card``: the devices it had)
    parked: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    park_at: Mapped[float | None] = mapped_column(Float, nullable=True)  # a park asked
    wake_at: Mapped[float | None] = mapped_column(Float, nullable=True)  # a wake asked
    card: Mapped[list[Any] | None] = mapped_column(JSON, nullable=True)
    woke_in_s: Mapped[float | None] = mapped_column(Float, nullable=True)  # last wake to ready
    # its agent's last look at it on its control port (services.readings), and when
    reading: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    read_at: Mapped[float | None] = mapped_column(Float, nullable=True)


class ServiceSampleRow(Base):
    """The service's load and replicas at one instant (one a minute): its history for the
    forecaster and the dashboard's forecast against actual."""

    __tablename__ = "service_samples"
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    service_id: Mapped[int] = mapped_column(
        ForeignKey("services.id", ondelete="CASCADE"), index=True
    )
    time: Mapped[float] = mapped_column(Float, index=True)
    load: Mapped[float] = mapped_column(Float)
    ready: Mapped[int] = mapped_column(Integer)
    desired: Mapped[int] = mapped_column(Integer)
    forecast: Mapped[float | None] = mapped_column(Float, nullable=True)


class AdvisoryRow(Base):
    """An action the scheduler proposes instead of taking (advisory mode, per action)."""

    __tablename__ = "advisory_actions"
    action: Mapped[str] = mapped_column(String(20), primary_key=True)
    changed_by: Mapped[str] = mapped_column(String(100), default="")
    changed_at: Mapped[float] = mapped_column(Float, default=0.0)


class ProposalRow(Base):
    """What the scheduler would have done (to a job, a card, a service), waiting for an admin:
    ``pending`` → ``approved`` (then ``done`` once carried out) / ``rejected`` / ``expired``."""

    __tablename__ = "proposals"
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    job_id: Mapped[int | None] = mapped_column(
        ForeignKey("jobs.id", ondelete="CASCADE"), nullable=True, index=True
    )
    tenant: Mapped[str] = mapped_column(String(100))
    subject: Mapped[str] = mapped_column(String(200), index=True)  # job 12, n1 device 0 -> mig
    action: Mapped[str] = mapped_column(String(20))
    state: Mapped[str] = mapped_column(String(20), index=True)
    reason: Mapped[str] = mapped_column(Text, default="")
    gain: Mapped[str] = mapped_column(Text, default="")
    detail: Mapped[dict[str, Any]] = mapped_column()  # nodes and cards, victims
    created_at: Mapped[float] = mapped_column(Float)
    expires_at: Mapped[float] = mapped_column(Float)
    decided_by: Mapped[str] = mapped_column(String(100), default="")
    decided_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    done_at: Mapped[float | None] = mapped_column(Float, nullable=True)


class StartEstimateRow(Base):
    """A pending job's estimated start, from the leader's last plan (scheduler/estimates.py):
    the whole table is replaced by each plan; ``start`` None: not within the plan."""

    __tablename__ = "start_estimates"
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    start: Mapped[float | None] = mapped_column(Float, nullable=True)
    nodes: Mapped[list[Any]] = mapped_column(default=list)
    basis: Mapped[str] = mapped_column(Text, default="")
    computed_at: Mapped[float] = mapped_column(Float)


class NotebookPassRow(Base):
    """A browser's way into one notebook (docs/interactive.md, "Notebooks"): a one-time
    *link* (``gpupool notebook`` prints it; a minute to use) traded for a *cookie* scoped to
    the notebook's path. Stored as the SHA-256 of its secret; it lives no longer than the
    API token that made it (``token_id``), whose user and role it acts as."""

    __tablename__ = "notebook_passes"
    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    secret_hash: Mapped[str] = mapped_column(String(64), unique=True)
    kind: Mapped[str] = mapped_column(String(10))  # link | cookie
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    token_id: Mapped[int] = mapped_column(ForeignKey("api_tokens.id", ondelete="CASCADE"))
    created_at: Mapped[float] = mapped_column(Float)
    expires_at: Mapped[float] = mapped_column(Float)
    used: Mapped[bool] = mapped_column(Boolean, default=False)  # a link, once traded

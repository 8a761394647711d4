"""Build the engine's inputs from the state of record.

The node part of the snapshot is rebuilt only when ``nodes_version`` changes; live
allocations are diffed against the previous cycle (apply the new, release the gone), so a
cycle's cost follows what changed, not the size of the cluster.
"""

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from sqlalchemy import Connection, Row, and_, func, or_, select
from sqlalchemy.orm import Session

from gpupool.model import Job, JobKind, Node, ResourceRequest, SpecError, parse_request
from gpupool.model.devices import AGENT_BEHIND
from gpupool.scheduler import ClusterState
from gpupool.scheduler.actions.park import ParkAsk
from gpupool.scheduler.cycle import RunningJob
from gpupool.scheduler.gates import HOLDING, Gated, gate
from gpupool.scheduler.parking import parked, woken
from gpupool.scheduler.placement_json import placement_from_json
from gpupool.scheduler.priorities import QueuePolicy
from gpupool.scheduler.reservations import Reservation
from gpupool.scheduler.tenants import CARD, Quota, Tenant, TenantTree
from gpupool.server.codec import node_from_rows
from gpupool.server.db.tables import (
    AllocationRow,
    DeviceRow,
    JobRow,
    Meta,
    NodeRow,
    PriorityClassRow,
    QuotaRow,
    ReservationRow,
    ServiceReplicaRow,
    TenantRow,
)
from gpupool.server.kube_mirror import KUBERNETES_ACTION
from gpupool.server.rentals import active_plans
from gpupool.server.replacements import replacing
from gpupool.server.services.replica_nodes import CANNOT_RUN_REPLICAS, cannot_run_replicas


@lru_cache(maxsize=4096)
def cached_request(spec: str) -> ResourceRequest:
    return parse_request(spec)


@dataclass
class CycleInputs:
    state: ClusterState
    running: list[RunningJob]
    pending: list[Job]
    reasons: dict[str, tuple[str, str]]  # pending job id -> (reason, wait code) stored now
    allocation_of: dict[str, int]  # running job id -> allocation id
    tenants: TenantTree
    queue: QueuePolicy
    reservations: list[Reservation]
    invalid: dict[str, str]  # pending jobs the engine cannot read: id -> why
    gated: dict[str, str]  # pending jobs held, waiting for dependencies or an array's limit
    replacing: frozenset[str] = frozenset()  # replicas whose copy starts (make-before-break)
    copies: frozenset[int] = frozenset()  # live jobs that are a replica's copy
    parks: list[ParkAsk] = field(default_factory=list)  # replicas to park or wake


_JOB_FIELDS = (
    "id",
    "request",
    "tenant",
    "kind",
    "priority_class",
    "priority",
    "gang_size",
    "max_runtime_s",
    "submit_time",
    "on_preempt",
    "one_per_node",
    "checkpoint",
    "policy",
    "nodelist",
    "exclude",
)
JOB_COLUMNS = tuple(JobRow.__table__.c[name] for name in _JOB_FIELDS)


def _job(row, request: ResourceRequest) -> Job:
    """The engine's job from a row carrying ``JOB_COLUMNS``."""
    return Job(
        id=str(row.id),
        request=request,
        tenant=row.tenant,
        kind=JobKind(row.kind),
        priority_class=row.priority_class,
        priority=row.priority,
        gang_size=row.gang_size,
        max_runtime_s=row.max_runtime_s,
        submit_time=row.submit_time,
        on_preempt=row.on_preempt,
        one_per_node=bool(row.one_per_node),
        checkpoint_grace_s=row.checkpoint["grace_s"] if row.checkpoint else None,
        policy=row.policy,
        required_nodes=tuple(row.nodelist or ()),
        excluded_nodes=frozenset(row.exclude or ()),
    )


_DEVICE_COLUMNS = tuple(
    DeviceRow.__table__.c[name]
    for name in ("node", "index", "model", "vendor", "memory_mib", "uuid", "healthy", "mode",
                 "want_mode", "island", "pcie_switch")
)  # fmt: skip
_NODE_COLUMNS = tuple(
    NodeRow.__table__.c[name]
    for name in ("name", "cpu_millis", "memory_mib", "labels", "pool", "state", "schedulable",
                 "agent_lag_s")
)  # fmt: skip


class SnapshotBuilder:
    """Keeps the node snapshot and live placements between cycles of one leader."""

    def __init__(self, lag_max_s: float = float("inf")) -> None:
        """``lag_max_s``: a node whose agent is further behind takes no new work."""
        self.lag_max_s = lag_max_s
        self.nodes_version = -1
        self.base: ClusterState | None = None
        self.live: dict[int, RunningJob] = {}  # allocation id -> its job, applied to base
        self.copies: dict[int, int] = {}  # allocation id -> its job, a replica's copy
        self.generations: dict[int, int] = {}  # allocation id -> the generation read
        self.closed: set[str] = set()  # nodes that take no new work
        self.names: frozenset[str] = frozenset()  # every agent node
        self.no_replicas: frozenset[str] = frozenset()  # agent nodes that say replicas "no"
        self._node_cache: dict[str, tuple[tuple, Node]] = {}  # name -> (its rows, its Node)
        self._pending: dict[int, tuple[tuple, Job]] = {}  # job id -> (its row, its Job)

    def _nodes(self, session: Session) -> list[Node]:
        """Every agent node as the engine sees it. Core rows of only the columns that shape a
        node, and a node whose rows are as last time keeps its ``Node``: with a thousand
        nodes registering, rebuilding each from ORM objects after every change was most of
        the server's CPU."""
        conn = session.connection()
        devices: dict[str, list[Any]] = {}
        for d in conn.execute(select(*_DEVICE_COLUMNS)):
            devices.setdefault(d.node, []).append(d)
        held: dict[str, tuple[int, int]] | None = None  # read only if a node is closed
        nodes: list[Node] = []
        self.closed = set()
        no_replicas: set[str] = set()
        cache, self._node_cache = self._node_cache, {}
        agents = select(*_NODE_COLUMNS).where(NodeRow.source == "agent").order_by(NodeRow.name)
        for row in conn.execute(agents):  # Kubernetes nodes: its own scheduler's
            rows = (tuple(row), tuple(tuple(d) for d in devices.get(row.name, ())))
            kept = cache.get(row.name)
            node = kept[1] if kept is not None and kept[0] == rows else None
            if node is None:
                node = node_from_rows(row, devices.get(row.name, []))
            self._node_cache[row.name] = (rows, node)
            behind = row.agent_lag_s > self.lag_max_s
            if row.state != "ready" or not row.schedulable or behind:
                held = _held_on_nodes(session) if held is None else held
                why = AGENT_BEHIND if behind and row.state == "ready" else "closed"
                node = _closed(node, held.get(row.name, (0, 0)), why)
                self.closed.add(row.name)
            if cannot_run_replicas(row.labels):
                no_replicas.add(row.name)
            nodes.append(node)
        self.names = frozenset(n.name for n in nodes)
        self.no_replicas = frozenset(no_replicas)
        return nodes

    def _replica_nodes(self, conn: Connection, pending: list[Job]) -> list[Job]:
        """Pending service replicas kept to the nodes whose agents can run one (the others
        say ``gpupool.io/replicas: no``: a root agent without nft cannot publish the port)."""
        if not self.no_replicas or not pending:
            return pending
        replicas = {
            str(job_id)
            for (job_id,) in conn.execute(
                select(ServiceReplicaRow.job_id)
                .join(JobRow, JobRow.id == ServiceReplicaRow.job_id)
                .where(JobRow.state == "pending")
            )
        }
        if not replicas:
            return pending
        allowed = self.names - self.no_replicas
        return [
            replace(
                job,
                nodes=allowed if job.nodes is None else job.nodes & allowed,
                nodes_why=CANNOT_RUN_REPLICAS,
            )
            if job.id in replicas
            else job
            for job in pending
        ]

    def build(self, session: Session, closed: Mapping[str, str] | None = None) -> CycleInputs:
        version = session.execute(select(Meta.nodes_version).where(Meta.id == 1)).scalar_one()
        # Core statements on the tables throughout: ORM row processing was most of a cycle's
        # snapshot cost with thousands of live allocations
        conn = session.connection()
        allocs, jobs = AllocationRow.__table__.c, JobRow.__table__.c
        held = conn.execute(
            select(allocs.id, allocs.job_id, allocs.generation).where(
                allocs.state == "active", allocs.action != KUBERNETES_ACTION
            )
        ).all()
        current = {a: job for a, job, _ in held}
        generations = {a: g for a, _, g in held}
        # a replica parked or woken kept its allocation with another placement (and a newer
        # generation): read again
        gone = [
            a
            for a in self.live
            if a not in current or generations[a] != self.generations.get(a, generations[a])
        ]
        # a closed node's capacity is sized to what it holds: a release there must rebuild it
        reopen = any(set(self.live[a].placement.node_names) & self.closed for a in gone)
        if version != self.nodes_version or self.base is None or reopen:
            self.base = ClusterState(self._nodes(session)).use_default_memory()
            self.nodes_version = version
            self.live = {}
            self.copies = {}
            gone = []
        state = self.base
        for alloc_id in gone:
            state.release(self.live.pop(alloc_id).job.id)
            self.copies.pop(alloc_id, None)
        self.generations = generations
        new = [a for a in current if a not in self.live]
        for start in range(0, len(new), 500):
            chunk = new[start : start + 500]
            for row in conn.execute(
                select(
                    allocs.id.label("allocation_id"),
                    allocs.placement,
                    allocs.created_at,
                    allocs.borrowed,
                    jobs.replaces,
                    *JOB_COLUMNS,
                )
                .join_from(AllocationRow.__table__, JobRow.__table__, jobs.id == allocs.job_id)
                .where(allocs.id.in_(chunk))
            ):
                placement = placement_from_json(str(row.id), row.placement)
                state.apply(placement)
                job = _job(row, cached_request(row.request))
                self.live[row.allocation_id] = RunningJob(
                    job, placement, row.created_at, row.borrowed
                )
                if row.replaces is not None:
                    self.copies[row.allocation_id] = row.id
        saved = dict(  # checkpoints change without a new generation: read each cycle
            conn.execute(
                select(allocs.id, allocs.checkpointed_at).where(
                    allocs.state == "active", allocs.checkpointed_at.is_not(None)
                )
            ).all()
        )
        running = [
            replace(self.live[a], checkpointed_at=saved[a]) if a in saved else self.live[a]
            for a in current
        ]
        copies = frozenset(self.copies.values())
        allocation_of = {str(job_id): a for a, job_id in current.items()}
        pending: list[Job] = []
        reasons: dict[str, tuple[str, str]] = {}
        invalid: dict[str, str] = {}
        rows = conn.execute(
            select(*JOB_COLUMNS, *GATE_COLUMNS, jobs.reason, jobs.wait_code).where(
                jobs.state == "pending"
            )
        ).all()
        gated = {str(k): v for k, v in job_gates(conn, rows).items()}
        known, self._pending = self._pending, {}
        for row in rows:
            if str(row.id) in gated:
                reasons[str(row.id)] = (row.reason, row.wait_code)
                continue
            # a waiting job whose row is as last cycle keeps its Job: building 100,000 of
            # them again each cycle was most of a steady cycle's snapshot
            key = tuple(row)
            kept = known.get(row.id)
            if kept is not None and kept[0] == key:
                job = kept[1]
            else:
                try:
                    job = _job(row, cached_request(row.request))
                except SpecError as exc:
                    invalid[str(row.id)] = str(exc)
                    reasons[str(row.id)] = (row.reason, row.wait_code)
                    continue
            self._pending[row.id] = (key, job)
            pending.append(job)
            reasons[str(row.id)] = (row.reason, row.wait_code)
        pending = self._replica_nodes(conn, pending)
        return CycleInputs(
            state=state.clone(),
            running=running,
            pending=pending,
            reasons=reasons,
            allocation_of=allocation_of,
            tenants=tenant_tree(session, closed=closed),
            queue=queue_policy(session),
            reservations=reservations(session),
            invalid=invalid,
            gated=gated,
            replacing=replacing(session, copies),
            copies=copies,
            parks=park_asks(conn, self.live, current),
        )


GATE_COLUMNS = tuple(
    JobRow.__table__.c[name]
    for name in ("held", "dependency", "array_job", "array_index", "array_limit", "begin_at",
                 "name", "submitted_by")
)  # fmt: skip
LIVE = ("pending", "admitted", "running")


def job_gates(conn: Connection, rows: Sequence[Row[*tuple[Any, ...]]]) -> dict[int, str]:
    """The pending ``rows`` (with ``GATE_COLUMNS``) that must not be scheduled now, and why:
    reads the states their dependencies and arrays need, then decides with ``gates.gate``."""
    jobs = JobRow.__table__.c
    gated = [
        Gated(
            r.id,
            r.held,
            tuple((d["type"], int(d["job"])) for d in r.dependency or () if d.get("job")),
            r.array_job,
            r.array_index,
            r.array_limit,
            r.begin_at,
            (r.submitted_by, r.name)
            if any(d["type"] == "singleton" for d in r.dependency or ())
            else None,
        )
        for r in rows
        if r.held or r.dependency or r.array_limit is not None or r.begin_at is not None
    ]
    if not gated:
        return {}
    targets = sorted({job for g in gated for _, job in g.dependency})
    states: dict[int, list[str]] = {}
    for start in range(0, len(targets), 500):
        chunk = set(targets[start : start + 500])
        for job_id, array_job, state in conn.execute(
            select(jobs.id, jobs.array_job, jobs.state).where(
                or_(jobs.id.in_(chunk), jobs.array_job.in_(chunk))
            )
        ):
            # a dependency on an array's first task (its array id) waits for every task
            if array_job in chunk:
                states.setdefault(array_job, []).append(state)
            if job_id in chunk and job_id != array_job:
                states.setdefault(job_id, []).append(state)
    arrays = sorted({g.array_job for g in gated if g.array_job is not None and g.array_limit})
    holding: dict[int, int] = {}
    if arrays:
        holding = dict(
            conn.execute(
                select(jobs.array_job, func.count())
                .where(jobs.array_job.in_(arrays), jobs.state.in_(HOLDING))
                .group_by(jobs.array_job)
            ).all()
        )
    return gate(gated, states, holding, time.time(), _singles(conn, gated))


def _singles(conn: Connection, gated: list[Gated]) -> dict[tuple[str, str], list[tuple[int, str]]]:
    """For each (user, name) of a singleton job: that user's live jobs of that name."""
    keys = sorted({g.singleton for g in gated if g.singleton is not None})
    out: dict[tuple[str, str], list[tuple[int, str]]] = {}
    jobs = JobRow.__table__.c
    for start in range(0, len(keys), 200):
        pairs = [and_(jobs.submitted_by == u, jobs.name == n) for u, n in keys[start : start + 200]]
        for job_id, user, name, state in conn.execute(
            select(jobs.id, jobs.submitted_by, jobs.name, jobs.state).where(
                or_(*pairs), jobs.state.in_(LIVE)
            )
        ):
            out.setdefault((user, name), []).append((job_id, state))
    return out


def _held_on_nodes(session: Session) -> dict[str, tuple[int, int]]:
    """CPU and memory held by live allocations, per node."""
    held: dict[str, tuple[int, int]] = {}
    for (placement,) in session.execute(
        select(AllocationRow.placement).where(AllocationRow.state == "active")
    ):
        for n in placement["nodes"]:
            cpu, mem = held.get(n["node"], (0, 0))
            held[n["node"]] = (cpu + n["cpu_millis"], mem + n["mem_mib"])
    return held


def _closed(node: Node, held: tuple[int, int], why: str) -> Node:
    """A node that takes no new work (lost, fenced or cordoned): its devices count as
    unhealthy and its free CPU and memory as zero, so live grants still fit and nothing new
    does."""
    devices = tuple(replace(d, healthy=False) for d in node.devices)
    return replace(node, cpu_millis=held[0], memory_mib=held[1], devices=devices, closed=why)


def tenant_tree(
    session: Session, now: float | None = None, closed: Mapping[str, str] | None = None
) -> TenantTree:
    """Tenants and quotas; an active rental plan adds its cards to its tenant's guarantee of
    every card resource already in use (``gpu``, ``gpu:MODEL``); tenants in ``closed`` (over
    a stop-elastic budget, with why) may borrow nothing."""
    quotas: dict[str, dict[str, Quota]] = {}
    for q in session.execute(select(QuotaRow)).scalars():
        quotas.setdefault(q.tenant, {})[q.resource] = Quota(
            q.nominal, q.borrowing_limit, q.lending_limit
        )
    managed = {f for per in quotas.values() for f in per}
    for plan in active_plans(session, time.time() if now is None else now):
        mine = quotas.setdefault(plan.tenant, {})
        for resource in ("gpu", f"gpu:{plan.model}"):
            if resource in managed:
                had = mine.get(resource, Quota(0))
                mine[resource] = replace(had, nominal=had.nominal + plan.cards * CARD)
    return TenantTree(
        (
            Tenant(t.name, t.parent, quotas.get(t.name, {}), t.weight)
            for t in session.execute(select(TenantRow)).scalars()
        ),
        closed,
    )


def queue_policy(session: Session) -> QueuePolicy:
    classes = {c.name: c.value for c in session.execute(select(PriorityClassRow)).scalars()}
    return QueuePolicy(classes=classes)


def reservations(session: Session) -> list[Reservation]:
    return [
        Reservation(f"r-{r.id}", r.tenant, tuple(r.nodes), r.start, r.end, r.cards)
        for r in session.execute(select(ReservationRow)).scalars()
    ]


def park_asks(
    conn: Connection, live: Mapping[int, RunningJob], current: Mapping[int, int]
) -> list[ParkAsk]:
    """The service replicas to park (asked, not yet done) or wake (parked, a wake asked)."""
    rep = ServiceReplicaRow.__table__.c
    rows = conn.execute(
        select(rep.job_id, rep.parked, rep.park_at, rep.wake_at, rep.card).where(
            or_(
                and_(rep.park_at.is_not(None), rep.parked.is_(False)),
                and_(rep.parked.is_(True), rep.wake_at.is_not(None)),
            )
        )
    ).all()
    if not rows:
        return []
    by_job = {job: live[a] for a, job in current.items() if a in live}
    asks = []
    for row in rows:
        r = by_job.get(row.job_id)
        if r is None or len(r.placement.nodes) != 1:
            continue
        if row.parked:
            if row.card:
                asks.append(ParkAsk(r.job.id, woken(r.placement, row.card), True))
        elif r.placement.devices:
            asks.append(ParkAsk(r.job.id, parked(r.placement), False))
    return asks

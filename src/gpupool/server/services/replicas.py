"""A service's replicas in the state of record: each is a job of the service's tenant at the
online-inference priority (placed by the ``spread`` policy: the emptiest node first, so
replicas land on different nodes; a service with ``placement: pack`` by ``best-fit``: the
fullest node first, so training keeps whole servers for its gangs). Its port is chosen by
the agent that runs it — free on that node, published into the tenant's network namespace —
and reported with its start (``allocations.port``): the server never derives one."""

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpupool.autoscale.reading import Reading
from gpupool.model.labels import ADDRESS_LABEL, REPLICA_CONTROL_LABEL, host_port
from gpupool.model.protocol import ReplicaProbeOut
from gpupool.server.db.tables import (
    AllocationNodeRow,
    AllocationRow,
    DeviceRow,
    JobEventRow,
    JobRow,
    NodeRow,
    ServiceReplicaRow,
    ServiceRow,
)
from gpupool.server.lifecycle import TERMINAL, finish
from gpupool.server.pool_view import telemetry_util
from gpupool.server.services.readings import reading_of

PRIORITY_CLASS = "online-inference"


def add_replica(s: Session, svc: ServiceRow, now: float) -> int:
    """Insert one replica job (pending; the scheduler places it) and its replica row."""
    job = JobRow(
        tenant=svc.tenant,
        name=f"{svc.name}-replica"[:200],
        request=svc.request,
        kind="inference",
        priority_class=PRIORITY_CLASS,
        priority=0,
        gang_size=1,
        on_preempt="kill",
        on_lost="requeue",
        policy="best-fit" if svc.placement == "pack" else None,
        command=list(svc.command),
        image=svc.image,
        env={**svc.env, "GPUPOOL_SERVICE": svc.name},
        submitted_by=svc.created_by,
        state="pending",
        reason="queued (service replica)",
        submit_time=now,
        queued_at=now,
    )
    s.add(job)
    s.flush()
    s.add(JobEventRow(job_id=job.id, time=now, from_state=None, to_state="pending",
                      reason=f"replica of service {svc.name}", actor="autoscaler"))  # fmt: skip
    s.add(ServiceReplicaRow(job_id=job.id, service_id=svc.id, port=None, ready=False, failures=0))
    return job.id


def stop_replica(s: Session, job_id: int, now: float, reason: str) -> None:
    """Cancel a replica's job (its allocation is released and metered now) and forget it."""
    job = s.get(JobRow, job_id)
    if job is not None and job.state not in TERMINAL:
        finish(s, job, "cancelled", now, reason, "autoscaler")
    row = s.get(ServiceReplicaRow, job_id)
    if row is not None:
        s.delete(row)


@dataclass
class Replica:
    """A replica as the reconciler sees it."""

    job_id: int
    service_id: int
    state: str
    port: int | None  # None until its agent reports it
    node: str | None
    host: str | None
    ready: bool
    draining_since: float | None
    failures: int
    ready_at: float | None
    started_at: float | None
    reason: str = ""
    parked: bool = False  # asleep, its allocation holding no device
    park_at: float | None = None  # a park asked, not yet done by the scheduler
    wake_at: float | None = None  # a wake asked (kept until it is ready again)
    woke_in_s: float | None = None
    parked_on: list[int] | None = None  # the devices it wakes on, while parked
    checked_at: float | None = None  # the time of the last reading the reconciler took
    read: Reading | None = None  # its agent's last look at it (services.readings)
    legacy: bool = False  # its node's agent does not look at replicas: the server probes
    wait_code: str = ""  # its job's (``waking``: why its card is not taken back yet)
    replaces: int | None = None  # a copy (make-before-break): the replica it takes over from

    @property
    def endpoint(self) -> str | None:
        return host_port(self.host, self.port) if self.host and self.port else None


def read_replicas(s: Session, service_ids: list[int]) -> list[Replica]:
    """Every replica of these services with its job's state and node (one query each)."""
    if not service_ids:
        return []
    rows = s.execute(
        select(
            ServiceReplicaRow,
            JobRow.state,
            JobRow.started_at,
            JobRow.reason,
            JobRow.wait_code,
            JobRow.replaces,
        )
        .join(JobRow, JobRow.id == ServiceReplicaRow.job_id)
        .where(ServiceReplicaRow.service_id.in_(service_ids))
    ).all()
    jobs = [r.job_id for r, *_ in rows]
    held = s.execute(
        select(AllocationRow.job_id, AllocationNodeRow.node, AllocationRow.port)
        .join(AllocationNodeRow, AllocationNodeRow.allocation_id == AllocationRow.id)
        .where(AllocationRow.job_id.in_(jobs), AllocationRow.state == "active")
    ).all() if jobs else []  # fmt: skip
    nodes = {job: node for job, node, _ in held}
    ports = {job: port for job, _, port in held if port is not None}
    labels: dict[str, dict[str, str]] = dict(
        s.execute(
            select(NodeRow.name, NodeRow.labels).where(NodeRow.name.in_(nodes.values()))
        ).all()
    ) if nodes else {}  # fmt: skip
    out = []
    for r, state, started, reason, wait_code, replaces in rows:
        node = nodes.get(r.job_id)
        known = (labels.get(node) or {}) if node else {}
        host = known.get(ADDRESS_LABEL, node) if node else None
        out.append(
            Replica(r.job_id, r.service_id, state, ports.get(r.job_id, r.port), node, host,
                    r.ready, r.draining_since, r.failures, r.ready_at, started, reason,
                    r.parked, r.park_at, r.wake_at, r.woke_in_s,
                    [d["device"] for d in r.card] if r.parked and r.card else None,
                    r.checked_at, reading_of(r.reading, r.read_at),
                    node is not None and REPLICA_CONTROL_LABEL not in known, wait_code or "",
                    replaces)
        )  # fmt: skip
    return out


def replica_utilisation(s: Session, job_ids: list[int], now: float) -> dict[int, float]:
    """Each replica's GPU utilisation (%), the mean of the fresh telemetry of the cards its
    allocation holds (a shared card's whole-card figure: the agents do not split it)."""
    if not job_ids:
        return {}
    held = s.execute(
        select(AllocationRow.job_id, AllocationRow.placement).where(
            AllocationRow.job_id.in_(job_ids), AllocationRow.state == "active"
        )
    ).all()
    nodes = {n["node"] for _, p in held for n in p["nodes"]}
    telemetry = {
        (r.node, r.index): r.telemetry
        for r in s.execute(select(DeviceRow).where(DeviceRow.node.in_(nodes))).scalars()
    } if nodes else {}  # fmt: skip
    out = {}
    for job_id, placement in held:
        utils = [
            u
            for n in placement["nodes"]
            for d in n["devices"]
            if (u := telemetry_util(telemetry.get((n["node"], d["device"])), now)) is not None
        ]
        if utils:
            out[job_id] = sum(utils) / len(utils)
    return out


def parked_replicas(s: Session, job_ids: list[int]) -> set[int]:
    """Those of these jobs that are parked replicas (their engines are to sleep)."""
    if not job_ids:
        return set()
    return set(
        s.execute(
            select(ServiceReplicaRow.job_id).where(
                ServiceReplicaRow.job_id.in_(job_ids), ServiceReplicaRow.parked.is_(True)
            )
        ).scalars()
    )


def replica_jobs(s: Session, job_ids: list[int]) -> dict[int, ReplicaProbeOut]:
    """Those of these jobs that are service replicas, with how their agent looks at them."""
    if not job_ids:
        return {}
    rows = s.execute(
        select(ServiceReplicaRow.job_id, ServiceRow.health_path, ServiceRow.warm)
        .join(ServiceRow, ServiceRow.id == ServiceReplicaRow.service_id)
        .where(ServiceReplicaRow.job_id.in_(job_ids))
    ).all()
    return {job: ReplicaProbeOut(health_path=path, sleepy=warm > 0) for job, path, warm in rows}

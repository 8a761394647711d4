"""What agents found looking at their service replicas (``agent.replica_watch``), kept on the
replicas' rows for the reconciler's next pass.

Only the node's own agent may send them, and only for live allocations on that node that
are service replicas: a reading names an allocation, never an endpoint. A reading's time is
the agent's, taken no later than the server's now. A fault the agent found and handled (an
engine awake while parked) becomes an event of the replica's job."""

import math
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import select
from sqlalchemy.orm import Session

from gpupool.autoscale.reading import Reading
from gpupool.server.db.tables import AllocationRow, JobEventRow, JobRow, ServiceReplicaRow
from gpupool.server.lifecycle import live_on

MAX_READINGS = 500
MAX_BUCKETS = 64
Count = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class ReplicaReadingIn(BaseModel):
    """One look at one replica; ``ready`` None: only a fault to report."""

    model_config = ConfigDict(extra="ignore")  # newer agents may say more
    alloc_id: int = Field(ge=1, lt=2**62)
    ready: bool | None = None
    requests_total: Count | None = None
    in_flight: Count | None = None
    buckets: dict[str, Count] = Field(default_factory=dict, max_length=MAX_BUCKETS)
    error: str = Field("", max_length=300)
    asleep: bool | None = None
    at: float | None = Field(None, allow_inf_nan=False)
    fault: str = Field("", max_length=300)


class ReadingsIn(BaseModel):
    readings: list[ReplicaReadingIn] = Field(max_length=MAX_READINGS)


def _le(key: str) -> float | None:
    try:
        le = float(key)
    except ValueError:
        return None
    return None if math.isnan(le) else le


def record_readings(s: Session, node: str, readings: list[ReplicaReadingIn], now: float) -> int:
    """Write the readings of live replicas on ``node``; how many were taken (the others —
    not on this node, ended, not a replica — are dropped)."""
    wanted = {r.alloc_id: r for r in readings}
    if not wanted:
        return 0
    jobs = dict(
        s.execute(
            live_on(select(AllocationRow.id, AllocationRow.job_id), node).where(
                AllocationRow.id.in_(wanted)
            )
        ).all()
    )
    rows = {
        r.job_id: r
        for r in s.execute(
            select(ServiceReplicaRow).where(ServiceReplicaRow.job_id.in_(jobs.values()))
        ).scalars()
    }
    taken = 0
    for alloc_id, job_id in jobs.items():
        row, reading = rows.get(job_id), wanted[alloc_id]
        if row is None:
            continue
        taken += 1
        if reading.fault:
            state = s.execute(select(JobRow.state).where(JobRow.id == job_id)).scalar_one()
            s.add(JobEventRow(job_id=job_id, time=now, from_state=state, to_state=state,
                              reason=reading.fault, actor=f"agent {node}"))  # fmt: skip
        if reading.ready is None:
            continue
        at = min(now, reading.at if reading.at is not None else now)
        if row.read_at is not None and at <= row.read_at:
            continue  # an older look than the one kept
        row.read_at = at
        row.reading = {
            "ready": reading.ready,
            "requests_total": reading.requests_total,
            "in_flight": reading.in_flight,
            "buckets": {k: v for k, v in reading.buckets.items() if _le(k) is not None},
            "error": reading.error,
            "asleep": reading.asleep,
        }
    return taken


def reading_of(stored: dict[str, Any] | None, at: float | None) -> Reading | None:
    """A kept reading back as the autoscaler reads it."""
    if not stored or at is None:
        return None
    buckets: dict[float, float] = {}
    for key, count in (stored.get("buckets") or {}).items():
        le = _le(key)
        if le is not None:
            buckets[le] = float(count)
    return Reading(
        ready=bool(stored.get("ready")),
        requests_total=stored.get("requests_total"),
        in_flight=stored.get("in_flight"),
        buckets=buckets,
        error=str(stored.get("error") or ""),
        asleep=stored.get("asleep"),
        at=at,
    )

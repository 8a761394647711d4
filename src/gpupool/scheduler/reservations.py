"""Reservations: a tenant locks nodes for a future time window.

Before the window the reserved nodes run work that will be gone in time, as Slurm's
reservations let jobs that end before them in: jobs whose time limit ends before it starts,
the owner's own work (it keeps running into its window), and preemptible work — every job
but online inference (``online-inference`` class or ``inference`` kind), which is stopped
(requeued, or killed by its ``on_preempt``) when the window begins (``actions/reserve.py``).
During the window only the owning tenant (and its sub-tenants) may use them. A job that may
not use them is told which reservations, with their nodes.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np

from gpupool.model import Job, JobKind, SpecError


@dataclass(frozen=True, slots=True)
class Reservation:
    id: str
    tenant: str
    nodes: tuple[str, ...]
    start: float
    end: float

    def __post_init__(self) -> None:
        if self.end <= self.start:
            raise SpecError(f"reservation {self.id}: end must be after start", field="end")
        if not self.nodes:
            raise SpecError(f"reservation {self.id}: no nodes", field="nodes")


LAST = datetime(9999, 12, 31, tzinfo=UTC).timestamp()  # later than this: "never" ends


def iso(t: float) -> str:
    """Epoch seconds as an ISO 8601 UTC time to the second (``2026-12-03T10:00:00Z``)."""
    if t >= LAST:
        return "never"
    return datetime.fromtimestamp(t, UTC).replace(microsecond=0, tzinfo=None).isoformat() + "Z"


def preemptible(job: Job) -> bool:
    """Whether ``job`` may run on a future reservation's nodes, to be stopped at its start:
    online inference may not (a service's replica stopped on a timetable is an outage)."""
    return job.priority_class != "online-inference" and job.kind is not JobKind.INFERENCE


def owned(r: Reservation, owners: tuple[str, ...]) -> bool:
    return r.tenant in owners


def node_mask(
    reservations: Sequence[Reservation],
    job: Job,
    now: float,
    index: dict[str, int],
    owners: tuple[str, ...],
) -> tuple[np.ndarray | None, str]:
    """Nodes ``job`` may use now, and the reason charged to the others (naming every
    reservation that keeps the job out, with its nodes).

    ``owners`` is the job's tenant with its ancestors (a reservation of a team covers its
    projects). Returns (None, "") when no reservation restricts the job.
    """
    mask: np.ndarray | None = None
    said: list[str] = []
    for r in reservations:
        if r.end <= now or owned(r, owners):
            continue
        active = r.start <= now
        if not active:
            ends_in_time = job.max_runtime_s is not None and now + job.max_runtime_s <= r.start
            if ends_in_time or preemptible(job):
                continue
        if mask is None:
            mask = np.ones(len(index), dtype=bool)
        for name in r.nodes:
            if name in index:
                mask[index[name]] = False
        where = ", ".join(r.nodes[:4]) + (f" +{len(r.nodes) - 4}" if len(r.nodes) > 4 else "")
        said.append(
            f"{where} held by {r.tenant} ({r.id})"
            if active and r.end >= LAST
            else f"{where} reserved by {r.id} of {r.tenant} until {iso(r.end)}"
            if active
            else f"{where} reserved by {r.id} of {r.tenant} from {iso(r.start)} (online work "
            "would run past its start)"
        )
    return mask, "; ".join(said)


@dataclass(frozen=True, slots=True)
class Holder:
    """A running job as a new reservation sees it."""

    job_id: str
    owners: tuple[str, ...]  # its tenant and the tenant's ancestors
    nodes: tuple[str, ...]
    ends_by: float | None  # its start plus its time limit; None: no limit


def displaced(r: Reservation, running: Sequence[Holder]) -> list[str]:
    """The running jobs ``r`` will stop when its window begins: on its nodes, not its
    owner's, and not certain to have ended by then."""
    return [
        h.job_id
        for h in running
        if set(h.nodes) & set(r.nodes)
        and not owned(r, h.owners)
        and (h.ends_by is None or h.ends_by > r.start)
    ]

"""Reservations: a tenant locks nodes for a future time window.

Before the window only jobs whose declared maximum run time ends before it starts may use the
reserved nodes; during the window only the owning tenant (and its sub-tenants) may.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np

from gpupool.model import Job, SpecError


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


def node_mask(
    reservations: Sequence[Reservation],
    job: Job,
    now: float,
    index: dict[str, int],
    owners: tuple[str, ...],
) -> tuple[np.ndarray | None, str]:
    """Nodes ``job`` may use now, and the reason charged to the others.

    ``owners`` is the job's tenant with its ancestors (a reservation of a team covers its
    projects). Returns (None, "") when no reservation restricts the job.
    """
    mask: np.ndarray | None = None
    reason = ""
    for r in reservations:
        if r.end <= now:
            continue
        active = r.start <= now
        if active and r.tenant in owners:
            continue
        ends_in_time = job.max_runtime_s is not None and now + job.max_runtime_s <= r.start
        if not active and ends_in_time:
            continue
        if mask is None:
            mask = np.ones(len(index), dtype=bool)
        for name in r.nodes:
            if name in index:
                mask[index[name]] = False
        if not reason:
            reason = (
                f"held by {r.tenant} ({r.id})"
                if active and r.end >= LAST
                else f"waiting for reservation {r.id} of {r.tenant} to end at {iso(r.end)}"
                if active
                else f"reserved by {r.id} of {r.tenant} from {iso(r.start)} (job would run past it)"
            )
    return mask, reason

"""Reservations: a tenant locks nodes — or N cards on them — for a future time window.

Before the window the reserved nodes run work that will be gone in time, as Slurm's
reservations let jobs that end before them in: jobs whose time limit ends before it starts,
the owner's own work (it keeps running into its window), and preemptible work — every job
but online inference (``online-inference`` class or ``inference`` kind), which is stopped
(requeued, or killed by its ``on_preempt``) when the window begins (``actions/reserve.py``).
Online work that would run past the start goes there only when no other node has room
(``Hold.AHEAD``: a service is never left without a place that lower-priority work may
take), and when the window begins it is moved by a copy started elsewhere first
(make-before-break, ``moved_by_copy``). During the window only the owning tenant (and its
sub-tenants) may use them. A job that may not use them is told which reservations, with
their nodes (``fence``: each as a typed ``KeptOff``).

A reservation of N cards (``cards``) holds only that many of its nodes' cards: others' work
may use the rest of them, as long as the cards free or held by the owner there stay at least
N (the ``room`` a session computes). A job whose cards would eat into the hold is kept off
its nodes, told by how much; at the window's start others' work there is stopped, most
recently started first, until the hold is whole again.
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum

import numpy as np

from gpupool.model import Job, JobKind, SpecError


@dataclass(frozen=True, slots=True)
class Reservation:
    id: str
    tenant: str
    nodes: tuple[str, ...]
    start: float
    end: float
    cards: int | None = None  # only this many of its nodes' cards (None: the whole nodes)

    def __post_init__(self) -> None:
        if self.end <= self.start:
            raise SpecError(f"reservation {self.id}: end must be after start", field="end")
        if not self.nodes:
            raise SpecError(f"reservation {self.id}: no nodes", field="nodes")
        if self.cards is not None and self.cards < 1:
            raise SpecError(f"reservation {self.id}: cards must be at least 1", field="cards")


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


def held_on(nodes: Sequence[str], cards: int, capacity: Mapping[str, int]) -> dict[str, int]:
    """How many of a reservation's N cards each of its nodes holds: packed in the nodes'
    order, each as far as it has cards (``capacity``), so the owner's big jobs find them
    together."""
    held, left = {}, cards
    for node in nodes:
        held[node] = min(left, capacity.get(node, 0))
        left -= held[node]
    return held


def cards_of(job: Job) -> int:
    """The cards (devices or instances) ``job`` takes in all: what it would take of a hold."""
    return job.request.gpu_count * job.gang_size


class Hold(StrEnum):
    """How a reservation keeps a job off nodes."""

    ACTIVE = "active"  # its window is on: its tenant's alone
    AHEAD = "ahead"  # its window lies ahead: online work goes there only when nowhere else fits
    CARDS = "cards"  # N cards of its nodes held: this job's cards would eat into the hold


@dataclass(frozen=True, slots=True)
class KeptOff:
    """One reservation that keeps a job off some of its nodes, as a value; ``str`` is what
    the job's reason says."""

    reservation: Reservation
    nodes: tuple[str, ...]  # the nodes it keeps the job off
    hold: Hold
    active: bool  # its window is on (else: ahead)
    left: int = 0  # a hold of cards: the cards left beside it
    takes: int = 0  # a hold of cards: the cards this job takes

    def __str__(self) -> str:
        r = self.reservation
        where = ", ".join(r.nodes[:4]) + (f" +{len(r.nodes) - 4}" if len(r.nodes) > 4 else "")
        if self.hold is Hold.CARDS:
            when = f"until {iso(r.end)}" if self.active else f"from {iso(r.start)}"
            return (
                f"{r.cards} cards of {where} reserved by {r.id} of {r.tenant} {when}: "
                f"{max(0, self.left)} left beside them, this job takes {self.takes}"
            )
        if self.hold is Hold.AHEAD:
            return (
                f"{where} reserved by {r.id} of {r.tenant} from {iso(r.start)} (online work "
                "goes there only when no other node has room: it is moved when the window "
                "begins)"
            )
        if r.end >= LAST:
            return f"{where} held by {r.tenant} ({r.id})"
        return f"{where} reserved by {r.id} of {r.tenant} until {iso(r.end)}"


@dataclass(frozen=True, slots=True)
class Fence:
    """Every reservation that keeps a job off nodes now."""

    kept_off: tuple[KeptOff, ...] = ()

    def mask(self, index: Mapping[str, int], ahead: bool = True) -> np.ndarray | None:
        """The nodes the job may use; ``ahead`` False: those of reservations whose window
        lies ahead too (online work's last resort). None: no node is kept from it."""
        kept = [k for k in self.kept_off if ahead or k.active]
        if not kept:
            return None
        mask = np.ones(len(index), dtype=bool)
        for k in kept:
            for name in k.nodes:
                if name in index:
                    mask[index[name]] = False
        return mask

    def reason(self, ahead: bool = True) -> str:
        return "; ".join(str(k) for k in self.kept_off if ahead or k.active)

    @property
    def ahead(self) -> tuple[str, ...]:
        """The reservations ahead that keep the job off their nodes unless nowhere else fits."""
        return tuple(k.reservation.id for k in self.kept_off if not k.active)


def fence(
    reservations: Sequence[Reservation],
    job: Job,
    now: float,
    owners: tuple[str, ...],
    room: Callable[[Reservation], dict[str, int]] | None = None,
) -> Fence:
    """The reservations that keep ``job`` off nodes now, each with its nodes.

    ``owners`` is the job's tenant with its ancestors (a reservation of a team covers its
    projects). ``room``: for a reservation of N cards, how many cards others may still take
    on each of its nodes (``Session.hold_room``); the job is kept off those where its cards
    would eat into the hold. Before a window only online work that would run past its start
    is kept off, and only as long as other nodes have room (``Hold.AHEAD``)."""
    kept: list[KeptOff] = []
    for r in reservations:
        if r.end <= now or owned(r, owners):
            continue
        active = r.start <= now
        if not active:
            ends_in_time = job.max_runtime_s is not None and now + job.max_runtime_s <= r.start
            if ends_in_time or preemptible(job):
                continue
        if r.cards is not None and room is not None:
            rooms = room(r)
            short = tuple(n for n in r.nodes if rooms.get(n, 0) < cards_of(job))
            if not short:
                continue  # it fits beside the hold wherever it goes
            left = sum(max(0, rooms.get(n, 0)) for n in r.nodes)
            kept.append(KeptOff(r, short, Hold.CARDS, active, left, cards_of(job)))
            continue
        kept.append(KeptOff(r, r.nodes, Hold.ACTIVE if active else Hold.AHEAD, active))
    return Fence(tuple(kept))


def moved_by_copy(job: Job) -> bool:
    """Whether a reservation that begins moves ``job`` off its nodes by a copy started
    elsewhere first (make-before-break): online work, a service's replica — stopping it
    on a timetable would be an outage."""
    return not preemptible(job)


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

"""What a reservation will do when it begins, before it exists (pure): the jobs it stops, the
online work it moves (a copy elsewhere first) and where, and the online work it would leave
without a place — at its start, or at the start of another reservation during its window
(its copies may have gone to nodes another reservation takes later).

Decided by the engine's own cycle (``run_cycle`` with no pending job, so only the
reservation actions act) at each of those times, the running jobs carried from one to the
next: stopped jobs gone, moved ones where their copies went, jobs whose time limit ends
before gone. Online work stranded with the new reservation that would not be without it is
what the new reservation strands; what the pool as it is already strands is not its doing.
Pending jobs are not part of it: they go where the cycle finds room then.
"""

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace

from gpupool.scheduler.cycle import CycleConfig, CycleResult, run_cycle
from gpupool.scheduler.placer import Placer
from gpupool.scheduler.reasons import Cause
from gpupool.scheduler.reservations import Reservation, moved_by_copy
from gpupool.scheduler.state import ClusterState
from gpupool.scheduler.tenants import TenantTree
from gpupool.scheduler.types import RunningJob


@dataclass(frozen=True, slots=True)
class Move:
    """Online work copied elsewhere when the reservation begins (make-before-break)."""

    job_id: str
    to: tuple[str, ...]  # the nodes its copy starts on


@dataclass(frozen=True, slots=True)
class Stranded:
    """Online work stopped with no room elsewhere for a copy."""

    job_id: str
    at: float  # when (epoch seconds)
    by: str  # the reservation whose window began then
    why: str  # the stop's reason, in words


@dataclass(frozen=True, slots=True)
class ReservationPlan:
    stops: tuple[str, ...] = ()  # jobs stopped when it begins (not online work)
    moves: tuple[Move, ...] = ()
    stranded: tuple[Stranded, ...] = ()
    events: tuple[float, ...] = field(default=())  # the times looked at


def plan_reservation(
    state: ClusterState,
    running: Sequence[RunningJob],
    tenants: Callable[[], TenantTree],
    reservations: Sequence[Reservation],
    new: Reservation,
    now: float,
    config: CycleConfig | None = None,
    placer: Placer | None = None,
) -> ReservationPlan:
    """What ``new`` will do, given the ``reservations`` there are and what runs now.
    ``tenants`` makes a fresh tree (each cycle charges one); ``state`` is left as it is."""
    begins = max(now, new.start)
    times = sorted(
        {begins} | {r.start for r in reservations if begins < r.start < new.end and r is not new}
    )
    others = [r for r in reservations if r.id != new.id]
    config = config or CycleConfig()
    placer = placer or Placer(config.policy)
    with_it = _timeline(state, running, tenants, [*others, new], times, config, placer)
    without = _timeline(state, running, tenants, others, times, config, placer)
    already = {s.job_id for s in _stranded(without, times)}
    stranded = tuple(s for s in _stranded(with_it, times) if s.job_id not in already)
    first = with_it[0][0]
    gone = {s.job_id for s in stranded}
    moves = tuple(
        Move(c.job_id, tuple(dict.fromkeys(c.placement.node_names)))
        for c in first.replacements
        if c.reservation == new.id
    )
    stops = tuple(
        p.job_id
        for p in first.preemptions
        if p.reservation == new.id and p.job_id not in gone and p.job_id not in already
    )
    return ReservationPlan(stops, moves, stranded, tuple(times))


def _stranded(
    results: list[tuple[CycleResult, dict[str, RunningJob]]], times: list[float]
) -> Iterator[Stranded]:
    for (result, jobs), at in zip(results, times, strict=True):
        for p in result.preemptions:
            if p.cause is Cause.RESERVATION and moved_by_copy(jobs[p.job_id].job):
                yield Stranded(p.job_id, at, p.reservation, p.reason)


def _timeline(
    state: ClusterState,
    running: Sequence[RunningJob],
    tenants: Callable[[], TenantTree],
    reservations: Sequence[Reservation],
    times: Sequence[float],
    config: CycleConfig,
    placer: Placer,
) -> list[tuple[CycleResult, dict[str, RunningJob]]]:
    """The cycle at each of ``times``, with the jobs running then (by id)."""
    out = []
    live = {r.job.id: r for r in running}
    for at in times:
        live = {j: r for j, r in live.items() if r.expected_end > at}
        trial = state.clone()
        for job_id in list(trial.placements):
            trial.release(job_id)
        result = run_cycle(trial, list(live.values()), [], tenants(), at, reservations,
                           config, placer)  # fmt: skip
        out.append((result, dict(live)))
        for p in result.preemptions:
            live.pop(p.job_id, None)
        for c in result.replacements:  # the copy runs on; the replica stopped
            if c.job_id in live:
                live[c.job_id] = replace(live[c.job_id], placement=c.placement, start_time=at)
    return out
